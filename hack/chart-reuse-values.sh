#!/usr/bin/env bash
# chart-reuse-values.sh CHART OLD_VALUES ARGS...
#
# Renders CHART as `helm upgrade --reuse-values` from an older release does:
# Helm then takes the old release's chart values (OLD_VALUES, that release's
# values.yaml) in place of the new chart's values.yaml, so that a key added
# since is missing, not defaulted. Each further argument is one set of
# `helm template` arguments (the user's --set, the API versions); for each,
# the render with OLD_VALUES must succeed and equal the render with the new
# chart's own defaults, since OLD_VALUES differs from them only by the keys
# it lacks. HELM is the helm command, with its environment assignments.
set -euo pipefail

chart=$1 old=$2
shift 2
read -ra helm <<<"${HELM:-helm}"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r "$chart" "$tmp/chart"
cp "$old" "$tmp/chart/values.yaml"

for set in "$@"; do
  read -ra args <<<"$set"
  want=$(env "${helm[@]}" template shardkeeper "$chart" "${args[@]}")
  if ! got=$(env "${helm[@]}" template shardkeeper "$tmp/chart" "${args[@]}" 2>&1); then
    echo "helm template with the values of $old (helm upgrade --reuse-values) $set: fails:"
    echo "$got"
    exit 1
  fi
  if ! diff -u <(echo "$want") <(echo "$got") >"$tmp/diff"; then
    echo "helm template with the values of $old (helm upgrade --reuse-values) $set: renders otherwise than the chart's defaults:"
    cat "$tmp/diff"
    exit 1
  fi
  echo "helm upgrade --reuse-values from $old ${set:-(no --set)}: renders as the chart's defaults"
done
