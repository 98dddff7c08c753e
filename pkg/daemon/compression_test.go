package daemon

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const unreachableKubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`

// The API server is asked for gzip only with --kube-api-compression: from
// 1.37 it compresses every event of an informer's watch on its own.
func TestCompressionOnlyWhenAsked(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(unreachableKubeconfig), 0o600))
	for _, tc := range []struct {
		args     []string
		disabled bool
	}{
		{nil, true},
		{[]string{"--kube-api-compression"}, false},
		{[]string{"--kube-api-compression=false"}, true},
	} {
		o := &Options{}
		fs := flag.NewFlagSet("shardkeeper", flag.ContinueOnError)
		o.AddFlags(fs)
		require.NoError(t, fs.Parse(append([]string{"--kubeconfig", kubeconfig}, tc.args...)))
		require.NoError(t, o.Complete())
		d, err := New(context.Background(), o)
		require.NoError(t, err)
		assert.Equal(t, tc.disabled, d.cfg.DisableCompression, "%v", tc.args)
	}
}
