//go:build tools

// Package tools pins the control-plane commands that the e2e harness builds,
// kwok, which plays the kubelet, and kubectl and helm for the demo and the
// chart's tests. One module holds them all, so that they share one version of
// every k8s.io library and the Go build cache compiles each package once.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
