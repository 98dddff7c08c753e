// Package version holds the build's version, stamped by the linker:
// -ldflags "-X github.com/shardkeeper/shardkeeper/pkg/version.Version=v1.2.3".
//
// It is the shardkeeper command's own: not a supported API, and it may
// change in any release.
package version

// Version is the release this binary was built from.
var Version = "dev"
