#!/usr/bin/env bash
# version-check.sh VERSION CHART: with a release VERSION (vX.Y.Z), fails
# unless CHART's version and appVersion, CHANGELOG.md and the daemon built
# as `make build` builds it (GO_LDFLAGS), stamped VERSION, all say it.
#
# One tag vX.Y.Z versions everything: the binary (--version), the image's
# tag, the chart's appVersion (the tag its image defaults to) and, without
# the "v", the chart's version.
set -euo pipefail
cd "$(dirname "$0")/.."
v=${1?usage: version-check.sh VERSION CHART}
chart=${2:?usage: version-check.sh VERSION CHART}

if ! [[ $v =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
  echo "VERSION=$v is not a release (vX.Y.Z): nothing to check"
  exit 0
fi
version=$(sed -n 's/^version: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$chart/Chart.yaml")
app=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$chart/Chart.yaml")

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The last -X of a name wins: GO_LDFLAGS stamps make's VERSION, this one v.
CGO_ENABLED=0 GOWORK=off go build -trimpath \
  -ldflags "${GO_LDFLAGS:?} -X github.com/shardkeeper/shardkeeper/pkg/version.Version=$v" -o "$tmp/shardkeeper" .
bin=$("$tmp/shardkeeper" --version || true)

fail=
[ "$version" = "${v#v}" ] || { echo "$chart/Chart.yaml: version is $version, the release $v needs ${v#v}"; fail=1; }
[ "$app" = "$v" ] || { echo "$chart/Chart.yaml: appVersion is $app, the release needs $v"; fail=1; }
[ "$bin" = "$v" ] || { echo "shardkeeper --version prints $bin, the release needs $v"; fail=1; }
grep -q "^## $v\b" CHANGELOG.md || { echo "CHANGELOG.md: no section '## $v'"; fail=1; }
[ -z "$fail" ] || exit 1
echo "$v: the chart's version and appVersion, CHANGELOG.md and shardkeeper --version agree"
