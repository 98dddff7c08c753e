package shardset

import (
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shardkeeper/shardkeeper/pkg/expect"
	"github.com/shardkeeper/shardkeeper/pkg/metrics"
)

// unseenRecheck requeues a reconcile that waits for its writes to show, in
// case no event comes; the event that shows the last one enqueues it anyway.
const unseenRecheck = time.Second

// writeKey names an object in the expectations: its kind and key.
func writeKey(kind, namespace, name string) string {
	return kind + " " + namespace + "/" + name
}

// cachesBehind returns, when a write of this process is not yet in the
// caches, the requeue that waits for it, and the zero requeue otherwise: a
// decision taken now would send the write again. The reconcile then waits
// for the watch events, which enqueue it again.
func (c *Controller) cachesBehind(cm *corev1.ConfigMap) requeue {
	if !c.writes.Behind(c.lookup(cm), logrus.WithField("configmap", c.opts.ConfigMap.String())) {
		return requeue{}
	}
	metrics.ReconcileCacheWaits.Inc()
	return requeue{after: unseenRecheck, reason: reasonWritesUnseen}
}

// lookup reads an object of the expectations from its cache; the shard
// ConfigMap is cm, the cached copy the reconcile was given.
func (c *Controller) lookup(cm *corev1.ConfigMap) expect.Lookup {
	return func(key string) expect.Cached {
		kind, ref, _ := strings.Cut(key, " ")
		ns, name, _ := strings.Cut(ref, "/")
		switch kind {
		case kindDeployment:
			return cachedObject(c.deployments, ns, name)
		case kindService:
			return cachedObject(c.services, ns, name)
		case kindConfigMap:
			if cm != nil && cm.Namespace == ns && cm.Name == name {
				return expect.Cached{ResourceVersion: cm.ResourceVersion, UID: cm.UID, Exists: true}
			}
		}
		return expect.Cached{}
	}
}

func cachedObject[T metav1.Object](byNS map[string]access[T], ns, name string) expect.Cached {
	a, ok := byNS[ns]
	if !ok {
		return expect.Cached{}
	}
	o, err := a.cache.Get(ns, name)
	if err != nil { // NotFound: the only error of a cache read
		return expect.Cached{}
	}
	return expect.Cached{ResourceVersion: o.GetResourceVersion(), UID: o.GetUID(), Exists: true}
}
