#!/usr/bin/env bash
# Builds Rancher's dashboard (the whole UI, not only this extension) from the
# npm package @rancher/shell at the version ui/package.json pins, with npm
# registry packages only: an app folder whose vue.config.js is Shell's own.
# Rancher serves it from CATTLE_UI_DASHBOARD_PATH. The build is cached
# outside the clone, keyed by ui/package.json, ui/yarn.lock and this script;
# the folder to give Rancher is printed.
#
#   hack/rancher-dashboard.sh NODE_BIN_DIRS
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$1:$PATH" CYPRESS_INSTALL_BINARY=0

cache=${SHARDKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/shardkeeper}
key=$(cat ui/package.json ui/yarn.lock "$0" | sha256sum | cut -c1-16)
out=$cache/dashboard-$key
if [ -f "$out/index.html" ]; then echo "$out"; exit 0; fi

mkdir -p "$cache"
work=$(mktemp -d "$cache/.dashboard-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp ui/package.json ui/yarn.lock "$work/"
# Shell's app config; no pkg/ folder, so no extension is built in.
echo "module.exports = require('@rancher/shell/vue.config')(__dirname, {});" >"$work/vue.config.js"
echo "module.exports = require('@rancher/shell/babel.config.js');" >"$work/babel.config.js"
cat >"$work/tsconfig.json" <<'JSON'
{ "extends": "./node_modules/@rancher/shell/tsconfig.json", "compilerOptions": { "baseUrl": "." } }
JSON
echo "building Rancher's dashboard from @rancher/shell into $out (cold: about 4 minutes)" >&2
(
  cd "$work"
  yarn install --frozen-lockfile --non-interactive --ignore-engines >yarn.log 2>&1 || { cat yarn.log; exit 1; }
  ROUTER_BASE=/dashboard/ RESOURCE_BASE=/dashboard/ NODE_OPTIONS=--max-old-space-size=6144 \
    ./node_modules/.bin/vue-cli-service build >build.log 2>&1 || { tail -50 build.log; exit 1; }
) >&2
# Rancher serves index.html from the folder and the assets from dashboard/.
mkdir -p "$work/out" && mv "$work/dist" "$work/out/dashboard" && ln -s dashboard/index.html "$work/out/index.html"
rm -rf "$out" && mv "$work/out" "$out"
echo "$out"
