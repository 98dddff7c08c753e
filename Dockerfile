# Build: a static binary, version stamped by the linker.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY main.go ./
COPY pkg/ pkg/
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath \
    -ldflags "-s -w -X github.com/shardkeeper/shardkeeper/pkg/version.Version=${VERSION}" \
    -o /out/shardkeeper .

# Run: no shell, no package manager, a non-root user.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/shardkeeper /shardkeeper
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["/shardkeeper"]
