#!/usr/bin/env bash
# ui-test.sh STAGE DIST: the UI extension's jest tests, then its page,
# built and staged in the extension chart STAGE, rendered in headless
# Chromium on the test host (ui/test/server.js); the host's URL, Chromium's
# profile and the like go to DIST. PATH must hold Node and yarn (the
# Makefile's UI_ENV).
set -euo pipefail
cd "$(dirname "$0")/.."
stage=${1:?usage: ui-test.sh STAGE DIST}
dist=${2:?usage: ui-test.sh STAGE DIST}
# Headless Chromium's flags: they keep it off the network.
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
  --disable-component-update --disable-sync --hide-scrollbars '--window-size=1280,900' --virtual-time-budget=10000)

# jest also serves the chart's files as the chart's own server does, with
# busybox httpd.
hack/apt-install.sh busybox busybox
echo "yarn --silent jest --ci"
(cd ui && yarn --silent jest --ci)

chromium=$(hack/chromium.sh)
# The test host serves the staged chart's files until this script exits;
# it writes its URL once it listens.
rm -f "$dist/ui-server.url"
node ui/test/server.js "$stage" >"$dist/ui-server.url" &
pid=$!
trap 'kill "$pid"' EXIT
for _ in $(seq 100); do [ -s "$dist/ui-server.url" ] && break; sleep 0.1; done
url=$(cat "$dist/ui-server.url")

dom=$("$chromium" "${flags[@]}" --user-data-dir="$dist/chromium-profile" --dump-dom "$url" 2>/dev/null || true)
if ! grep -q 'data-host="done"' <<<"$dom" || ! grep -q '>Blocked<' <<<"$dom"; then
  echo "Chromium: the test host did not render the extension's page:"
  grep -o 'data-host="[a-z]*"' <<<"$dom" || true
  exit 1
fi
echo "Chromium: the built extension loads and renders the Shards page"
