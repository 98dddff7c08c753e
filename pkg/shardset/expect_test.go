package shardset

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A reconcile forced right after a write, on caches that have not seen it
// (a burst of edits), sends nothing, and waits for the watch events; once
// they are in, the next reconcile finds nothing to do. Creates, deletes and
// the force-delete annotation's patch alike.
func TestNoWriteTwiceWhileTheCachesLag(t *testing.T) {
	e := fleetEnv(t)
	reconcile := func(shards, force, rv string) {
		t.Helper()
		cm := shardConfigMapObject(shards, force)
		cm.ResourceVersion = rv
		_, err := e.c.onConfigMap(shardCM.String(), cm)
		require.NoError(t, err)
	}
	lag := func() {
		e.deployments.lag()
		e.services.lag()
		e.deployments.reset()
		e.services.reset()
		e.configMaps.enqueues = nil
	}
	catchUp := func() {
		e.deployments.catchUp()
		e.services.catchUp()
	}
	writes := func() int { return len(e.deployments.requests()) + len(e.services.requests()) }

	lag()
	reconcile("a,b", "", "42")
	require.Equal(t, 8, writes(), "2 shards of 2 sources, a Deployment and a Service each")
	reconcile("a,b", "", "43")
	reconcile("a,b", "", "44")
	assert.Equal(t, 8, writes(), "no write is sent again while the caches lag")
	assert.Contains(t, e.configMaps.enqueues, enqueued{Key: shardCM.String(), After: unseenRecheck}, "checked again if no event comes")
	catchUp()
	reconcile("a,b", "", "45")
	assert.Equal(t, 8, writes(), "and none once they caught up: they were all done")

	// Deletes: the force-delete of b, with a GitRepo still on it.
	e.mapped.Objects["b"] = map[string][]string{"gitrepos": {"team/repo"}}
	lag()
	reconcile("a", "b", "50")
	require.Equal(t, 4, writes(), "b's 2 Deployments and 2 Services")
	require.Len(t, e.configMaps.patches, 1, "the force-delete annotation is cleared")
	reconcile("a", "b", "50") // the cache has seen neither the deletes nor the patch
	assert.Equal(t, 4, writes())
	assert.Len(t, e.configMaps.patches, 1)
	catchUp()
	reconcile("a", "b", "50") // the ConfigMap's cache is still behind its patch
	assert.Len(t, e.configMaps.patches, 1, "the patch is not sent again")
	reconcile("a", "", "101") // the patched ConfigMap
	assert.Equal(t, 4, writes())
	assert.Len(t, e.configMaps.patches, 1)
	assert.Zero(t, e.c.writes.Len(), "every write was seen")
}
