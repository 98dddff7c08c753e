#!/usr/bin/env bash
# node.sh DIR NODE_VERSION YARN_VERSION: fetches Node (the npm registry's
# node-linux-<arch> package) and yarn from the npm registry into DIR/node
# and DIR/yarn. The machine's npm only fetches them: Debian's npm where the
# machine has none.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:?usage: node.sh DIR NODE_VERSION YARN_VERSION}
node=${2:?usage: node.sh DIR NODE_VERSION YARN_VERSION}
yarn=${3:?usage: node.sh DIR NODE_VERSION YARN_VERSION}
arch=$(uname -m)
arch=${arch/x86_64/x64}
arch=${arch/aarch64/arm64}

hack/apt-install.sh npm npm
rm -rf "$dir" && mkdir -p "$dir/node" "$dir/yarn"
cd "$dir"
echo "npm pack node-linux-$arch@$node yarn@$yarn"
npm pack --silent "node-linux-$arch@$node" "yarn@$yarn" >/dev/null
tar -xzf "node-linux-$arch-$node.tgz" -C node --strip-components=1
tar -xzf "yarn-$yarn.tgz" -C yarn --strip-components=1
rm -f ./*.tgz
