package shardset

import (
	"maps"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/shardkeeper/shardkeeper/pkg/plan"
)

// deploymentSig is what a decision reads of a Deployment: a change of a
// shard's or a source's Deployment that leaves it alone needs no
// reconcile. kube-controller-manager updates a new Deployment's status two
// or three times as its replica comes up, and only the last of those
// (available) is news; without the filter each would decide the whole
// shard set again while the rest of a burst is still arriving.
type deploymentSig struct {
	uid         types.UID
	generation  int64 // the spec: the API server bumps it on every change
	deleting    bool
	labels      map[string]string
	annotations map[string]string
	status      plan.StatusRead
}

func sigOf(d *appsv1.Deployment) deploymentSig {
	return deploymentSig{
		uid: d.UID, generation: d.Generation, deleting: d.DeletionTimestamp != nil,
		labels: d.Labels, annotations: d.Annotations, status: plan.ReadStatus(d),
	}
}

func (s deploymentSig) equal(o deploymentSig) bool {
	return s.uid == o.uid && s.generation == o.generation && s.deleting == o.deleting && s.status == o.status &&
		maps.Equal(s.labels, o.labels) && maps.Equal(s.annotations, o.annotations)
}

// deploymentSigs remembers the signature of each relevant Deployment last
// seen, by namespace/name. The maps it holds are the cached objects' own:
// an informer replaces an object, it never changes one in place.
type deploymentSigs struct {
	mu   sync.Mutex
	seen map[string]deploymentSig
}

// changed records d under key and reports whether a decision could differ
// from the one made on what was seen before.
func (s *deploymentSigs) changed(key string, d *appsv1.Deployment) bool {
	sig := sigOf(d)
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, ok := s.seen[key]; ok && prev.equal(sig) {
		return false
	}
	if s.seen == nil {
		s.seen = map[string]deploymentSig{}
	}
	s.seen[key] = sig
	return true
}

// forget drops what was seen under key, the Deployment deleted, and
// reports whether anything was.
func (s *deploymentSigs) forget(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.seen[key]
	delete(s.seen, key)
	return ok
}
