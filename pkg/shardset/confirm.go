package shardset

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/shardkeeper/shardkeeper/pkg/metrics"
	"github.com/shardkeeper/shardkeeper/pkg/plan"
)

// liveTimeout bounds the API server's answer before a deletion.
const liveTimeout = 30 * time.Second

// stampRecheck is when a reconcile whose removal waits for the stamp's
// withdrawal first runs again: no watch event says that the API server's
// admission policy caught up. The wait doubles while it lasts, up to
// stampRecheckMax: a policy that is missing or failing waits for an
// operator, and each recheck costs the API server a dry-run create.
const (
	stampRecheck    = 2 * time.Second
	stampRecheckMax = time.Minute
)

// stampWaits counts the reconciles in a row whose removals waited for the
// stamp's withdrawal, and remembers why the last one did.
type stampWaits struct {
	n    int
	last string
}

// wait records one more such reconcile, which waited because of why, and
// returns when to check again, and whether why is news to log at info
// level: the first wait, or a different reason.
func (w *stampWaits) wait(why string) (time.Duration, bool) {
	news := w.n == 0 || why != w.last
	after := stampRecheck << min(w.n, 5)
	w.n++
	w.last = why
	return min(after, stampRecheckMax), news
}

// liveRecheck is when a reconcile whose removal waits for the caches runs
// again, should no watch event bring it sooner: the object that held it
// may be gone by then, and then no cache changes.
const liveRecheck = time.Second

// mappedObjects is what the controller reads of the mapped objects: the caches,
// which the decisions read, and the API server itself before a deletion.
type mappedObjects interface {
	plan.Mapped
	// Live returns, of shards, those that the API server shows objects
	// mapped to, with one such object each ("kind namespace/name").
	Live(ctx context.Context, shards []string) (map[string]string, error)
}

// confirmRemovals asks the API server whether objects are mapped to the
// shards that p deletes on the caches' word alone, and decides again with
// its answer when it shows some: those shards wait (the caches show the
// objects a moment later, and the shards are then Blocked), the rest of
// the plan goes ahead. The caches lag behind the API server by as long as
// a watch takes, and an object labelled just before its shard was removed
// would otherwise be stranded with no controller. kube-controller-manager's
// garbage collector asks the API server likewise before it deletes on what
// its graph says. An error deletes nothing: the reconcile is retried. Shards
// that wait ask for a requeue: the object that held them may be gone before
// the caches ever show it, and then no event comes.
//
// Before all that, placement stops labelling objects onto any shard but
// the plan's targets, and the admission policy stops stamping new objects
// onto them: a relabel onto a shard that this plan deletes has then either
// completed, and the API server's answer shows it, or is never sent. Until
// the policy is known to apply the withdrawal, the shards to delete wait,
// forced or not.
func (c *Controller) confirmRemovals(in plan.Input, p plan.Plan) (plan.Plan, requeue, error) {
	if c.opts.Mover != nil {
		deleting := p.Deleting()
		if err := c.opts.Mover.Restrict(c.ctx, p.Targets, len(deleting) > 0); err != nil && len(deleting) > 0 {
			after, news := c.stampWaits.wait(err.Error())
			log := logrus.WithField("configmap", c.opts.ConfigMap.String()).WithError(err).WithField("recheck", after)
			if news {
				log.Info("new objects may still be born on the shards to delete; their removal waits")
			} else {
				log.Debug("new objects may still be born on the shards to delete; their removal still waits")
			}
			in.StampWait = map[string]string{}
			for _, id := range deleting {
				in.StampWait[id] = err.Error()
			}
			p, err = plan.Decide(in)
			return p, requeue{after: after, reason: reasonStampWait}, err
		}
	}
	c.stampWaits = stampWaits{}
	shards := p.ToCheck()
	if len(shards) == 0 {
		return p, requeue{}, nil
	}
	ctx, cancel := context.WithTimeout(c.ctx, liveTimeout)
	defer cancel()
	start := time.Now()
	live, err := c.mapped.Live(ctx, shards)
	if err != nil {
		return plan.Plan{}, requeue{}, fmt.Errorf("asking the API server for objects on removed shards %v before deleting them: %w", shards, err)
	}
	log := logrus.WithField("configmap", c.opts.ConfigMap.String())
	log.WithFields(logrus.Fields{"shards": len(shards), "holding": len(live), "took": time.Since(start)}).
		Debug("asked the API server for objects on the shards to delete")
	if len(live) == 0 {
		return p, requeue{}, nil
	}
	metrics.RemovalCacheWaits.Add(float64(len(live)))
	for _, id := range slices.Sorted(maps.Keys(live)) {
		log.WithFields(logrus.Fields{"shard": id, "object": live[id]}).
			Info("the API server has an object on a removed shard that the caches do not show yet; its removal waits for them")
	}
	in.LiveMapped = live
	p, err = plan.Decide(in)
	return p, requeue{after: liveRecheck, reason: reasonLiveMapped}, err
}
