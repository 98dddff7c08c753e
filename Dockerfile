# Build: a static binary, version stamped by the linker. The build stage runs
# on the build machine's platform and cross-compiles for the target one, so a
# multi-arch build (make image) needs no emulation: the run stage only copies.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
# Only the product's module is copied: GOWORK=off keeps go from looking for
# the workspace (go.work) and its test and benchmark modules.
ENV GOWORK=off
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY main.go ./
COPY pkg/ pkg/
ARG VERSION=dev
ARG TARGETOS TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath \
    -ldflags "-s -w -X github.com/shardkeeper/shardkeeper/pkg/version.Version=${VERSION}" \
    -o /out/shardkeeper .

# Run: no shell, no package manager, a non-root user.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/shardkeeper /shardkeeper
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["/shardkeeper"]
