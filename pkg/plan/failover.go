package plan

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/shardkeeper/shardkeeper/pkg/placement"
)

// Availability is what this process has seen of the listed shards'
// Deployments, carried from one decision to the next. Failover acts only on
// what the daemon saw itself: a copy first seen down by a process that has
// just started (or been elected) is down for that process from that moment,
// so it waits a full FailoverAfter before it moves anything.
type Availability struct {
	// unavailable holds, per shard copy of a source ("namespace/name" of
	// its Deployment), when this process first saw it with no Available
	// replica.
	unavailable map[string]time.Time
	// returned holds, per copy that was down, when this process first saw
	// it available again. Until FailoverAfter has passed since, its shard
	// takes no objects, so that a shard that flaps does not draw load back.
	returned map[string]time.Time
	// had holds, per "shard/kind" that is failed over, how many objects of
	// the kind were mapped to the shard when they began to leave, so that
	// the status can say how many have left.
	had map[string]int
}

// failover is what decideFailover concluded for one decision.
type failover struct {
	// down are the listed shards on which a copy that some kind needs has
	// had no Available replica for FailoverAfter; failing are those whose objects
	// move (all of down, unless more than the bound are unavailable, then
	// none).
	down    map[string]outage
	failing map[string]bool
	// recovering shards have a copy available again, but not yet long
	// enough for the shard to take objects.
	recovering map[string]bool
	// withheld says why nothing is failed over although shards are down.
	withheld string
	seen     Availability
	// recheck is when the next of the times above runs out: the decision
	// must then be taken again, even if nothing in the cluster changes.
	recheck time.Duration
}

// outage is what is down on one shard: the kinds whose objects leave it,
// the copies that serve them, and since when the first of those has had
// no Available replica.
type outage struct {
	kinds, copies []string
	since         time.Time
}

// shardCopy is one source's copy on a shard, as failover sees it.
type shardCopy struct {
	name string
	// serves are the kinds its controller reconciles; nil is every kind.
	serves []string
	// out: no Available replica; down: so for FailoverAfter, since since.
	out, down bool
	since     time.Time
}

func (c shardCopy) servesKind(kind string) bool {
	return len(c.serves) == 0 || slices.Contains(c.serves, kind)
}

// outKinds returns, of kinds, those that a copy they need is out for, and
// whether the shard counts as out: some kind is, or every copy is.
func outKinds(copies []shardCopy, kinds []string, out func(shardCopy) bool) ([]string, bool) {
	if !slices.ContainsFunc(copies, func(c shardCopy) bool { return !out(c) }) {
		return kinds, true
	}
	var res []string
	for _, k := range kinds {
		if slices.ContainsFunc(copies, func(c shardCopy) bool { return out(c) && c.servesKind(k) }) {
			res = append(res, k)
		}
	}
	return res, len(res) > 0
}

