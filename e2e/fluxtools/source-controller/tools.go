//go:build tools

// Package tools pins source-controller's main package, so that go mod tidy
// keeps every module the binary is built from.
package tools

import _ "github.com/fluxcd/source-controller"
