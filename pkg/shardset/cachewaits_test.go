package shardset

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardkeeper/shardkeeper/pkg/metrics"
)

// counted returns how much the counter c has grown since the call, as the
// whole number it is.
func counted(c prometheus.Collector) func() int {
	before := testutil.ToFloat64(c)
	return func() int { return int(testutil.ToFloat64(c) - before) }
}

// A reconcile put off because the caches lag behind this process's writes
// counts once; one on caches that caught up does not.
func TestReconcileCacheWaitsAreCounted(t *testing.T) {
	e := fleetEnv(t)
	e.deployments.lag()
	e.services.lag()
	reconcile := func(rv string) {
		t.Helper()
		cm := shardConfigMapObject("a", "")
		cm.ResourceVersion = rv
		_, err := e.c.onConfigMap(shardCM.String(), cm)
		require.NoError(t, err)
	}
	waits := counted(metrics.ReconcileCacheWaits)

	reconcile("42")
	assert.Zero(t, waits(), "nothing written yet, nothing to wait for")
	reconcile("43")
	assert.Equal(t, 1, waits(), "the creates are not in the caches yet")
	e.deployments.catchUp()
	e.services.catchUp()
	reconcile("44")
	assert.Equal(t, 1, waits(), "the caches caught up")
}

// A removal put off because the API server shows an object on the shard
// that the caches do not counts once per reconcile; a removal the API
// server agrees with does not count.
func TestRemovalCacheWaitsAreCounted(t *testing.T) {
	e := removalEnv(t)
	e.mapped.Ahead = map[string]string{"b": "gitrepos team/payments"}
	waits := counted(metrics.RemovalCacheWaits)
	reconcile := func() {
		t.Helper()
		_, err := e.c.onConfigMap(shardCM.String(), shardConfigMapObject("a", ""))
		require.NoError(t, err)
	}

	reconcile()
	reconcile()
	assert.Equal(t, 2, waits(), "b's removal put off twice")
	e.mapped.Ahead = nil
	reconcile()
	require.Len(t, e.deployments.requests(), 2, "b's Deployments are deleted")
	assert.Equal(t, 2, waits())
}
