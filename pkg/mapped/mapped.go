// Package mapped is what a shard means in the cluster: it caches the
// objects (GitRepos, HelmOps, HelmReleases, ...) that a shard label maps to a
// shard, indexed by shard. It keeps of each object only what the decisions
// read (key, shard label, labels, placement's annotations, deletion state,
// and, for the kinds whose spec carries shard labels or references, those
// labels and references; see specs.go), handed out as placement.Object and
// crossref.Object; and it follows each kind's CRD so that a kind installed
// later is picked up without a restart. How the objects come off the API
// server is package wire's.
//
// It is the daemon's own: not a supported API, and it may change in any
// release.
package mapped

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/shardkeeper/shardkeeper/pkg/placement"
	"github.com/shardkeeper/shardkeeper/pkg/source"
	"github.com/shardkeeper/shardkeeper/pkg/wire"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// Tracker counts mapped objects per shard for a set of kinds. It implements
// plan.Mapped.
type Tracker struct {
	client    metadata.Interface
	discovery discovery.DiscoveryInterface
	onChange  func()
	kinds     []*kind
	crdSynced []cache.InformerSynced
	// reader, when set, reads the objects (ReadThrough, ReadStock);
	// without it every kind is read through client, as metadata. stock:
	// the reader is wire.Stock, whose initial state client-go's reflector
	// reads its own way.
	reader wire.Reader
	stock  bool
	// after runs f once d has passed: time.AfterFunc, replaced in tests so
	// that retries need no sleeping.
	after func(d time.Duration, f func())
	// initialList is how each kind's initial state is read, and reading
	// what was decided of it when the first kind started (wire.Decide).
	initialList wire.InitialList
	decided     sync.Once
	reading     wire.Reading
}

type kind struct {
	spec source.MappedKind

	mu sync.RWMutex
	// pending: the CRD exists but the reflector does not run yet.
	pending bool
	// retrying: a check of discovery is scheduled; one at a time, however
	// often the CRD changes.
	retrying bool
	// failing says why the kind is still not watched after failingAfter
	// checks; empty otherwise.
	failing string
	cancel  context.CancelFunc
	index   *shardIndex
	// specs, for a kind whose spec the decisions read, wraps index.
	specs *specIndex
}

// Discovery is checked again, with a delay that doubles from a second up
// to maxDiscoveryDelay, for as long as a kind's CRD exists and its version
// is not served. A CRD that was just created is served a moment later; one
// still not served after failingAfter checks (about half a minute) is
// reported, but never counted as empty: its objects are unknown, not zero.
const (
	maxDiscoveryDelay = time.Minute
	failingAfter      = 6
)

// discoveryDelay is the wait before check attempt+1.
func discoveryDelay(attempt int) time.Duration {
	return min(time.Second<<min(attempt, 6), maxDiscoveryDelay) // 64s is past the cap
}

// New returns a Tracker for kinds; onChange is called whenever a count may
// have changed or a kind appeared or went.
func New(client metadata.Interface, disc discovery.DiscoveryInterface, kinds []source.MappedKind, onChange func()) *Tracker {
	t := &Tracker{client: client, discovery: disc, onChange: onChange, initialList: wire.InitialListAuto,
		after: func(d time.Duration, f func()) { time.AfterFunc(d, f) }}
	for _, k := range kinds {
		t.kinds = append(t.kinds, &kind{spec: k})
	}
	return t
}

// Start watches each kind's CRD (a metadata informer limited to the CRD's
// name) and starts or stops the kind's own informer as the CRD comes and goes.
func (t *Tracker) Start(ctx context.Context) error {
	for _, k := range t.kinds {
		inf := metadatainformer.NewFilteredMetadataInformer(t.client, crdResource, metav1.NamespaceAll, 0, cache.Indexers{},
			func(o *metav1.ListOptions) {
				o.FieldSelector = fields.OneTermEqualSelector("metadata.name", k.spec.CRDName()).String()
			}).Informer()
		reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { t.crdSeen(ctx, k) },
			UpdateFunc: func(any, any) { t.crdSeen(ctx, k) },
			DeleteFunc: func(any) { t.crdGone(k) },
		})
		if err != nil {
			return fmt.Errorf("watching CRD %s: %w", k.spec.CRDName(), err)
		}
		// The registration's HasSynced, not the informer's: it turns true
		// only once this handler has seen the initial list, and so has
		// marked the kind pending.
		t.crdSynced = append(t.crdSynced, reg.HasSynced)
		go inf.Run(ctx.Done())
	}
	return nil
}

// crdSeen marks the kind pending, so that nothing counts as synced before
// its informer runs, and starts it.
func (t *Tracker) crdSeen(ctx context.Context, k *kind) {
	k.mu.Lock()
	start := k.cancel == nil && !k.retrying
	if k.cancel == nil {
		k.pending, k.retrying = true, true
	}
	k.mu.Unlock()
	if start {
		t.crdPresent(ctx, k, 0)
	}
}

