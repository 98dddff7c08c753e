package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRunListKeepsItsOrder(t *testing.T) {
	var l runList
	require.NoError(t, l.Set("15, 7"))
	assert.Equal(t, runList{15, 7}, l)
	assert.Equal(t, 15, l.of(0))
	assert.Equal(t, 7, l.of(1))
	assert.Equal(t, 7, l.of(2), "the last count applies to any further shard count")
	assert.Equal(t, "15,7", l.String())
}

func TestRunListRefusesWhatIsNotARun(t *testing.T) {
	for _, v := range []string{"0", "5,-1", "x", "5,,7", ""} {
		var l runList
		assert.Error(t, l.Set(v), v)
	}
}
