#!/usr/bin/env bash
# release-test.sh CHART: version-check (hack/version-check.sh) on a release
# build of CHART's appVersion, which must pass, and on one of a version the
# chart does not carry, v0.0.0, which must not, for the chart's appVersion.
set -euo pipefail
cd "$(dirname "$0")/.."
chart=${1:?usage: release-test.sh CHART}

app=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$chart/Chart.yaml")
hack/version-check.sh "$app" "$chart"
if out=$(hack/version-check.sh v0.0.0 "$chart" 2>&1); then
  echo "version-check passed the release v0.0.0, which the chart is not"
  exit 1
fi
grep -q 'appVersion is' <<<"$out" || { echo "version-check refused v0.0.0, but not for the chart's appVersion:"; echo "$out"; exit 1; }
echo "version-check refuses a release the chart does not carry"
