#!/usr/bin/env bash
# cross.sh BIN_DIR PLATFORMS: cross-compiles the daemon into
# BIN_DIR/<os>_<arch>/shardkeeper for each os/arch of the comma-separated
# PLATFORMS, with the image's build flags (GO_LDFLAGS).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:?usage: cross.sh BIN_DIR PLATFORMS}
platforms=${2:?usage: cross.sh BIN_DIR PLATFORMS}

IFS=, read -ra platforms <<<"$platforms"
for p in "${platforms[@]}"; do
  os=${p%/*} arch=${p#*/}
  echo "go build for $os/$arch"
  CGO_ENABLED=0 GOWORK=off GOOS=$os GOARCH=$arch \
    go build -trimpath -ldflags "${GO_LDFLAGS:?}" -o "$bin/${os}_${arch}/shardkeeper" .
done
