package plan

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
)

// Availability is what this process has seen of the listed shards'
// Deployments, carried from one decision to the next. Failover acts only on
// what the daemon saw itself: a shard first seen down by a process that has
// just started (or been elected) is down for that process from that moment,
// so it waits a full FailoverAfter before it moves anything.
type Availability struct {
	// Unavailable holds, per shard, when this process first saw none of its
	// Deployments with an Available replica.
	Unavailable map[string]time.Time
	// Returned holds, per shard that was down, when this process first saw
	// it available again. Until FailoverAfter has passed since, it takes
	// no objects, so that a shard that flaps does not draw load back.
	Returned map[string]time.Time
	// Had holds, per shard that is down, how many objects were mapped to
	// it when it went down, so that the status can say how many have left.
	Had map[string]int
}

// failover is what decideFailover concluded for one decision.
type failover struct {
	// down are the listed shards that have been unavailable for
	// FailoverAfter; failing are those whose objects move (all of down,
	// unless more than the bound are unavailable, then none).
	down, failing map[string]bool
	// recovering shards are available again, but not yet long enough to
	// take objects.
	recovering map[string]bool
	// withheld says why nothing is failed over although shards are down.
	withheld string
	seen     Availability
	// recheck is when the next of the times above runs out: the decision
	// must then be taken again, even if nothing in the cluster changes.
	recheck time.Duration
}

// available reports whether any of a shard's Deployments has an Available
// replica: one controller that runs serves the shard.
func available(deps []*appsv1.Deployment) bool {
	for _, d := range deps {
		if d.Status.AvailableReplicas > 0 {
			return true
		}
	}
	return false
}

// decideFailover updates what this process has seen of the listed shards'
// availability and decides which are down. Draining shards are left out:
// they are leaving already. Failover is off without placement or without
// FailoverAfter, and then nothing is remembered.
func decideFailover(in Input, running map[string]*inForce) failover {
	place := in.Config.Placement
	f := failover{down: map[string]bool{}, failing: map[string]bool{}, recovering: map[string]bool{},
		seen: Availability{Unavailable: map[string]time.Time{}, Returned: map[string]time.Time{}, Had: map[string]int{}}}
	after := place.FailoverAfter
	if !place.Enabled || after <= 0 {
		return f
	}
	wait := func(since time.Time) {
		left := after - in.Now.Sub(since)
		if f.recheck == 0 || left < f.recheck {
			f.recheck = max(left, time.Second)
		}
	}
	for _, shard := range in.Config.Shards {
		id := shard.ID
		if in.Config.Draining(id) || running[id] == nil || len(running[id].deployments) == 0 {
			continue
		}
		if !available(running[id].deployments) {
			since, ok := in.Availability.Unavailable[id]
			if !ok {
				since = in.Now
			}
			f.seen.Unavailable[id] = since
			if in.Now.Sub(since) >= after {
				f.down[id] = true
				had, ok := in.Availability.Had[id]
				if !ok {
					had = total(in.Mapped.Counts(id))
				}
				f.seen.Had[id] = had
			} else {
				wait(since)
			}
			continue
		}
		// Available. It returns from being down, or keeps returning, until
		// it has been up for FailoverAfter.
		since, returning := in.Availability.Returned[id]
		if wasDown, ok := in.Availability.Unavailable[id]; ok && in.Now.Sub(wasDown) >= after {
			since, returning = in.Now, true
		}
		if returning && in.Now.Sub(since) < after {
			f.seen.Returned[id] = since
			f.recovering[id] = true
			wait(since)
		}
	}
	// The bound counts every shard without an Available replica, down or
	// on its way to it: in an outage of many shards the first to pass
	// FailoverAfter must not move its objects onto the next to go.
	if bound := place.MaxDown(len(in.Config.Shards)); len(f.down) > 0 && len(f.seen.Unavailable) > bound {
		f.withheld = fmt.Sprintf("%d of %d listed shards have no Available replica, more than placement.failoverMaxDown (%s) allows: "+
			"nothing is failed over, as moving every object onto the few shards left would spread the outage",
			len(f.seen.Unavailable), len(in.Config.Shards), place.FailoverMaxDown.String())
	} else {
		for id := range f.down {
			f.failing[id] = true
		}
	}
	return f
}

// failedOverMessage says why a shard's objects leave it, and what stays.
func failedOverMessage(id string, since time.Time, had, left, pinnedCount int, sample []string) string {
	msg := fmt.Sprintf("shard %s is down: none of its Deployments has had an Available replica since %s; "+
		"its objects move to the other shards, paced: %d of %d have left, %d are still mapped to it",
		id, since.UTC().Format(time.RFC3339), max(had-left, 0), had, left)
	if pinnedCount > 0 {
		msg += fmt.Sprintf("; %d pinned objects stay and are stranded while it is down: %s", pinnedCount, strings.Join(sample, ", "))
	}
	return msg
}
