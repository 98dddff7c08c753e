package testfixture

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Helm returns make's Helm, $SHARDKEEPER_BIN_DIR/helm, and skips the test
// when the variable is not set: make test-unit sets it.
func Helm(t *testing.T) string {
	t.Helper()
	if os.Getenv("SHARDKEEPER_BIN_DIR") == "" {
		t.Skip("$SHARDKEEPER_BIN_DIR is not set: make test-unit runs this test with the Helm it builds")
	}
	helm := filepath.Join(os.Getenv("SHARDKEEPER_BIN_DIR"), "helm")
	_, err := os.Stat(helm) //nolint:gosec // G703: make's own bin directory, by design
	require.NoError(t, err, "no Helm at $SHARDKEEPER_BIN_DIR/helm: build it with make helm")
	return helm
}

// HelmTemplate is `helm template release chart --namespace namespace
// args...` with helm, Helm's own directories beside it as make keeps
// them, so that nothing of the user's Helm set-up changes what renders.
func HelmTemplate(t *testing.T, helm, release, chart, namespace string, args ...string) string {
	t.Helper()
	out, err := TryHelmTemplate(t, helm, release, chart, namespace, args...)
	require.NoError(t, err)
	return out
}

// TryHelmTemplate is HelmTemplate for a render that may fail: its error
// carries Helm's message.
func TryHelmTemplate(t *testing.T, helm, release, chart, namespace string, args ...string) (string, error) {
	t.Helper()
	bin := filepath.Dir(helm)
	cmd := exec.CommandContext(t.Context(), helm, append([]string{"template", release, chart, "--namespace", namespace}, args...)...) //nolint:gosec // G204: make's Helm, with the test's own arguments
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+bin+"/.helm/cache",
		"HELM_CONFIG_HOME="+bin+"/.helm/config", "HELM_DATA_HOME="+bin+"/.helm/data")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("helm template %v: %w: %s", args, err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}
