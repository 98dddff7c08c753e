#!/usr/bin/env bash
# old-release.sh VERSION COMMIT DIR: builds the daemon of the release
# VERSION from its COMMIT, which a full clone has, into DIR/shardkeeper, with
# its chart in DIR/charts/shardkeeper. TestUpgradeFromV010 upgrades from
# v0.1.0's.
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:?usage: old-release.sh VERSION COMMIT DIR}
commit=${2:?usage: old-release.sh VERSION COMMIT DIR}
dir=${3:?usage: old-release.sh VERSION COMMIT DIR}

git cat-file -e "$commit^{commit}" 2>/dev/null || { echo "$version (commit $commit) is not in this clone: fetch the whole history"; exit 1; }
rm -rf "$dir" && mkdir -p "$dir"
git archive "$commit" go.mod go.sum main.go pkg charts/shardkeeper | tar -x -C "$dir"
cd "$dir"
CGO_ENABLED=0 GOWORK=off go build -trimpath -ldflags "-s -w -X github.com/shardkeeper/shardkeeper/pkg/version.Version=$version" -o shardkeeper .
