package daemon

import (
	"encoding/json"
	"log"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"
)

// captureLog sets up logging as the daemon does, with the process's
// standard error going to a file, and returns a function that reads the
// log's lines once there are want of them.
func captureLog(t *testing.T, level string, want int) func() []string {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "log")
	require.NoError(t, err)
	stderr := os.Stderr
	os.Stderr = f
	t.Cleanup(func() {
		os.Stderr = stderr
		klog.ClearLogger()
		log.SetOutput(stderr)
		require.NoError(t, setupLogging("info", "text"))
		logrus.SetOutput(stderr)
	})
	require.NoError(t, setupLogging(level, "json"))
	logrus.SetOutput(f)
	return func() []string {
		var lines []string
		// The standard library's log reaches logrus through a pipe.
		assert.Eventually(t, func() bool {
			klog.Flush()
			b, err := os.ReadFile(f.Name())
			require.NoError(t, err)
			lines = strings.Split(strings.TrimRight(string(b), "\n"), "\n")
			return len(lines) >= want
		}, 5*time.Second, 10*time.Millisecond)
		return lines
	}
}

// logged runs emit with the daemon's JSON logging at level and returns the
// entries it logged, which must be want: why says which lines are left out.
func logged(t *testing.T, level string, want int, why string, emit func()) []map[string]any {
	t.Helper()
	lines := captureLog(t, level, want)
	emit()
	got := entries(t, lines())
	require.Len(t, got, want, why)
	return got
}

// entries parses every line as a JSON object.
func entries(t *testing.T, lines []string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range lines {
		var e map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &e), "not JSON: %s", l)
		out = append(out, e)
	}
	return out
}

func TestJSONLogIsJSONOnEveryLine(t *testing.T) {
	got := logged(t, "info", 4, "klog's V(2) line is left out at info", func() {
		klog.InfoS("Caches populated", "type", "*v1.Deployment", "reflector", "k8s.io/client-go/informers")
		klog.Errorf("unable to sync caches for %s", "deployments")
		klog.Background().WithName("leaderelection").Info("Successfully acquired lease", "lock", klog.KRef("cattle-fleet-system", "shardkeeper"))
		klog.V(2).Info("watch restarted")
		log.Print("http: TLS handshake error")
	})
	assert.Equal(t, "Caches populated", got[0]["msg"])
	assert.Equal(t, "*v1.Deployment", got[0]["type"])
	assert.Equal(t, "error", got[1]["level"])
	assert.Equal(t, "unable to sync caches for deployments", got[1]["msg"])
	assert.Equal(t, "cattle-fleet-system/shardkeeper", got[2]["lock"])
	assert.Equal(t, "leaderelection", got[2]["logger"])
	assert.Equal(t, "warning", got[3]["level"])
	assert.Equal(t, "http: TLS handshake error", got[3]["msg"])
}

func TestKlogVerbosityFollowsLogLevel(t *testing.T) {
	got := logged(t, "debug", 2, "klog's V(6) lines stay out at debug", func() {
		klog.V(2).InfoS("watch restarted", "resource", "deployments")
		klog.V(6).Info("GET https://10.0.0.1/api")
		klog.Warning("the last line")
	})
	assert.Equal(t, "debug", got[0]["level"])
	assert.Equal(t, "watch restarted", got[0]["msg"])
	assert.Equal(t, "the last line", got[1]["msg"])
}
