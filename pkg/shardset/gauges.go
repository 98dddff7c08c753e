package shardset

import (
	"cmp"
	"slices"

	"github.com/shardkeeper/shardkeeper/pkg/metrics"
	"github.com/shardkeeper/shardkeeper/pkg/plan"
	"github.com/shardkeeper/shardkeeper/pkg/status"
)

// allStates are exported as 0 when no shard is in them, so that a query
// for a state finds a series rather than nothing.
var allStates = []string{status.StateActive, status.StatePending, status.StateBlocked, status.StateWaiting,
	status.StateConflict, status.StateDraining, status.StateDrained, status.StateFailedOver, status.StateWriteFailing}

// recordGauges sets the gauges that describe the shard set from a plan.
// Every series is per shard or per kind, never per object, so /metrics
// stays the same size at any number of objects.
func recordGauges(p plan.Plan) {
	metrics.Shards.Reset()
	metrics.MappedObjects.Reset()
	metrics.ShardDeployments.Reset()
	for _, state := range allStates {
		metrics.Shards.WithLabelValues(state).Set(0)
	}
	for _, s := range p.Shards {
		metrics.Shards.WithLabelValues(s.State).Inc()
		metrics.ShardDeployments.WithLabelValues(s.ID, "desired").Set(float64(s.Desired))
		metrics.ShardDeployments.WithLabelValues(s.ID, "ready").Set(float64(s.Ready))
		for kind, n := range s.Mapped {
			metrics.MappedObjects.WithLabelValues(s.ID, kind).Set(float64(n))
		}
	}
	metrics.UnknownShardObjects.Reset()
	for key, n := range unknownSeries(p.Unknown, metrics.MaxUnknownShards) {
		metrics.UnknownShardObjects.WithLabelValues(key.shard, key.kind).Set(float64(n))
	}
}

// seriesKey is one series of UnknownShardObjects.
type seriesKey struct{ shard, kind string }

// unknownSeries counts the objects on unknown shards by shard and kind,
// naming the named IDs with the most objects (ties by ID) and summing the
// rest under metrics.OtherShards: the IDs come from labels anyone may set.
func unknownSeries(unknown []plan.Unknown, named int) map[seriesKey]int {
	out := map[seriesKey]int{}
	for i, u := range largestFirst(unknown) {
		shard := u.Shard
		if i >= named {
			shard = metrics.OtherShards
		}
		for kind, n := range u.Mapped {
			out[seriesKey{shard, kind}] += n
		}
	}
	return out
}

// largestFirst sorts a copy of unknown by objects, most first (ties by
// ID): the metrics and the status name the first IDs of it.
func largestFirst(unknown []plan.Unknown) []plan.Unknown {
	sorted := slices.Clone(unknown)
	slices.SortFunc(sorted, func(a, b plan.Unknown) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Shard, b.Shard))
	})
	return sorted
}
