#!/usr/bin/env bash
# Runs the Rancher tier (e2e/rancher): the user's story in a real Rancher,
# driven by headless Chromium. Builds Rancher and its dashboard (cached
# outside the clone), packages the charts into a Helm repository, and runs
# the test inside a network namespace of its own: loopback only, so nothing
# is reached outside the machine and Rancher's fixed ports clash with
# nothing. A mount namespace gives it an /etc/hosts of its own, where the
# test names the stand-ins' addresses.
#
#   hack/rancher-test.sh BIN_DIR NODE_BIN_DIRS CHROMIUM
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$1 node_path=$2 chromium=$3
out=${RANCHER_ARTIFACTS:-$PWD/dist/rancher-test}

rancher=$(hack/rancher-build.sh)
dashboard=$(hack/rancher-dashboard.sh "$node_path")

rm -rf "$out" && mkdir -p "$out/repo"
helm=(env HELM_CACHE_HOME="$bin/.helm/cache" HELM_CONFIG_HOME="$bin/.helm/config" HELM_DATA_HOME="$bin/.helm/data" "$bin/helm")
"${helm[@]}" package charts/shardkeeper --destination "$out/repo" >/dev/null
"${helm[@]}" package dist/extension-chart/shardkeeper-extension --destination "$out/repo" >/dev/null
"${helm[@]}" repo index "$out/repo" --url http://127.0.0.1:8879

(cd e2e && CGO_ENABLED=0 go test -c -tags rancher -o "$bin/rancher.test" ./rancher)
cp /etc/hosts "$out/hosts"

export SHARDKEEPER_BIN_DIR=$bin RANCHER_BINARY=$rancher RANCHER_DASHBOARD=$dashboard RANCHER_CHART_REPO=$out/repo \
  CHROMIUM=$chromium RANCHER_ARTIFACTS=$out RANCHER_HOSTS_FILE=$out/hosts
sudo=()
[ "$(id -u)" = 0 ] || sudo=(sudo -E) # -E keeps the environment above
# The test runs from its package folder, as go test would run it. The
# inner shell expands the variables exported above.
# shellcheck disable=SC2016
"${sudo[@]}" unshare --net --mount --propagation private bash -c '
  ip link set lo up
  mount --bind "$RANCHER_HOSTS_FILE" /etc/hosts
  cd e2e/rancher && exec "$SHARDKEEPER_BIN_DIR/rancher.test" -test.v -test.count=1 -test.timeout=30m '"${RANCHER_TEST_ARGS:-}"
