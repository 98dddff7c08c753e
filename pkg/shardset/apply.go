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
// caches show the writes. It returns, besides every error, the first error
// of each shard whose writes fail for another reason than a stale cache,
// for its status (see plan.StatusAfter).
func (c *Controller) apply(p plan.Plan, tl *timeline) (failing map[string]error, err error) {
	var times writeTimes
	existed, errs := c.writeAll(p.Actions, &times)
	times.mark(tl)
	failed := map[string]bool{}
	failing = map[string]error{}
	created := map[string][]string{}
	for i, a := range p.Actions {
		if errs[i] != nil {
			failed[a.Shard] = true
			if failing[a.Shard] == nil && !staleCache(errs[i]) {
				failing[a.Shard] = errs[i]
			}
			continue
		}
		if existed[i] {
			// Another writer created it: not this process's news.
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
		if a.Renamed {
			c.announceLater(corev1.EventTypeNormal, status.ReasonShardRenamed,
				"%s of shard %s, named as an earlier release named it, was deleted: its successor is Available", a.Ref(), a.Shard)
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
	c.announceRemovals(p.Removals, failed)
	return failing, errors.Join(errs...)
}

// writeAll performs the actions, at most WriteParallelism at once, and
// returns each one's outcome (see write) by its index; times records when
// the first was sent and the last answered.
func (c *Controller) writeAll(actions []plan.Action, times *writeTimes) (existed []bool, errs []error) {
	errs = make([]error, len(actions))
	existed = make([]bool, len(actions))
	var g errgroup.Group
	limit := c.opts.WriteParallelism
	if limit <= 0 {
		limit = defaultWriteParallelism
	}
	g.SetLimit(limit)
	for i, a := range actions {
		// Each action's error is kept in errs, never returned to the group:
		// one failed write must not stop or skip the others.
		g.Go(func() error {
			times.sent()
			existed[i], errs[i] = c.write(a)
			times.answered()
			return nil
		})
	}
	_ = g.Wait() // always nil: the errors are in errs
	return existed, errs
}

// announceRemovals holds the Events of the shards removed, those whose
// deletions all succeeded, and remembers the forced ones.
func (c *Controller) announceRemovals(removals []plan.Removal, failed map[string]bool) {
	for _, r := range removals {
		if failed[r.Shard] {
			continue
		}
		if !r.Forced {
			c.announceLater(corev1.EventTypeNormal, status.ReasonShardDeleted, "shard %s deleted", r.Shard)
			continue
		}
		metrics.ForcedDeletions.Inc()
		c.mu.Lock()
		c.forceDeleted[r.Shard] = true
		c.mu.Unlock()
		c.announceLater(corev1.EventTypeWarning, status.ReasonShardForceDeleted,
			"shard %s force-deleted; left behind with no controller: %s (%s)",
			r.Shard, plan.FormatCounts(r.Mapped), strings.Join(r.Sample, ", "))
	}
}

// staleCache reports an error that says the decision's cache was behind
// (the object changed or went away since): the next decision, from a cache
// that has caught up, writes what is right, so the shard is not failing.
func staleCache(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsNotFound(err)
}

// write performs one action; existed reports a create that found its object
// already there, made by another writer. Deletes carry the UID and
// resourceVersion seen in the cache as preconditions, so an object that
// changed hands (or was replaced) since the decision is never deleted on
// stale grounds.
func (c *Controller) write(a plan.Action) (existed bool, err error) {
	if a.Service != nil {
		existed, err = c.writeService(a)
	} else {
		existed, err = c.writeDeployment(a)
	}
	// The Events and the reconcile's own line say what was done; a line
	// per write is for debugging, and costs nothing when it is off.
	if err != nil {
		logrus.WithFields(logrus.Fields{"shard": a.Shard, "object": a.Ref(), "action": a.Kind}).WithError(err).Warn("write failed; will retry")
		return false, fmt.Errorf("%s %s: %w", a.Kind, a.Ref(), err)
	}
	if logrus.IsLevelEnabled(logrus.DebugLevel) {
		logrus.WithFields(logrus.Fields{"shard": a.Shard, "object": a.Ref(), "action": a.Kind, "existed": existed}).Debug("done")
	}
	return existed, nil
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

func (c *Controller) writeService(a plan.Action) (bool, error) {
	svc := a.Service
	if a.Kind == plan.Update {
		svc = render.UpdatedService(svc, a.ExistingService)
	}
	existed, _, err := writeObject(c.services, c.writes, kindService, a.Kind, svc)
	return existed, err
}

func (c *Controller) writeDeployment(a plan.Action) (bool, error) {
	d, kind := a.Deployment, a.Kind
	switch kind {
	case plan.Update:
		d = render.UpdatedDeployment(d, a.Existing)
	case plan.Replace:
		// Only the existing Deployment is deleted: the next reconcile finds
		// the rendered one missing and creates it.
		d, kind = a.Existing, plan.Delete
	}
	existed, written, err := writeObject(c.deployments, c.writes, kindDeployment, kind, d)
	if err == nil && !existed && (kind == plan.Create || kind == plan.Update) {
		c.renders.Wrote(a.Deployment, written)
	}
	return existed, err
}

// writeObject creates, updates or deletes obj through the client of its
// namespace, and records the write in writes until the cache shows it;
// what is its kind. It reports a create that found obj already there, and
// returns the API server's answer to a create or an update.
func writeObject[T metav1.Object](byNS map[string]access[T], writes *expect.Writes, what string, kind plan.ActionKind, obj T) (existed bool, written T, err error) {
	a, ok := byNS[obj.GetNamespace()]
	if !ok {
		return false, written, fmt.Errorf("no %s client for namespace %s", what, obj.GetNamespace())
	}
	key := writeKey(what, obj.GetNamespace(), obj.GetName())
	switch kind {
	case plan.Create:
		written, err = a.client.Create(obj)
		if apierrors.IsAlreadyExists(err) {
			// Not this process's (its own creates are expected): its
			// watch event brings the next reconcile.
			return true, written, nil
		}
		if err != nil {
			return false, written, err
		}
		writes.Created(key, written.GetResourceVersion())
	case plan.Update:
		if written, err = a.client.Update(obj); err != nil {
			return false, written, err
		}
		writes.Updated(key, written.GetResourceVersion())
	case plan.Delete:
		if err := deleteStillOurs(a, obj); err != nil {
			return false, written, err
		}
		writes.Deleted(key, obj.GetUID())
	default:
		return false, written, fmt.Errorf("unknown %s action %q", what, kind)
	}
	return false, written, nil
}

// deleteAttempts bounds the deletes of one object whose resourceVersion
// moves on while it is being deleted.
const deleteAttempts = 3

// deleteStillOurs deletes obj with the UID and resourceVersion that the
// decision saw as preconditions. When the resourceVersion has moved on, it
// reads the object from the API server and deletes it again, on what it
// read, if it is still the same object, still managed, and labelled as the
// decision saw it. kube-controller-manager updates a Deployment's status,
// and sets its revision annotation, for seconds after its creation: a
// shard removed in that time would otherwise fail its deletes, and be
// decided again after a backoff, for a change that decides nothing. A
// change of its labels may make it another shard's or nobody's: that
// conflict is returned, and the next decision reads the object again.
func deleteStillOurs[T metav1.Object](a access[T], obj T) error {
	ns, name := obj.GetNamespace(), obj.GetName()
	var seen metav1.Object = obj
	for attempt := 1; ; attempt++ {
		err := a.client.Delete(ns, name, preconditions(seen))
		if !apierrors.IsConflict(err) || attempt == deleteAttempts || a.live == nil {
			return ignoreNotFound(err)
		}
		live, getErr := a.live.Get(ns, name, metav1.GetOptions{})
		if apierrors.IsNotFound(getErr) {
			return nil
		}
		if getErr != nil {
			return fmt.Errorf("%w; reading it again: %w", err, getErr)
		}
		if live.GetUID() != obj.GetUID() || !render.IsManaged(live) || !maps.Equal(live.GetLabels(), obj.GetLabels()) {
			return err
		}
		seen = live
	}
}