// crdPresent starts the kind's informer once discovery serves its version,
// checking again with backoff until it does or the CRD goes.
func (t *Tracker) crdPresent(ctx context.Context, k *kind, attempt int) {
	k.mu.Lock()
	if k.cancel != nil || !k.pending || ctx.Err() != nil {
		k.retrying = false
		k.mu.Unlock()
		return
	}
	k.mu.Unlock()
	served, err := t.serves(k.spec.Resource)
	if err != nil || !served {
		t.notServed(k, attempt, err)
		t.after(discoveryDelay(attempt), func() { t.crdPresent(ctx, k, attempt+1) })
		return
	}
	k.mu.Lock()
	if k.cancel != nil || !k.pending {
		k.retrying = false
		k.mu.Unlock()
		return
	}
	kctx, cancel := context.WithCancel(ctx)
	// Every object, labelled or not: placement assigns the unlabelled ones.
	// The initial state streams in as a watch ("watch list"), each object
	// stripped into the index as it arrives (wire.InitialSync).
	index := newShardIndex(k.spec.Name(), k.spec.Label, k.spec.Derived, t.onChange)
	index.grouped, index.ownerLabel = k.spec.GroupByNamespace, k.spec.OwnerLabel
	lw, expected, store, specs := t.watchOf(k.spec, index)
	r := cache.NewReflectorWithOptions(lw, expected, store, cache.ReflectorOptions{
		Name: k.spec.Resource.String(),
	})
	k.pending, k.retrying, k.failing, k.cancel, k.index, k.specs = false, false, "", cancel, index, specs
	k.mu.Unlock()
	logrus.WithField("resource", k.spec.Resource.String()).Info("watching mapped objects")
	go r.RunWithContext(kctx)
	t.onChange()
}

// notServed records a failed check. The kind becomes failing, with a
// warning logged once, when the check has failed failingAfter times; the
// reason then follows the latest check.
func (t *Tracker) notServed(k *kind, attempt int, err error) {
	if attempt+1 < failingAfter {
		return
	}
	why := fmt.Sprintf("the CRD %s exists, but the API server does not serve version %s", k.spec.CRDName(), k.spec.Resource.Version)
	if err != nil {
		why = err.Error()
	}
	k.mu.Lock()
	was := k.failing
	k.failing = why
	k.mu.Unlock()
	if was == "" {
		logrus.WithField("resource", k.spec.Resource.String()).WithField("reason", why).
			Warn("mapped objects cannot be listed; no shard is removed until they can, and discovery is retried")
	}
	if why != was {
		t.onChange()
	}
}

func (t *Tracker) crdGone(k *kind) {
	k.mu.Lock()
	if k.cancel != nil {
		k.cancel()
	}
	k.pending, k.failing, k.cancel, k.index, k.specs = false, "", nil, nil, nil
	k.mu.Unlock()
	logrus.WithField("resource", k.spec.Resource.String()).Info("CRD removed; its objects count as zero")
	t.onChange()
}

func (t *Tracker) serves(gvr schema.GroupVersionResource) (bool, error) {
	list, err := t.discovery.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discovering %s: %w", gvr.GroupVersion(), err)
	}
	for _, r := range list.APIResources {
		if r.Name == gvr.Resource {
			return true, nil
		}
	}
	return false, nil
}

// Synced reports whether every CRD watch has synced and every kind whose
// CRD is served has filled its cache. Until then no shard may be deleted.
func (t *Tracker) Synced() bool {
	for _, s := range t.crdSynced {
		if !s() {
			return false
		}
	}
	if len(t.crdSynced) != len(t.kinds) {
		return false
	}
	for _, k := range t.kinds {
		k.mu.RLock()
		ok := !k.pending && (k.index == nil || k.index.hasSynced())
		k.mu.RUnlock()
		if !ok {
			return false
		}
	}
	return true
}

// Failing returns, as "kind: reason", the kinds whose CRD exists but
// whose objects still cannot be listed after a while. They keep Synced
// false.
func (t *Tracker) Failing() []string {
	var out []string
	for _, k := range t.kinds {
		k.mu.RLock()
		if k.failing != "" {
			out = append(out, k.spec.Name()+": "+k.failing)
		}
		k.mu.RUnlock()
	}
	return out
}

// Counts returns the number of objects of each kind mapped to shard.
func (t *Tracker) Counts(shard string) map[string]int {
	out := map[string]int{}
	for _, k := range t.kinds {
		if index := k.current(); index != nil {
			if n := index.count(shard); n > 0 {
				out[k.spec.Name()] = n
			}
		}
	}
	return out
}

// Sample returns up to n objects mapped to shard, as "kind namespace/name".
func (t *Tracker) Sample(shard string, n int) []string {
	var out []string
	for _, k := range t.kinds {
		index := k.current()
		if index == nil {
			continue
		}
		for _, o := range index.mappedTo(shard) {
			if len(out) == n {
				break
			}
			out = append(out, o.Ref())
		}
		if len(out) >= n {
			break
		}
	}
	return out
}

// Shards returns every shard ID that some mapped object carries.
func (t *Tracker) Shards() []string {
	seen := map[string]bool{}
	for _, k := range t.kinds {
		if index := k.current(); index != nil {
			for _, id := range index.shards() {
				if id != "" { // an empty shard label is the unsharded controller's
					seen[id] = true
				}
			}
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// MappedTo returns the objects of every kind labelled with shard.
func (t *Tracker) MappedTo(shard string) []placement.Object {
	var out []placement.Object
	for _, k := range t.kinds {
		if index := k.current(); index != nil {
			out = append(out, index.mappedTo(shard)...)
		}
	}
	return out
}

// All returns every cached object of every kind, labelled or not.
func (t *Tracker) All() []placement.Object {
	var out []placement.Object
	for _, k := range t.kinds {
		if index := k.current(); index != nil {
			out = index.all(out)
		}
	}
	return out
}

func (k *kind) current() *shardIndex {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.index
}
