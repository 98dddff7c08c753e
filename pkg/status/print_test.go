package status

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPrint(t *testing.T) {
	s := Status{Shards: []ShardStatus{
		{ID: "shard0", State: StateActive, Ready: 4, Desired: 4, Mapped: map[string]int{"helmreleases": 1, "gitrepos": 2}},
		{ID: "shard1", State: StateBlocked, Ready: 3, Desired: 4, Mapped: map[string]int{"gitrepos": 1}, Message: "still mapped"},
	}}
	var buf bytes.Buffer
	require.NoError(t, Print(&buf, s, ""))
	assert.Equal(t, `SHARD    STATE     READY   MAPPED
shard0   Active    4/4     gitrepos=2,helmreleases=1
shard1   Blocked   3/4     gitrepos=1

shard1: still mapped
`, buf.String())

	buf.Reset()
	require.NoError(t, Print(&buf, s, "json"))
	var back map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &back))
	assert.Len(t, back["shards"], 2)

	buf.Reset()
	require.NoError(t, Print(&buf, s, "yaml"))
	assert.Contains(t, buf.String(), "state: Blocked")

	assert.Error(t, Print(&buf, s, "xml"))
}
