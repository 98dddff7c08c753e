package plan

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/shardkeeper/shardkeeper/pkg/balance"
	"github.com/shardkeeper/shardkeeper/pkg/placement"
	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
)

// Movable reports whether placement may relabel o: placement is on, o is in
// its scope, nobody pinned it by hand and it is not being deleted (its
// finalizers wait for the controller of the shard it is on).
func Movable(p shardconfig.Placement, o placement.Object) bool {
	return !o.Derived && p.InScope(o.Namespace, o.Labels) && !o.Pinned() && !o.Deleting
}

// UnlabelledServed reports whether the unsharded controllers serve the
// objects that have no shard label: every source's own Deployment that is
// installed has an available replica. Placement may then take its time to
// assign them.
func UnlabelledServed(sources []SourceState) bool {
	served := false
	for _, s := range sources {
		switch {
		case s.Live == nil: // not installed (an older Fleet's helmops)
		case s.Live.Status.AvailableReplicas == 0:
			return false
		default:
			served = true
		}
	}
	return served
}

// GroupHolds returns, by group (placement.Object.Group), the objects that
// hold the group where they are: placement may not move them (a person
// set their shard label, or they are outside placement's scope), and a
// group is never split, so the rest of it lives on their shard too.
func GroupHolds(p shardconfig.Placement, objs []placement.Object) map[string][]placement.Object {
	out := map[string][]placement.Object{}
	for _, o := range objs {
		if g := o.Group(p); g != "" && o.Labelled && !Movable(p, o) {
			out[g] = append(out[g], o)
		}
	}
	for _, h := range out {
		slices.SortFunc(h, func(a, b placement.Object) int { return cmp.Compare(a.Ref(), b.Ref()) })
	}
	return out
}

// HoldShards returns the shards that holds keep their group on, sorted:
// one is where the group lives, more are a conflict that keeps it where
// it is.
func HoldShards(holds []placement.Object) []string {
	var out []string
	for _, o := range holds {
		out = append(out, o.Shard)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// HoldMessage says what holds the group named group (placement.DescribeGroup)
// where it is: "namespace team-a is pinned to shard x by helmreleases
// team-a/foo", or, with holds on several shards, that its objects are not
// moved.
func HoldMessage(group string, holds []placement.Object) string {
	byShard := map[string][]string{}
	for _, o := range holds {
		by := o.Ref()
		if !o.Pinned() {
			by += " (outside placement's scope)"
		}
		byShard[o.Shard] = append(byShard[o.Shard], by)
	}
	shards := HoldShards(holds)
	if len(shards) == 1 {
		return fmt.Sprintf("%s is pinned to shard %s by %s", group, shards[0], strings.Join(byShard[shards[0]], ", "))
	}
	parts := make([]string, len(shards))
	for i, s := range shards {
		parts[i] = fmt.Sprintf("%s by %s", s, strings.Join(byShard[s], ", "))
	}
	return fmt.Sprintf("%s is pinned to more than one shard (%s): its objects are placed together, so none of them is moved until the labels agree",
		group, strings.Join(parts, "; "))
}

// pinned returns the objects mapped to shard that placement may not move,
// as "kind namespace/name", and how many there are: those it may not move
// themselves, and those whose group something holds on this shard (or
// on more than one shard). Derived objects are not pinned: they leave with
// the objects they were made from.
func pinned(p shardconfig.Placement, m Mapped, shard string, n int) (int, []string) {
	count := 0
	var sample []string
	var holds map[string][]placement.Object
	for _, o := range m.MappedTo(shard) {
		if o.Derived {
			continue
		}
		why := ""
		if Movable(p, o) {
			if o.Group(p) == "" {
				continue
			}
			if holds == nil {
				holds = GroupHolds(p, m.All())
			}
			h := holds[o.Group(p)]
			if s := HoldShards(h); len(s) == 0 || len(s) == 1 && s[0] != shard {
				continue
			}
			why = " (" + HoldMessage(placement.DescribeGroup(o.Group(p), p), h) + ")"
		}
		count++
		if len(sample) < n {
			sample = append(sample, o.Ref()+why)
		}
	}
	return count, sample
}

// wantedAutoShards returns the shards "shards: auto" wants: the count follows the
// number of objects in placement's scope, with hysteresis against the count
// that runs now (the shard-N IDs among running, the shards in the cluster).
// Derived objects (Bundles) follow their owners and are not counted.
func wantedAutoShards(cfg shardconfig.Config, running []string, m Mapped) []shardconfig.Shard {
	current := 0
	for _, id := range running {
		if shardconfig.AutoIndex(id) >= 0 {
			current++
		}
	}
	objects := 0
	for _, o := range m.All() {
		if !o.Derived && cfg.Placement.InScope(o.Namespace, o.Labels) {
			objects++
		}
	}
	p := cfg.Placement
	return shardconfig.AutoNames(balance.ShardCount(current, objects, p.ObjectsPerShard, p.MinShards, p.MaxShards))
}

// drainingMessage says how far a drain has come.
func drainingMessage(id string, left int, p shardconfig.Placement, listed bool) string {
	then := "then it is deleted"
	if listed {
		then = "then it stays, empty, until it is removed from the list"
	}
	return fmt.Sprintf("shard %s is draining: %d objects left, moved to the other shards at up to %d every %s; %s",
		id, left, p.MaxMoves, p.Interval, then)
}

// pinnedMessage says why a drain cannot finish.
func pinnedMessage(cm fmt.Stringer, id string, pinned int, sample []string) string {
	return fmt.Sprintf("shard %s is draining but %d objects on it are pinned (their shard label was set by hand, or they are outside placement's scope or being deleted) and are never moved: %s. "+
		"Relabel or delete them, or force the deletion with the annotation %s=%s on %s",
		id, pinned, strings.Join(sample, ", "), shardconfig.ForceDeleteAnnotation, id, cm)
}
