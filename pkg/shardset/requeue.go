package shardset

import (
	"time"

	"github.com/sirupsen/logrus"
)

// requeue asks for the shard set to be reconciled again after a delay,
// although no watched object changes: some waits end only with time (a
// shard's failover clock, the pacing of the status writes), and some
// events may never come (the watch event of a write, a cache that fills).
// The reconcile's steps return one each, and the reconcile's one exit
// point, onConfigMap, enqueues the soonest; the zero value asks for
// nothing.
type requeue struct {
	after time.Duration
	// reason says why, for the debug log: "why did it run again?"
	reason string
}

// Why a reconcile runs again.
const (
	reasonFailoverClock  = "a shard counts as down, or as back, once its failover time runs out"
	reasonWritesUnseen   = "the caches do not show every write of this process yet"
	reasonMappedUnsynced = "the mapped-object caches are not full yet"
	reasonLiveMapped     = "a removal waits for the caches to show an object that the API server has on its shard"
	reasonStampWait      = "a removal waits until the admission policy no longer stamps new objects onto its shard"
	reasonStatusPaced    = "the status write waits for the pacing interval"
)

// wanted reports whether r asks for a reconcile at all.
func (r requeue) wanted() bool { return r.after > 0 }

// soonest returns the requeue that is due first, keeping its reason; of
// two due at once, the earlier in rs. The workqueue would keep only the
// soonest of several delayed adds of one key anyway: asking once says
// which one counts.
func soonest(rs ...requeue) requeue {
	var out requeue
	for _, r := range rs {
		if r.wanted() && (!out.wanted() || r.after < out.after) {
			out = r
		}
	}
	return out
}

// requeueAfter enqueues the shard ConfigMap once r's delay has passed, if r
// asks for it.
func (c *Controller) requeueAfter(r requeue) {
	if !r.wanted() {
		return
	}
	logrus.WithFields(logrus.Fields{"configmap": c.opts.ConfigMap.String(), "after": r.after, "reason": r.reason}).
		Debug("reconcile requeued")
	c.configMaps.EnqueueAfter(c.opts.ConfigMap.Namespace, c.opts.ConfigMap.Name, r.after)
}
