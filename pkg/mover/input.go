package mover

import (
	"slices"
	"time"

	"github.com/shardkeeper/shardkeeper/pkg/balance"
	"github.com/shardkeeper/shardkeeper/pkg/mapped"
	"github.com/shardkeeper/shardkeeper/pkg/plan"
)

// owners returns "namespace/name" of the objects that have derived objects
// in the cache, as the derived objects' owner labels (by kind name) name
// them: the GitRepos that have Bundles.
func owners(objs []mapped.Object, ownerLabels map[string]string) map[string]bool {
	out := map[string]bool{}
	if len(ownerLabels) == 0 {
		return out
	}
	for _, o := range objs {
		if label, ok := ownerLabels[o.Kind]; ok && o.Derived {
			if name := o.Labels[label]; name != "" {
				out[o.Namespace+"/"+name] = true
			}
		}
	}
	return out
}

// input turns the cached objects into one round's placement input, and
// returns the objects by Key so that each move can be written with the
// resourceVersion the decision saw.
func input(st State, objs []mapped.Object, now time.Time, budget int) (balance.Input, map[string]mapped.Object) {
	in := balance.Input{Targets: st.Targets, Draining: st.Draining, FailingOver: st.FailingOver, Now: now,
		MaxMoves: budget, Cooldown: st.Placement.Cooldown, Objects: make([]balance.Object, 0, len(objs))}
	index := make(map[string]mapped.Object, len(objs))
	targets := make(map[string]bool, len(st.Targets))
	for _, t := range st.Targets {
		targets[t] = true
	}
	for _, t := range append(slices.Clone(st.Draining), st.FailingOver...) {
		delete(targets, t)
	}
	load := 0
	for _, o := range objs {
		if o.Derived {
			continue // follows the object it was made from: no load of its own
		}
		k := o.Ref()
		index[k] = o
		po := balance.Object{Key: k, Movable: plan.Movable(st.Placement, o), Weight: o.Weight, MovedAt: o.AssignedAt}
		if o.Labelled {
			po.Shard = o.Shard
		}
		// The load to spread: what the targets hold and what is to come.
		if targets[po.Shard] || (po.Shard == "" && po.Movable) {
			load += max(o.Weight, 1)
		}
		in.Objects = append(in.Objects, po)
	}
	if len(targets) > 0 {
		in.Threshold = st.Placement.ThresholdFor(float64(load) / float64(len(targets)))
	}
	return in, index
}
