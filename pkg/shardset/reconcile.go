package shardset

import (
	"errors"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/shardkeeper/shardkeeper/pkg/metrics"
	"github.com/shardkeeper/shardkeeper/pkg/mover"
	"github.com/shardkeeper/shardkeeper/pkg/plan"
	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
	"github.com/shardkeeper/shardkeeper/pkg/status"
)

// onConfigMap reconciles the shard set for the shard ConfigMap. A missing
// ConfigMap changes nothing. Every error is returned so that the key is
// requeued with backoff.
func (c *Controller) onConfigMap(key string, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	if key != c.opts.ConfigMap.String() {
		return cm, nil
	}
	start := time.Now()
	out, err := c.reconcile(key, cm)
	metrics.ReconcileDuration.Observe(time.Since(start).Seconds())
	if err != nil {
		metrics.ReconcileErrors.Inc()
	} else {
		c.reconciled.Store(true)
		metrics.LastReconcileSuccess.SetToCurrentTime()
	}
	return out, err
}

func (c *Controller) reconcile(key string, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	log := logrus.WithField("configmap", key)
	if cm == nil {
		if c.opts.Mover != nil {
			// Without its settings placement stops; labels stay as they are.
			c.opts.Mover.Set(mover.State{})
		}
		log.Info("shard ConfigMap not found; nothing is changed until it exists")
		return nil, c.report(nil, status.Status{Error: fmt.Sprintf("ConfigMap %s not found; nothing is changed until it exists", key)})
	}
	if cm.DeletionTimestamp != nil {
		log.Info("shard ConfigMap is being deleted; nothing is changed")
		return cm, nil
	}

	cfg, err := shardconfig.Parse(cm.Data, cm.BinaryData, cm.Annotations)
	if err != nil {
		log.WithError(err).Warn("shard ConfigMap rejected; nothing is changed")
		return cm, c.report(cm, status.Status{Error: err.Error()})
	}

	if cfg.Placement.Enabled && c.opts.Mover == nil {
		err := errors.New(errPlacementNotAllowed)
		log.WithError(err).Warn("shard ConfigMap rejected; nothing is changed")
		return cm, c.report(cm, status.Status{Error: err.Error()})
	}
	if c.cachesBehind(cm) {
		return cm, nil
	}
	c.announceSeen(cm)
	in, err := c.input(cfg)
	if err != nil {
		return cm, err
	}
	p, err := plan.Decide(in)
	if err == nil {
		if p, err = c.confirmRemovals(cm, in, p); err != nil {
			c.renders.Sweep()
			return cm, err
		}
	}
	c.renders.Sweep()
	if err != nil {
		log.WithError(err).Warn("shard ConfigMap rejected; nothing is changed")
		return cm, c.report(cm, status.Status{Error: err.Error()})
	}
	c.setAvailability(p.Availability)
	if p.RecheckAfter > 0 {
		// A shard counts as down, or as back, once a time runs out: no
		// event of the cluster marks that moment.
		c.configMaps.EnqueueAfter(cm.Namespace, cm.Name, p.RecheckAfter)
	}

	metrics.ConfigAccepted.Set(1)
	failing, applyErr := c.apply(p)
	if c.opts.Mover != nil {
		c.opts.Mover.Set(mover.State{ConfigMap: cm, Placement: cfg.Placement, Targets: p.Targets, Draining: p.Draining,
			FailingOver: p.FailingOver, FailingKinds: p.FailingKinds, Shards: p.ShardIDs(), Served: plan.UnlabelledServed(in.Sources)})
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
		c.configMaps.EnqueueAfter(cm.Namespace, cm.Name, unseenRecheck)
	case c.mapped.Synced() || len(c.mapped.Failing()) > 0:
		// A kind that cannot be listed may stay so for good: the status
		// must then say why no shard is removed, counts short or not.
		p.Shards = p.StatusAfter(failing)
		recordGauges(p)
		st := status.Status{Shards: p.Shards, Warnings: warnings(p)}
		if err := c.report(cm, st); err != nil {
			applyErr = errors.Join(applyErr, err)
		}
	default:
		// Counts read before the caches are full are wrong: reporting them
		// would rewrite a correct status and repeat its Events.
		c.configMaps.EnqueueAfter(cm.Namespace, cm.Name, time.Second)
	}
	done := log.WithFields(logrus.Fields{"shards": len(p.Shards), "writes": len(p.Actions)})
	if applyErr != nil {
		done = done.WithError(applyErr)
	}
	done.Debug("reconciled")
	return cm, applyErr
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
	out := make(map[string]bool, len(c.forceDeleted))
	for k, v := range c.forceDeleted {
		out[k] = v
	}
	return out
}

// ignoreNotFound treats a missing object as done: it is what a delete wants.
func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
