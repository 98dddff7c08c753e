// Package expect remembers the writes a controller made until its caches
// show them, as kube-controller-manager's controllers do with their
// expectations: a decision taken on a cache that has not yet seen the
// controller's own writes would send them again (a create that fails with
// AlreadyExists, a delete with NotFound, a patch with a conflict).
//
// A create is seen once the cached object carries the resourceVersion the
// create returned, or a newer one; an update or patch likewise, or once the
// object is gone from the cache (it was there when the write was decided, so
// its deletion came after); a delete once the cache no longer holds the
// object deleted. Resource versions are compared as the integers that
// Kubernetes guarantees them to be (KEP-5504): a cache that has moved past a
// write, whatever happened to the object since, has seen it.
//
// It is the daemon's own: not a supported API, and it may change in any
// release.
package expect

import (
	"slices"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// DefaultTTL is how long a write may stay unseen by the caches before a
// decision is taken without waiting for it. Unlike kube-controller-manager's
// expectations, which hold back one ReplicaSet each, these hold back a whole
// shard set or placement round, so the wait is short: a watch event is not
// lost short of a relist, and a relist refills the cache.
const DefaultTTL = 30 * time.Second

// Cached is what a cache holds of one object: its resourceVersion and UID,
// and whether it is there at all.
type Cached struct {
	ResourceVersion string
	UID             types.UID
	Exists          bool
}

// Lookup reads one object from the cache by its key.
type Lookup func(key string) Cached

// Writes holds the unseen writes of one cache, by object key. It is safe
// for concurrent use; the zero value is not: use New.
type Writes struct {
	mu      sync.Mutex
	pending map[string]write
	ttl     time.Duration
	now     func() time.Time
}

type write struct {
	// resourceVersion is the version a create or update returned.
	resourceVersion string
	// created: the object did not exist before the write.
	created bool
	// uid is the object a delete removed.
	uid     types.UID
	deleted bool
	at      time.Time
}

// New returns an empty Writes that forgets a write after ttl.
func New(ttl time.Duration) *Writes {
	return &Writes{pending: map[string]write{}, ttl: ttl, now: time.Now}
}

// Created records a create that returned resourceVersion.
func (w *Writes) Created(key, resourceVersion string) {
	w.add(key, write{resourceVersion: resourceVersion, created: true})
}

// Updated records an update or patch that returned resourceVersion.
func (w *Writes) Updated(key, resourceVersion string) {
	w.add(key, write{resourceVersion: resourceVersion})
}

// Deleted records the delete of the object uid.
func (w *Writes) Deleted(key string, uid types.UID) {
	w.add(key, write{uid: uid, deleted: true})
}

func (w *Writes) add(key string, wr write) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wr.at = w.now()
	w.pending[key] = wr
}

// unseen forgets the writes that lookup shows, and those older than the
// TTL, and returns the keys of the others, sorted, with those it forgot
// for age (a lost event, worth a log line).
func (w *Writes) unseen(lookup Lookup) (unseen, expired []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	for key, wr := range w.pending {
		switch {
		case seen(wr, lookup(key)):
			delete(w.pending, key)
		case now.Sub(wr.at) >= w.ttl:
			delete(w.pending, key)
			expired = append(expired, key)
		default:
			unseen = append(unseen, key)
		}
	}
	slices.Sort(unseen)
	slices.Sort(expired)
	return unseen, expired
}

// Behind reports whether a write is not yet shown by lookup, so that a
// decision taken now would send it again. It logs, with log's fields, the
// writes given up for age as a warning (their watch events were lost) and
// the wait itself at debug level.
func (w *Writes) Behind(lookup Lookup, log logrus.FieldLogger) bool {
	unseen, expired := w.unseen(lookup)
	if len(expired) > 0 {
		log.WithField("writes", expired).Warnf("the caches did not show these writes within %s; deciding without them", w.ttl)
	}
	if len(unseen) == 0 {
		return false
	}
	log.WithFields(logrus.Fields{"unseen": len(unseen), "first": unseen[0]}).Debug("waiting for the caches to show this process's writes")
	return true
}

// Len is the number of writes not yet known to be seen.
func (w *Writes) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pending)
}

// seen reports whether the cached object shows the write.
func seen(wr write, c Cached) bool {
	if wr.deleted {
		return !c.Exists || c.UID != wr.uid
	}
	if !c.Exists {
		return !wr.created
	}
	cmp, err := resourceversion.CompareResourceVersion(c.ResourceVersion, wr.resourceVersion)
	if err != nil {
		// Not an integer (an API server that does not promise ordered
		// versions): only the very version written counts.
		return c.ResourceVersion == wr.resourceVersion
	}
	return cmp >= 0
}
