package shardset

import (
	"fmt"
	"maps"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shardkeeper/shardkeeper/pkg/metrics"
	"github.com/shardkeeper/shardkeeper/pkg/render"
	"github.com/shardkeeper/shardkeeper/pkg/status"
)

// report writes the status ConfigMap when its content changes, at most once
// per statusInterval, and emits the condition Events that each change
// implies. A write held back by the pacing returns the requeue that makes
// it once the interval has passed. The status it compares with is read
// once from the cluster, so a restarted daemon neither rewrites an
// unchanged status nor repeats an Event.
func (c *Controller) report(cm *corev1.ConfigMap, st status.Status) (requeue, error) {
	c.statusMu.Lock()
	defer c.statusMu.Unlock()
	if c.reported == nil {
		r, err := c.readStatus()
		if err != nil {
			return requeue{}, err
		}
		c.reported = r
		if c.seen == nil {
			c.seen = &r.status
		}
	}
	if st.Error != "" {
		metrics.ConfigAccepted.Set(0)
		// A rejected edit changes nothing, the report of the shards included.
		st.Shards, st.Warnings = c.seen.Shards, c.seen.Warnings
	}
	data, err := status.Encode(st)
	if err != nil {
		return requeue{}, err
	}
	// The Events follow every change seen, also those that a paced write
	// folds away (a shard drained within a second is still news).
	if cm != nil {
		for _, e := range status.Changes(*c.seen, st) {
			if e.Reason == status.ReasonShardDeletionBlocked {
				metrics.BlockedDeletions.Inc()
			}
			c.recorder.Event(cm, e.Type, e.Reason, e.Message)
		}
	}
	c.seen = &st
	if c.reported.exists && maps.Equal(data, c.reported.data) {
		return requeue{}, nil
	}
	if wait := statusInterval - c.now().Sub(c.lastStatusWrite); wait > 0 && cm != nil {
		return requeue{after: wait, reason: reasonStatusPaced}, nil
	}
	logrus.WithField("configmap", c.opts.ConfigMap.String()).WithField("status", data).Debug("writing status")
	if err := c.writeStatus(data); err != nil {
		c.reported = nil // read it again: it may have changed under us
		return requeue{}, err
	}
	c.lastStatusWrite = c.now()
	return requeue{}, nil
}

func (c *Controller) readStatus() (*reportedStatus, error) {
	live, err := c.statusMaps.Get(c.opts.ConfigMap.Namespace, c.statusName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return &reportedStatus{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading status ConfigMap: %w", err)
	}
	return &reportedStatus{status: status.Decode(live.Data), data: live.Data, exists: true, resourceVersion: live.ResourceVersion}, nil
}

// writeStatus creates or updates the status ConfigMap; the update carries
// the last resourceVersion seen, so a concurrent writer is noticed.
func (c *Controller) writeStatus(data map[string]string) error {
	r := c.reported
	obj := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:            c.statusName(),
			Namespace:       c.opts.ConfigMap.Namespace,
			Labels:          map[string]string{render.ManagedByLabel: render.ManagedByValue},
			ResourceVersion: r.resourceVersion,
		},
		Data: data,
	}
	var out *corev1.ConfigMap
	var err error
	if r.exists {
		out, err = c.statusMaps.Update(obj)
	} else {
		out, err = c.statusMaps.Create(obj)
	}
	if err != nil {
		return fmt.Errorf("writing status ConfigMap %s: %w", obj.Name, err)
	}
	r.exists, r.data, r.resourceVersion = true, data, out.ResourceVersion
	return nil
}
