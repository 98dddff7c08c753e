package shardset

import (
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/shardkeeper/shardkeeper/pkg/crossref"
	"github.com/shardkeeper/shardkeeper/pkg/metrics"
	"github.com/shardkeeper/shardkeeper/pkg/placement"
	"github.com/shardkeeper/shardkeeper/pkg/plan"
	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
	"github.com/shardkeeper/shardkeeper/pkg/status"
)

// onConfigMap reconciles the shard set for the shard ConfigMap. A missing
// ConfigMap changes nothing. Every error is returned so that the key is
// requeued with backoff. It is the reconcile's one exit point: the steps
// say when they need it to run again, and it enqueues the key once.
func (c *Controller) onConfigMap(key string, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	if key != c.opts.ConfigMap.String() {
		return cm, nil
	}
	start := time.Now()
	tl := startTimeline()
	out, again, err := c.reconcile(key, cm, tl)
	metrics.ReconcileDuration.Observe(time.Since(start).Seconds())
	tl.mark("done")
	tl.log(logrus.WithFields(logrus.Fields{"configmap": key, "resourceVersion": resourceVersion(cm)}))
	if err != nil {
		metrics.ReconcileErrors.Inc()
	} else {
		c.reconciled.Store(true)
		metrics.LastReconcileSuccess.SetToCurrentTime()
	}
	c.requeueAfter(again)
	return out, err
}

// reconcile brings the shard set in step with cm, and returns when it must
// run again although nothing changes: the soonest of what its steps need.
func (c *Controller) reconcile(key string, cm *corev1.ConfigMap, tl *timeline) (*corev1.ConfigMap, requeue, error) {
	log := logrus.WithField("configmap", key)
	if cm == nil {
		if c.opts.Mover != nil {
			// Without its settings placement stops; labels stay as they are.
			c.opts.Mover.Set(placement.State{})
		}
		log.Info("shard ConfigMap not found; nothing is changed until it exists")
		again, err := c.report(nil, status.Status{Error: fmt.Sprintf("ConfigMap %s not found; nothing is changed until it exists", key)})
		return nil, again, err
	}
	if cm.DeletionTimestamp != nil {
		log.Info("shard ConfigMap is being deleted; nothing is changed")
		return cm, requeue{}, nil
	}
	cfg, err := c.parse(cm)
	tl.mark("parsed")
	if err != nil {
		return c.reject(cm, err, log)
	}
	if again := c.cachesBehind(cm); again.wanted() {
		tl.mark("writes-unseen")
		return cm, again, nil
	}
	if c.announceSeen(cm) > 0 {
		tl.mark("events")
	}
	in, err := c.input(cfg)
	if err != nil {
		return cm, requeue{}, err
	}
	p, err := plan.Decide(in)
	tl.mark("decided")
	if err != nil {
		c.renders.Sweep()
		return c.reject(cm, err, log)
	}
	p, confirmed, err := c.confirmRemovals(in, p)
	tl.mark("confirmed")
	c.renders.Sweep()
	if err != nil {
		return cm, confirmed, err
	}
	again, err := c.carryOut(cm, cfg, in, p, log, tl)
	return cm, soonest(confirmed, again), err
}

// resourceVersion is cm's, or "" for none: it names the version of the
// ConfigMap a timeline is of.
func resourceVersion(cm *corev1.ConfigMap) string {
	if cm == nil {
		return ""
	}
	return cm.ResourceVersion
}

// parse reads the shard ConfigMap's configuration, refusing a placement
// key that this installation cannot carry out.
func (c *Controller) parse(cm *corev1.ConfigMap) (shardconfig.Config, error) {
	cfg, err := shardconfig.Parse(cm.Data, cm.BinaryData, cm.Annotations)
	if err != nil {
		return shardconfig.Config{}, err
	}
	if cfg.Placement.Enabled && c.opts.Mover == nil {
		return shardconfig.Config{}, errors.New(errPlacementNotAllowed)
	}
	return cfg, nil
}

// reject reports why the shard ConfigMap is refused; nothing is changed.
func (c *Controller) reject(cm *corev1.ConfigMap, err error, log *logrus.Entry) (*corev1.ConfigMap, requeue, error) {
	log.WithError(err).Warn("shard ConfigMap rejected; nothing is changed")
	again, err := c.report(cm, status.Status{Error: err.Error()})
	return cm, again, err
}