// movableKinds returns the sorted kinds of the objects mapped to shard
// that placement may move (derived objects leave with their owners), and
// those that were failing over before, whose objects may all have left.
func movableKinds(m Mapped, shard string, had map[string]int) []string {
	seen := map[string]bool{}
	for key := range had {
		if kind, ok := strings.CutPrefix(key, shard+"/"); ok {
			seen[kind] = true
		}
	}
	for _, o := range m.MappedTo(shard) {
		if !o.Derived {
			seen[o.Kind] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// decideFailover updates what this process has seen of the listed shards'
// copies and decides which kinds are down on which shard: those for which
// a copy they need has had no Available replica for FailoverAfter (a shard
// whose gitjob crash-loops serves no GitRepo, whatever else runs).
// Draining shards are left out: they are leaving already. Failover is off
// without placement or without FailoverAfter, and then nothing is
// remembered.
func decideFailover(in Input, running map[string]*inForce) failover {
	place := in.Config.Placement
	f := failover{down: map[string]outage{}, failing: map[string]bool{}, recovering: map[string]bool{},
		seen: Availability{unavailable: map[string]time.Time{}, returned: map[string]time.Time{}, had: map[string]int{}}}
	if !place.Enabled || place.FailoverAfter <= 0 {
		return f
	}
	unavailable := 0
	for _, shard := range in.Config.Shards {
		id := shard.ID
		if in.Config.Draining(id) || running[id] == nil || len(running[id].deployments) == 0 {
			continue
		}
		copies := shardCopies(in.Sources, id, running[id].deployments)
		f.observe(in, id, copies)
		kinds := movableKinds(in.Mapped, id, in.Availability.had)
		if _, out := outKinds(copies, kinds, func(c shardCopy) bool { return c.out }); out {
			unavailable++
		}
		if o, down := f.outage(in, id, copies, kinds); down {
			f.down[id] = o
		}
	}
	// The bound counts every shard with a kind that a copy it needs is out
	// for, down or on its way to it: in an outage of many shards the
	// first to pass FailoverAfter must not move its objects onto the next
	// to go.
	if bound := place.MaxDown(len(in.Config.Shards)); len(f.down) > 0 && unavailable > bound {
		f.withheld = fmt.Sprintf("%d of %d listed shards have no Available replica, more than placement.failoverMaxDown (%s) allows: "+
			"nothing is failed over, as moving every object onto the few shards left would spread the outage",
			unavailable, len(in.Config.Shards), place.FailoverMaxDown.String())
	} else {
		for id := range f.down {
			f.failing[id] = true
		}
	}
	return f
}

// observe brings what this process has seen of a shard's copies up to
// in.Now: since when each has had no Available replica, or has had one
// again after it was down; a copy out for FailoverAfter is down.
func (f *failover) observe(in Input, id string, copies []shardCopy) {
	after := in.Config.Placement.FailoverAfter
	for i := range copies {
		c := &copies[i]
		if c.out {
			since, ok := in.Availability.unavailable[c.name]
			if !ok {
				since = in.Now
			}
			f.seen.unavailable[c.name], c.since = since, since
			if c.down = in.Now.Sub(since) >= after; !c.down {
				f.recheckWithin(after - in.Now.Sub(since))
			}
			continue
		}
		// Available. It returns from being down, or keeps returning,
		// until it has been up for FailoverAfter.
		since, returning := in.Availability.returned[c.name]
		if wasDown, ok := in.Availability.unavailable[c.name]; ok && in.Now.Sub(wasDown) >= after {
			since, returning = in.Now, true
		}
		if returning && in.Now.Sub(since) < after {
			f.seen.returned[c.name] = since
			f.recovering[id] = true
			f.recheckWithin(after - in.Now.Sub(since))
		}
	}
}

// recheckWithin makes the next decision due once left has passed, at the
// latest; a second at the soonest.
func (f *failover) recheckWithin(left time.Duration) {
	if f.recheck == 0 || left < f.recheck {
		f.recheck = max(left, time.Second)
	}
}

// outage returns what is down on a shard, if anything is: the kinds that
// a copy they need has been down for, and those copies. It remembers how
// many objects of each such kind the shard had when they began to leave.
func (f *failover) outage(in Input, id string, copies []shardCopy, kinds []string) (outage, bool) {
	downKinds, down := outKinds(copies, kinds, func(c shardCopy) bool { return c.down })
	if !down {
		return outage{}, false
	}
	o := outage{kinds: downKinds}
	allDown := !slices.ContainsFunc(copies, func(c shardCopy) bool { return !c.down })
	for _, c := range copies {
		if c.down && (allDown || slices.ContainsFunc(downKinds, c.servesKind)) {
			o.copies = append(o.copies, c.name)
			if o.since.IsZero() || c.since.Before(o.since) {
				o.since = c.since
			}
		}
	}
	counts := in.Mapped.Counts(id)
	for _, k := range downKinds {
		had, ok := in.Availability.had[id+"/"+k]
		if !ok {
			had = counts[k]
		}
		f.seen.had[id+"/"+k] = had
	}
	return o, true
}

// StaysOnFailover reports whether o stays on its shard although the shard
// is failed over: failing holds, per shard, the kinds that leave it
// (Plan.FailingKinds), and the controller of o's kind runs there.
func StaysOnFailover(failing map[string][]string, o placement.Object) bool {
	kinds, ok := failing[o.Shard]
	return ok && o.Labelled && !slices.Contains(kinds, o.Kind)
}

// shardCopies returns the copies of the sources among a shard's
// Deployments, each with no Available replica or not. While a copy is
// renamed, the source has two on the shard, the earlier name's and the
// current one's, which take turns on one Lease: the source serves the
// shard while either has an Available replica, so neither is out until
// both are.
func shardCopies(sources []SourceState, id string, deps []*appsv1.Deployment) []shardCopy {
	out := make([]shardCopy, 0, len(deps))
	of := make([]string, 0, len(deps))
	available := map[string]bool{}
	for _, d := range deps {
		c := shardCopy{name: d.Namespace + "/" + d.Name}
		owner := c.name
		for _, s := range sources {
			if s.Source.Namespace == d.Namespace && (s.Source.CloneName(id) == d.Name || s.Source.LegacyCloneName(id) == d.Name) {
				c.serves, owner = s.Source.Serves, s.Source.Key()
			}
		}
		if d.Status.AvailableReplicas > 0 {
			available[owner] = true
		}
		out, of = append(out, c), append(of, owner)
	}
	for i := range out {
		out[i].out = !available[of[i]]
	}
	return out
}

// failedOverMessage says why a shard's objects leave it, and what stays.
func failedOverMessage(id string, o outage, had, left, pinnedCount int, sample []string) string {
	names := make([]string, len(o.copies))
	for i, c := range o.copies {
		_, names[i], _ = strings.Cut(c, "/")
	}
	verb := "has"
	if len(names) > 1 {
		verb = "have"
	}
	what := "objects"
	if len(o.kinds) > 0 {
		what = strings.Join(o.kinds, " and ")
	}
	msg := fmt.Sprintf("shard %s is down: %s %s had no Available replica since %s; "+
		"its %s move to the other shards, paced: %d of %d have left, %d are still mapped to it",
		id, strings.Join(names, ", "), verb, o.since.UTC().Format(time.RFC3339), what, max(had-left, 0), had, left)
	if pinnedCount > 0 {
		msg += fmt.Sprintf("; %d pinned objects stay and are stranded while it is down: %s", pinnedCount, strings.Join(sample, ", "))
	}
	return msg
}
