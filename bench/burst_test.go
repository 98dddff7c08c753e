package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
)

func TestSpreadTracker(t *testing.T) {
	want := map[string]bool{"gitrepos/a": true, "gitrepos/b": true, "helmreleases/c": true, "helmreleases/d": true}
	tr := newSpreadTracker(want, []string{"p0", "p1"}, 1)
	tr.observe("gitrepos/a", "p0")
	tr.observe("gitrepos/b", "p0")
	tr.observe("helmreleases/c", "p0")
	tr.observe("gitrepos/other", "p1") // not of the burst
	assert.False(t, tr.labelled())
	assert.False(t, tr.within(), "an object without a label")
	tr.observe("helmreleases/d", "p0")
	assert.True(t, tr.labelled())
	assert.False(t, tr.within(), "4-0 is more than 1")
	tr.observe("gitrepos/a", "p1")
	assert.False(t, tr.within(), "3-1 is more than 1")
	tr.observe("gitrepos/b", "p1")
	assert.True(t, tr.within(), "2-2")
	assert.Equal(t, map[string]int{"p0": 2, "p1": 2}, tr.loads)

	tr.observe("gitrepos/b", "")
	assert.False(t, tr.labelled(), "deleted, or its label removed")
	tr.observe("gitrepos/b", "elsewhere")
	assert.True(t, tr.labelled())
	assert.False(t, tr.within(), "an object on a shard placement does not spread over")
}

func TestBurstThresholdIsTheSettingsOwn(t *testing.T) {
	n, err := burstThreshold("namespaces: [bench-place]\n"+burstPacing, 1000, 16)
	require.NoError(t, err)
	assert.Equal(t, 7, n, "10% of a mean load of 62.5, rounded up")
	n, err = burstThreshold("threshold: 3", 1000, 16)
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	_, err = burstThreshold("maxMoves: many", 1000, 16)
	assert.Error(t, err)
}

func TestDecodeObjectsSkipsEmptyDocuments(t *testing.T) {
	objs, err := decodeObjects([]byte("---\n# Source: x\n---\napiVersion: v1\nkind: A\nmetadata:\n  name: a\n---\n\n---\nkind: B\n"))
	require.NoError(t, err)
	require.Len(t, objs, 2)
	assert.Equal(t, []string{"A", "B"}, []string{objs[0].GetKind(), objs[1].GetKind()})
	_, err = decodeObjects([]byte("kind: [a"))
	assert.Error(t, err)
}

func TestBurstFlowIsOneLine(t *testing.T) {
	p := &placementBurst{Settings: "namespaces: [bench-place]\nmaxMoves: 200\n"}
	assert.Equal(t, "{namespaces: [bench-place], maxMoves: 200}", p.Flow())
}

func TestRelabelledCountsTheMovesMade(t *testing.T) {
	r := &burstRun{Moves: map[string]float64{"Rebalance/moved": 480, "Rebalance/conflict": 3, "Assign/moved": 2, "Assign/error": 1}}
	assert.Equal(t, 482, r.relabelled(), "conflicts and errors relabel nothing")
	assert.Zero(t, (&burstRun{}).relabelled())
}

func TestBornCount(t *testing.T) {
	var c bornCount
	n, loads := c.total()
	assert.Zero(t, n)
	assert.Empty(t, loads)
	c.add("p00")
	c.add("p01")
	c.add("p00")
	n, loads = c.total()
	assert.Equal(t, 3, n)
	assert.Equal(t, map[string]int{"p00": 2, "p01": 1}, loads)
}

func TestPlacementPacingOutrunsTheClient(t *testing.T) {
	p, err := shardconfig.ParsePlacement(placementSetting())
	require.NoError(t, err)
	perSecond := float64(p.MaxMoves) / p.Interval.Seconds()
	assert.Greater(t, perSecond, float64(daemonQPS),
		"the placement part times placement against the client's rate limit: its pacing must not bind first")
	assert.Equal(t, []string{placeNS}, p.Namespaces)
}
