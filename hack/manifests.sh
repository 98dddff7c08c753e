#!/usr/bin/env bash
# manifests.sh DIR: writes the chart CHART rendered with its default values
# into DIR: shardkeeper.yaml holds everything but the shard ConfigMap, which
# goes to shardkeeper-configmap.yaml, to be created once, so that applying
# the manifests again never resets the shard list; shardkeeper-admission.yaml
# holds the admission policies.
# manifests.sh --check: fails if manifests/ differs from a fresh render.
# HELM is the helm command, with its environment assignments; CHART_NS and
# VAP_API come from the Makefile.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${HELM:?}" "${CHART:?}" "${CHART_NS:?}" "${VAP_API:?}"
read -ra helm_cmd <<<"$HELM"
render() { env "${helm_cmd[@]}" template shardkeeper "$CHART" --namespace "$CHART_NS" "$@"; }
dir=${1:?usage: manifests.sh DIR|--check}

if [ "$dir" = --check ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  "$0" "$tmp"
  if ! diff -ru manifests "$tmp"; then
    echo "manifests/ is out of date with $CHART: run 'make manifests' and commit the result"
    exit 1
  fi
  exit 0
fi

mkdir -p "$dir"
{
  cat <<'HEAD'
# shardkeeper, rendered from charts/shardkeeper with its default values by
# `make manifests`: do not edit. Apply it in a cluster where Fleet runs in
# cattle-fleet-system, and create the shard ConfigMap once:
#   kubectl apply --server-side -f manifests/shardkeeper.yaml
#   kubectl create -f manifests/shardkeeper-configmap.yaml
HEAD
  render --set configMap.create=false
} >"$dir/shardkeeper.yaml"
{
  cat <<'HEAD'
# The shard ConfigMap of manifests/shardkeeper.yaml, rendered by `make manifests`.
# Create it once, with `kubectl create -f`, which never overwrites it; then
# change the shards with `kubectl patch` (see docs/shards.md).
HEAD
  render --show-only templates/configmap.yaml
} >"$dir/shardkeeper-configmap.yaml"
{
  cat <<'HEAD'
# The admission policies of manifests/shardkeeper.yaml, rendered by `make manifests`:
# they refuse a bad shard list at the prompt and warn when an edit removes a
# shard that still has objects. They need Kubernetes 1.30 or later:
#   kubectl apply --server-side -f manifests/shardkeeper-admission.yaml
HEAD
  render --show-only templates/admissionpolicy.yaml --api-versions "$VAP_API"
} >"$dir/shardkeeper-admission.yaml"
