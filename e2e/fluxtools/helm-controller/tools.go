//go:build tools

// Package tools pins helm-controller's main package, so that go mod tidy
// keeps every module the binary is built from.
package tools

import _ "github.com/fluxcd/helm-controller"
