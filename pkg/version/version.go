// Package version holds the build's version, stamped by the linker:
// -ldflags "-X github.com/shardkeeper/shardkeeper/pkg/version.Version=v1.2.3".
package version

// Version is the release this binary was built from.
var Version = "dev"
