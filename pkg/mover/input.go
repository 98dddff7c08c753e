package mover

import (
	"maps"
	"slices"
	"time"

	"github.com/shardkeeper/shardkeeper/pkg/balance"
	"github.com/shardkeeper/shardkeeper/pkg/placement"
	"github.com/shardkeeper/shardkeeper/pkg/plan"
	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
)

// owners returns "namespace/name" of the objects that have derived objects
// in the cache, as the derived objects' owner labels (by kind name) name
// them: the GitRepos that have Bundles.
func owners(objs []placement.Object, ownerLabels map[string]string) map[string]bool {
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

// bumping returns, by Ref, the objects whose move bumps a field: those of a
// kind with BumpOnMove that have derived objects.
func (p *Mover) bumping(objs []placement.Object) map[string]bool {
	own := owners(objs, p.ownerLabels)
	out := map[string]bool{}
	for _, o := range objs {
		if k, ok := p.kinds[o.Kind]; ok && k.BumpOnMove != "" && own[o.Namespace+"/"+o.Name] {
			out[o.Ref()] = true
		}
	}
	return out
}

// receiving returns the shards that may receive objects: the targets that
// are neither draining nor failing over.
func receiving(st placement.State) map[string]bool {
	out := make(map[string]bool, len(st.Targets))
	for _, t := range st.Targets {
		out[t] = true
	}
	for _, t := range append(slices.Clone(st.Draining), st.FailingOver...) {
		delete(out, t)
	}
	return out
}

// leavingGroups returns the groups (placement.Object.Group) of which an
// object leaves a failing shard: its kind's controller is down there. The
// whole group leaves with it, even the objects whose controllers still run
// on that shard: a group is never split.
func leavingGroups(p shardconfig.Placement, failing map[string][]string, objs []placement.Object) map[string]bool {
	out := map[string]bool{}
	if len(failing) == 0 {
		return out
	}
	for _, o := range objs {
		if g := o.Group(p); g != "" && o.Labelled && slices.Contains(failing[o.Shard], o.Kind) {
			out[g] = true
		}
	}
	return out
}

// input turns the cached objects into one round's placement input, and
// returns the objects by Key so that each move can be written with the
// resourceVersion the decision saw. The objects in bumped start work when
// they move, so their assignments are paced, as are all assignments while
// the unsharded controllers serve the unlabelled objects. fresh says that
// budget is a whole pacing window's (balance.Input.FreshWindow).
func input(st placement.State, objs []placement.Object, now time.Time, budget int, fresh bool, bumped map[string]bool) (balance.Input, map[string]placement.Object) {
	in := balance.Input{Targets: st.Targets, Draining: st.Draining, FailingOver: st.FailingOver, Now: now,
		MaxMoves: budget, FreshWindow: fresh, Cooldown: st.Placement.Cooldown, Objects: make([]balance.Object, 0, len(objs))}
	leaving := leavingGroups(st.Placement, st.FailingKinds, objs)
	index := make(map[string]placement.Object, len(objs))
	targets := receiving(st)
	known := map[string]bool{}
	for _, ids := range [][]string{st.Shards, st.Targets, st.Draining, st.FailingOver} {
		for _, id := range ids {
			known[id] = true
		}
	}
	gone := map[string]bool{}
	load := 0
	for _, o := range objs {
		if o.Derived {
			continue // follows the object it was made from: no load of its own
		}
		k := o.Ref()
		index[k] = o
		group := o.Group(st.Placement)
		stays := plan.StaysOnFailover(st.FailingKinds, o) && !leaving[group]
		po := balance.Object{Key: k, Movable: plan.Movable(st.Placement, o) && !stays,
			Weight: o.Weight, MovedAt: o.AssignedAt, Paced: st.Served || bumped[k], Group: group}
		if o.Labelled {
			po.Shard = o.Shard
		}
		// Movable and labelled: placement put it there (see
		// placement.Object.Pinned).
		if po.Movable && po.Shard != "" && !known[po.Shard] {
			gone[po.Shard] = true
		}
		// The load to spread: what the targets hold and what is to come.
		if targets[po.Shard] || (po.Shard == "" && po.Movable) {
			load += max(o.Weight, 1)
		}
		in.Objects = append(in.Objects, po)
	}
	in.Draining = append(slices.Clone(st.Draining), slices.Sorted(maps.Keys(gone))...)
	if len(targets) > 0 {
		in.Threshold = st.Placement.ThresholdFor(float64(load) / float64(len(targets)))
	}
	return in, index
}
