package shardset

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"

	"github.com/shardkeeper/shardkeeper/pkg/metrics"
	"github.com/shardkeeper/shardkeeper/pkg/plan"
	"github.com/shardkeeper/shardkeeper/pkg/status"
)

func TestUnknownSeriesNamesTheLargestIDs(t *testing.T) {
	unknown := []plan.Unknown{
		{Shard: "few", Count: 1, Mapped: map[string]int{"gitrepos": 1}},
		{Shard: "many", Count: 5, Mapped: map[string]int{"gitrepos": 2, "helmreleases": 3}},
		{Shard: "tie-b", Count: 2, Mapped: map[string]int{"gitrepos": 2}},
		{Shard: "tie-a", Count: 2, Mapped: map[string]int{"helmreleases": 2}},
	}
	assert.Equal(t, map[seriesKey]int{
		{"many", "gitrepos"}: 2, {"many", "helmreleases"}: 3,
		{"tie-a", "helmreleases"}:         2,
		{metrics.OtherShards, "gitrepos"}: 3,
	}, unknownSeries(unknown, 2))
}

// A flood of IDs on objects yields a bounded number of series.
func TestUnknownSeriesAreBounded(t *testing.T) {
	var unknown []plan.Unknown
	for i := range 1000 {
		unknown = append(unknown, plan.Unknown{Shard: fmt.Sprintf("typo-%d", i), Count: 1, Mapped: map[string]int{"gitrepos": 1}})
	}
	series := unknownSeries(unknown, metrics.MaxUnknownShards)
	assert.Len(t, series, metrics.MaxUnknownShards+1)
	assert.Equal(t, 1000-metrics.MaxUnknownShards, series[seriesKey{metrics.OtherShards, "gitrepos"}])
}

func TestRecordGauges(t *testing.T) {
	recordGauges(plan.Plan{
		Shards: []status.ShardStatus{
			{ID: "a", State: status.StateActive, Ready: 2, Desired: 3, Mapped: map[string]int{"gitrepos": 4}},
			{ID: "b", State: status.StateBlocked, Ready: 3, Desired: 3},
		},
		Unknown: []plan.Unknown{{Shard: "typo", Count: 1, Mapped: map[string]int{"helmreleases": 1}}},
	})
	assert.InDelta(t, 1.0, testutil.ToFloat64(metrics.Shards.WithLabelValues(status.StateBlocked)), 0)
	assert.InDelta(t, 0.0, testutil.ToFloat64(metrics.Shards.WithLabelValues(status.StateConflict)), 0)
	assert.InDelta(t, 2.0, testutil.ToFloat64(metrics.ShardDeployments.WithLabelValues("a", "ready")), 0)
	assert.InDelta(t, 3.0, testutil.ToFloat64(metrics.ShardDeployments.WithLabelValues("a", "desired")), 0)
	assert.InDelta(t, 4.0, testutil.ToFloat64(metrics.MappedObjects.WithLabelValues("a", "gitrepos")), 0)
	assert.InDelta(t, 1.0, testutil.ToFloat64(metrics.UnknownShardObjects.WithLabelValues("typo", "helmreleases")), 0)

	// A shard or an unknown ID that is gone leaves no series behind.
	recordGauges(plan.Plan{Shards: []status.ShardStatus{{ID: "a", State: status.StateActive}}})
	assert.Equal(t, 2, testutil.CollectAndCount(metrics.ShardDeployments))
	assert.Equal(t, 0, testutil.CollectAndCount(metrics.UnknownShardObjects))
}
