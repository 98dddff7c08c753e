// ui/ is the Rancher UI extension, not Go. This file makes it a module of its
// own, outside go.work, so that the daemon's ./... (go vet, go test,
// golangci-lint) never reaches the Go files that some npm packages ship in
// ui/node_modules.
module github.com/shardkeeper/shardkeeper/ui

go 1.26.0
