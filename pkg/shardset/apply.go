package shardset

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/sirupsen/logrus"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shardkeeper/shardkeeper/pkg/expect"
	"github.com/shardkeeper/shardkeeper/pkg/metrics"
	"github.com/shardkeeper/shardkeeper/pkg/plan"
	"github.com/shardkeeper/shardkeeper/pkg/render"
	"github.com/shardkeeper/shardkeeper/pkg/status"
)

// apply carries out the plan's Deployment writes, in parallel, and holds
// the action Events of the shards whose writes all succeeded until the
// caches show the writes.
func (c *Controller) apply(p plan.Plan) error {
	errs := make([]error, len(p.Actions))
	var g errgroup.Group
	limit := c.opts.WriteParallelism
	if limit <= 0 {
		limit = defaultWriteParallelism
	}
	g.SetLimit(limit)
	for i, a := range p.Actions {
		// Each action's error is kept in errs, never returned to the group:
		// one failed write must not stop or skip the others.
		g.Go(func() error {
			errs[i] = c.write(a)
			return nil
		})
	}
	_ = g.Wait() // always nil: the errors are in errs

	failed := map[string]bool{}
	created := map[string][]string{}
	for i, a := range p.Actions {
		if errs[i] != nil {
			failed[a.Shard] = true
			continue
		}
		if a.Restore {
			what := "changed by hand; its rendered spec was restored"
			if a.Kind == plan.Create {
				what = "missing; it was created again"
			}
			c.announceLater(corev1.EventTypeWarning, status.ReasonShardRestored,
				"%s of shard %s was %s", a.Ref(), a.Shard, what)
		}
		if a.Kind == plan.Create && p.NewShards[a.Shard] {
			created[a.Shard] = append(created[a.Shard], a.Object().GetName())
		}
	}
	for _, id := range slices.Sorted(maps.Keys(created)) {
		if !failed[id] {
			sort.Strings(created[id])
			c.announceLater(corev1.EventTypeNormal, status.ReasonShardCreated,
				"shard %s created: %s", id, strings.Join(created[id], ", "))
		}
	}
	for _, r := range p.Removals {
		if failed[r.Shard] {
			continue
		}
		if r.Forced {
			metrics.ForcedDeletions.Inc()
			c.mu.Lock()
			c.forceDeleted[r.Shard] = true
			c.mu.Unlock()
			c.announceLater(corev1.EventTypeWarning, status.ReasonShardForceDeleted,
				"shard %s force-deleted; left behind with no controller: %s (%s)",
				r.Shard, plan.FormatCounts(r.Mapped), strings.Join(r.Sample, ", "))
		} else {
			c.announceLater(corev1.EventTypeNormal, status.ReasonShardDeleted, "shard %s deleted", r.Shard)
		}
	}
	return errors.Join(errs...)
}

// write performs one action. Deletes carry the UID and resourceVersion seen
// in the cache as preconditions, so an object that changed hands (or was
// replaced) since the decision is never deleted on stale grounds.
func (c *Controller) write(a plan.Action) error {
	var err error
	if a.Service != nil {
		err = c.writeService(a)
	} else {
		err = c.writeDeployment(a)
	}
	// The Events and the reconcile's own line say what was done; a line
	// per write is for debugging, and costs nothing when it is off.
	if err != nil {
		logrus.WithFields(logrus.Fields{"shard": a.Shard, "object": a.Ref(), "action": a.Kind}).WithError(err).Warn("write failed; will retry")
		return fmt.Errorf("%s %s: %w", a.Kind, a.Ref(), err)
	}
	if logrus.IsLevelEnabled(logrus.DebugLevel) {
		logrus.WithFields(logrus.Fields{"shard": a.Shard, "object": a.Ref(), "action": a.Kind}).Debug("done")
	}
	return nil
}

// preconditions are the UID and resourceVersion that the decision saw.
func preconditions(o metav1.Object) *metav1.DeleteOptions {
	uid, rv := o.GetUID(), o.GetResourceVersion()
	policy := metav1.DeletePropagationBackground
	return &metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: &uid, ResourceVersion: &rv},
		PropagationPolicy: &policy,
	}
}

// The kinds that name objects in errors and in the expectations.
const (
	kindDeployment = "Deployment"
	kindService    = "Service"
	kindConfigMap  = "ConfigMap"
)

func (c *Controller) writeService(a plan.Action) error {
	svc := a.Service
	if a.Kind == plan.Update {
		svc = render.UpdatedService(svc, a.ExistingService)
	}
	return writeObject(c.services, c.writes, kindService, a.Kind, svc)
}

func (c *Controller) writeDeployment(a plan.Action) error {
	d, kind := a.Deployment, a.Kind
	switch kind {
	case plan.Update:
		d = render.UpdatedDeployment(d, a.Existing)
	case plan.Replace:
		// Only the existing Deployment is deleted: the next reconcile finds
		// the rendered one missing and creates it.
		d, kind = a.Existing, plan.Delete
	}
	return writeObject(c.deployments, c.writes, kindDeployment, kind, d)
}

// writeObject creates, updates or deletes obj through the client of its
// namespace, and records the write in writes until the cache shows it;
// what is its kind.
func writeObject[T metav1.Object](byNS map[string]access[T], writes *expect.Writes, what string, kind plan.ActionKind, obj T) error {
	a, ok := byNS[obj.GetNamespace()]
	if !ok {
		return fmt.Errorf("no %s client for namespace %s", what, obj.GetNamespace())
	}
	key := writeKey(what, obj.GetNamespace(), obj.GetName())
	switch kind {
	case plan.Create:
		out, err := a.client.Create(obj)
		if apierrors.IsAlreadyExists(err) {
			// Not this process's (its own creates are expected): its
			// watch event brings the next reconcile.
			return nil
		}
		if err != nil {
			return err
		}
		writes.Created(key, out.GetResourceVersion())
	case plan.Update:
		out, err := a.client.Update(obj)
		if err != nil {
			return err
		}
		writes.Updated(key, out.GetResourceVersion())
	case plan.Delete:
		if err := ignoreNotFound(a.client.Delete(obj.GetNamespace(), obj.GetName(), preconditions(obj))); err != nil {
			return err
		}
		writes.Deleted(key, obj.GetUID())
	default:
		return fmt.Errorf("unknown %s action %q", what, kind)
	}
	return nil
}
