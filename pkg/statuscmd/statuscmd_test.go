package statuscmd

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHelpIsNoFailure(t *testing.T) {
	require.NoError(t, Run([]string{"--help"}, "cattle-fleet-system", nil), "asking for the usage exits 0")
	assert.ErrorContains(t, Run([]string{"--no-such-flag"}, "cattle-fleet-system", nil), "no-such-flag")
}

func TestPluginUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"--help"}, {"-h"}, {"help"}} {
		var out, errOut bytes.Buffer
		require.NoError(t, Plugin(args, "ns", &out, &errOut), args)
		assert.Contains(t, errOut.String(), "kubectl shardkeeper status", args)
		assert.Empty(t, out.String())
	}
	var out, errOut bytes.Buffer
	err := Plugin([]string{"delete"}, "ns", &out, &errOut)
	require.ErrorContains(t, err, `unknown command "delete"`)
	assert.Contains(t, errOut.String(), "Usage:")
}

// `kubectl shardkeeper status --help` is the status command's own help.
func TestPluginRunsStatus(t *testing.T) {
	var out, errOut bytes.Buffer
	require.NoError(t, Plugin([]string{"status", "--help"}, "ns", &out, &errOut))
	assert.Empty(t, errOut.String(), "no plugin usage: the status command ran")
}
