package statuscmd

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestHelpIsNoFailure(t *testing.T) {
	assert.NoError(t, Run([]string{"--help"}, "cattle-fleet-system", nil), "asking for the usage exits 0")
	assert.ErrorContains(t, Run([]string{"--no-such-flag"}, "cattle-fleet-system", nil), "no-such-flag")
}
