#!/usr/bin/env bash
# image.sh: builds the multi-arch image IMAGE for PLATFORMS with docker
# buildx, on the builder BUILDER (a docker-container one, created when
# missing), from the Dockerfile with VERSION.
#
# A multi-platform image cannot be loaded into the local image store, so it
# is pushed (PUSH=true) or written as an OCI archive into DIST, which skopeo
# or crane can copy into any registry.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${IMAGE:?}" "${PLATFORMS:?}" "${BUILDER:?}" "${DIST:?}" "${VERSION:?}"

missing=
if ! command -v docker >/dev/null; then
  missing="docker (https://docs.docker.com/engine/install/)"
elif ! docker buildx version >/dev/null 2>&1; then
  missing="the docker buildx plugin (https://docs.docker.com/build/install-buildx/)"
elif ! docker info >/dev/null 2>&1; then
  missing="a running docker daemon (docker info fails)"
fi
if [ -n "$missing" ]; then
  echo "make image needs $missing; it is not available here."
  echo "make cross checks the cross-compile for $PLATFORMS without it."
  exit 1
fi

docker buildx inspect "$BUILDER" >/dev/null 2>&1 || docker buildx create --name "$BUILDER" --driver docker-container >/dev/null
mkdir -p "$DIST"
if [ "${PUSH:-false}" = true ]; then
  output=(--push)
else
  output=(--output "type=oci,dest=$DIST/shardkeeper-$VERSION.oci.tar")
fi
cmd=(docker buildx build --builder "$BUILDER" --platform "$PLATFORMS" --build-arg "VERSION=$VERSION" -t "$IMAGE" "${output[@]}" .)
echo "${cmd[*]}"
"${cmd[@]}"
