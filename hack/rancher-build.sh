#!/usr/bin/env bash
# Builds Rancher (its server binary) from unchanged `git archive`s of
# rancher/rancher and of the four dependencies the Go module proxy refuses,
# found in the folder RANCHER_SOURCES. The binary is cached outside the clone,
# keyed by the archives' checksums and the Go version; the path is printed.
#
#   hack/rancher-build.sh            # prints <cache>/rancher-<key>/rancher
set -euo pipefail

RANCHER_TAG=v2.15.0
# The archives and the tags they were made from (git archive --prefix=<repo>/).
ARCHIVES=(
  "rancher-v2.15.0.tar.gz rancher/rancher v2.15.0"
  "remotedialer-proxy-v0.8.0.tar.gz rancher/remotedialer-proxy v0.8.0"
  "cluster-api-provider-rke2-v0.25.0.tar.gz rancher/cluster-api-provider-rke2 v0.25.0"
  "gke-operator-v1.15.0.tar.gz rancher/gke-operator v1.15.0"
  "ali-operator-v1.15.0-rc.3.tar.gz rancher/ali-operator v1.15.0-rc.3"
)

src=${RANCHER_SOURCES:-}
missing=()
for a in "${ARCHIVES[@]}"; do
  read -r file _ _ <<<"$a"
  [ -n "$src" ] && [ -f "$src/$file" ] || missing+=("$a")
done
if [ ${#missing[@]} -gt 0 ]; then
  {
    echo "RANCHER_SOURCES must name a folder holding these archives${src:+ (not all are in $src)}:"
    for a in "${ARCHIVES[@]}"; do
      read -r file repo tag <<<"$a"
      echo "  $file   git -C <clone of github.com/$repo> archive --format=tar.gz --prefix=${repo#rancher/}/ $tag > $file"
    done
    echo "The Go module proxy refuses these modules; every other dependency comes from it."
  } >&2
  exit 2
fi

cache=${SHARDKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/shardkeeper}
key=$( { for a in "${ARCHIVES[@]}"; do read -r file _ _ <<<"$a"; sha256sum <"$src/$file"; done; go env GOVERSION; } | sha256sum | cut -c1-16)
out=$cache/rancher-$key
if [ -x "$out/rancher" ]; then echo "$out/rancher"; exit 0; fi

work=$(mktemp -d "$cache/.rancher-build.XXXXXX" 2>/dev/null || { mkdir -p "$cache" && mktemp -d "$cache/.rancher-build.XXXXXX"; })
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/deps"
for a in "${ARCHIVES[@]}"; do
  read -r file repo _ <<<"$a"
  if [ "$repo" = rancher/rancher ]; then tar -xzf "$src/$file" -C "$work"; else tar -xzf "$src/$file" -C "$work/deps"; fi
done
cd "$work/rancher"
for a in "${ARCHIVES[@]:1}"; do
  read -r _ repo _ <<<"$a"
  go mod edit -replace "github.com/$repo=../deps/${repo#rancher/}"
done
echo "building Rancher $RANCHER_TAG into $out (cold: about 3 min of downloads, 10 to 16 min of build)" >&2
GOFLAGS=-mod=mod CGO_ENABLED=0 go build -tags k8s -trimpath \
  -ldflags "-s -X github.com/rancher/rancher/pkg/version.Version=$RANCHER_TAG" -o "$work/rancher.bin" . >&2
mkdir -p "$out" && mv "$work/rancher.bin" "$out/rancher"
echo "$out/rancher"