// carryOut makes the plan's writes, hands placement its part of the
// decision, and reports the status once the caches show what it says.
func (c *Controller) carryOut(cm *corev1.ConfigMap, cfg shardconfig.Config, in plan.Input, p plan.Plan, log *logrus.Entry, tl *timeline) (requeue, error) {
	c.setAvailability(p.Availability)
	// A shard counts as down, or as back, once a time runs out: no event
	// of the cluster marks that moment.
	again := requeue{after: p.RecheckAfter, reason: reasonFailoverClock}

	metrics.ConfigAccepted.Set(1)
	failing, applyErr := c.apply(p, tl)
	if c.opts.Mover != nil {
		c.opts.Mover.Set(placement.State{ConfigMap: cm, Placement: cfg.Placement, Targets: p.Targets, Draining: p.Draining,
			FailingOver: p.FailingOver, FailingKinds: p.FailingKinds, Shards: p.ShardIDs(), Served: plan.UnlabelledServed(in.Sources)})
		tl.mark("placement")
	}

	if applyErr == nil && p.ForceChanged {
		if err := c.setForce(cm, p.Force); err != nil {
			applyErr = errors.Join(applyErr, err)
		}
	}
	switch {
	case c.writes.Len() > 0:
		// The status and the Events wait for the watch events of these
		// writes, which bring the next reconcile (see announceSeen).
		again = soonest(again, requeue{after: unseenRecheck, reason: reasonWritesUnseen})
	case c.mapped.Synced() || len(c.mapped.Failing()) > 0:
		// A kind that cannot be listed may stay so for good: the status
		// must then say why no shard is removed, counts short or not.
		p.Shards = p.StatusAfter(failing)
		recordGauges(p)
		paced, err := c.report(cm, status.Status{Shards: p.Shards, Warnings: c.withCrossShard(warnings(p))})
		tl.mark("reported")
		if err != nil {
			applyErr = errors.Join(applyErr, err)
		}
		again = soonest(again, paced)
	default:
		// Counts read before the caches are full are wrong: reporting them
		// would rewrite a correct status and repeat its Events.
		again = soonest(again, requeue{after: time.Second, reason: reasonMappedUnsynced})
	}
	done := log.WithFields(logrus.Fields{"shards": len(p.Shards), "writes": len(p.Actions)})
	if applyErr != nil {
		done = done.WithError(applyErr)
	}
	done.Debug("reconciled")
	return again, applyErr
}

// errPlacementNotAllowed rejects a placement key that this installation
// cannot carry out.
const errPlacementNotAllowed = `placement: this shardkeeper runs without --allow-placement, so it may not relabel objects; ` +
	`install the chart with placement.enabled=true (it grants patch on the mapped kinds) or remove the "placement" key`

// input reads the caches for the decision.
func (c *Controller) input(cfg shardconfig.Config) (plan.Input, error) {
	deployments, err := listCached(c.deployments, "Deployments")
	if err != nil {
		return plan.Input{}, err
	}
	services, err := listCached(c.services, "Services")
	if err != nil {
		return plan.Input{}, err
	}
	in := plan.Input{
		Config:       cfg,
		Deployments:  deployments,
		Services:     services,
		Mapped:       c.mapped,
		ForceDeleted: c.forceDeletedSnapshot(),
		ConfigMap:    c.opts.ConfigMap,
		Now:          c.now(),
		Availability: c.availabilitySnapshot(),
		Renders:      c.renders,
	}
	for _, s := range c.opts.Sources {
		in.Sources = append(in.Sources, plan.SourceState{Source: s, Live: in.Deployments[s.Key()], LiveService: in.Services[s.ServiceKey()]})
	}
	return in, nil
}

// listCached reads the cached objects of every namespace, keyed by
// "namespace/name" as the decision looks them up; what names them in an
// error.
func listCached[T metav1.Object](byNS map[string]access[T], what string) (map[string]T, error) {
	out := map[string]T{}
	for ns, a := range byNS {
		list, err := a.cache.List(ns, labels.Everything())
		if err != nil {
			return nil, fmt.Errorf("listing cached %s in %s: %w", what, ns, err)
		}
		for _, o := range list {
			out[o.GetNamespace()+"/"+o.GetName()] = o
		}
	}
	return out, nil
}

func warnings(p plan.Plan) status.Warnings {
	w := status.Warnings{NotShardAware: p.NotShardAware, RenderErrors: p.RenderErrors, FailoverWithheld: p.FailoverWithheld}
	// Bounded as the metrics are: anyone who may label an object can name
	// any number of IDs.
	for i, u := range largestFirst(p.Unknown) {
		if i >= metrics.MaxUnknownShards {
			w.MoreUnknownShards++
			w.MoreUnknownObjects += u.Count
			continue
		}
		w.UnknownShards = append(w.UnknownShards, status.UnknownShard{ID: u.Shard, Count: u.Count, Objects: u.Sample})
	}
	return w
}

// withCrossShard adds to w the objects whose work lands on another shard,
// bounded as the unknown shards are: a sample and a count.
func (c *Controller) withCrossShard(w status.Warnings) status.Warnings {
	if c.opts.References == nil {
		return w
	}
	if crossed := c.opts.References.CrossShard(); len(crossed) > 0 {
		w.CrossShard = &status.CrossShard{Count: len(crossed), Objects: crossref.Sample(crossed, crossShardSample)}
	}
	return w
}

// crossShardSample is how many of the objects whose work lands on another
// shard the status names.
const crossShardSample = 5

// availabilitySnapshot is what this process has seen of the shards'
// availability, for the next decision.
func (c *Controller) availabilitySnapshot() plan.Availability {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.availability
}

func (c *Controller) setAvailability(a plan.Availability) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.availability = a
}

func (c *Controller) forceDeletedSnapshot() map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.forceDeleted)
}

// ignoreNotFound treats a missing object as done: it is what a delete wants.
func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
