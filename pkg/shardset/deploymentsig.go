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

// sigChange is how a Deployment changed in what decisions read of it.
type sigChange int

const (
	// sigSame: nothing a decision reads.
	sigSame sigChange = iota
	// sigStatus: its status alone (rolled out, available).
	sigStatus
	// sigObject: it is new to this process, or its spec, labels,
	// annotations or deletion changed.
	sigObject
)

// revisionAnnotation is kube-controller-manager's deployment controller's
// count of a Deployment's rollouts, which it sets on the Deployment itself
// as it first syncs a new one (RevisionAnnotation in
// k8s.io/kubernetes pkg/controller/deployment/util/deployment_util.go). No
// decision reads it; without this exception each Deployment of a burst
// would bring one more reconcile right after its creation.
const revisionAnnotation = "deployment.kubernetes.io/revision"

// compare says how s differs from the earlier o.
func (s deploymentSig) compare(o deploymentSig) sigChange {
	if s.uid != o.uid || s.generation != o.generation || s.deleting != o.deleting ||
		!maps.Equal(s.labels, o.labels) || !equalExceptRevision(s.annotations, o.annotations) {
		return sigObject
	}
	if s.status != o.status {
		return sigStatus
	}
	return sigSame
}

// deploymentSigs remembers the signature of each relevant Deployment last
// seen, by namespace/name. The maps it holds are the cached objects' own:
// an informer replaces an object, it never changes one in place.
type deploymentSigs struct {
	mu   sync.Mutex
	seen map[string]deploymentSig
}

// changed records d under key and says how it differs from what was seen
// before, in what a decision reads.
func (s *deploymentSigs) changed(key string, d *appsv1.Deployment) sigChange {
	sig := sigOf(d)
	s.mu.Lock()
	defer s.mu.Unlock()
	change := sigObject
	if prev, ok := s.seen[key]; ok {
		if change = sig.compare(prev); change == sigSame {
			return sigSame
		}
	}
	if s.seen == nil {
		s.seen = map[string]deploymentSig{}
	}
	s.seen[key] = sig
	return change
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

// equalExceptRevision reports whether a and b hold the same annotations,
// revisionAnnotation aside.
func equalExceptRevision(a, b map[string]string) bool {
	n := len(a)
	if _, ok := a[revisionAnnotation]; ok {
		n--
	}
	m := len(b)
	if _, ok := b[revisionAnnotation]; ok {
		m--
	}
	if n != m {
		return false
	}
	for k, v := range a {
		if k == revisionAnnotation {
			continue
		}
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
