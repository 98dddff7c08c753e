// Package mapped caches the objects (GitRepos, HelmOps, HelmReleases, ...)
// that a shard label maps to a shard, indexed by shard. It watches metadata
// only; it keeps of each object only what the decisions read (key, shard
// label, labels, placement's annotations, deletion state); and it follows
// each kind's CRD so that a kind installed later is picked up without a
// restart.
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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/shardkeeper/shardkeeper/pkg/source"
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
}

type kind struct {
	spec source.MappedKind

	mu sync.RWMutex
	// pending: the CRD exists but the reflector does not run yet.
	pending bool
	cancel  context.CancelFunc
	index   *shardIndex
}

// maxDiscoveryAttempts bounds the wait, at one a second, for a new CRD's
// version to be served.
const maxDiscoveryAttempts = 30

// listPageSize pages a list, where the API server cannot stream the
// initial state as a watch (before 1.32); the reflector still holds every
// page until the last one, stripped only then.
const listPageSize = 500

// New returns a Tracker for kinds; onChange is called whenever a count may
// have changed or a kind appeared or went.
func New(client metadata.Interface, disc discovery.DiscoveryInterface, kinds []source.MappedKind, onChange func()) *Tracker {
	t := &Tracker{client: client, discovery: disc, onChange: onChange}
	for _, k := range kinds {
		t.kinds = append(t.kinds, &kind{spec: k})
	}
	return t
}

// Start watches each kind's CRD (a metadata informer limited to the CRD's
// name) and starts or stops the kind's own informer as the CRD comes and goes.
func (t *Tracker) Start(ctx context.Context) error {
	for _, k := range t.kinds {
		k := k
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
	if k.cancel == nil {
		k.pending = true
	}
	k.mu.Unlock()
	t.crdPresent(ctx, k, 0)
}

// crdPresent starts the kind's informer once discovery serves its version.
// A CRD that was just created is served a moment later, so it is checked
// again for a while. A CRD that never serves the version counts as absent
// then; its next update brings it back here.
func (t *Tracker) crdPresent(ctx context.Context, k *kind, attempt int) {
	k.mu.Lock()
	running := k.cancel != nil
	k.mu.Unlock()
	if running || ctx.Err() != nil {
		return
	}
	served, err := t.serves(k.spec.Resource)
	if err != nil || !served {
		if attempt < maxDiscoveryAttempts {
			time.AfterFunc(time.Second, func() { t.crdPresent(ctx, k, attempt+1) })
			return
		}
		log := logrus.WithField("resource", k.spec.Resource.String())
		if err != nil {
			log = log.WithError(err)
		}
		log.Warn("the CRD exists but does not serve this version; its objects count as zero")
		k.mu.Lock()
		k.pending = false
		k.mu.Unlock()
		t.onChange()
		return
	}
	k.mu.Lock()
	if k.cancel != nil {
		k.mu.Unlock()
		return
	}
	kctx, cancel := context.WithCancel(ctx)
	client := t.client.Resource(k.spec.Resource)
	// Every object, labelled or not: placement assigns the unlabelled ones.
	// The initial state streams in as a watch ("watch list"), each object
	// stripped by the index's transform as it arrives.
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return client.Watch(ctx, o)
		},
	}
	index := newShardIndex(k.spec.Name(), k.spec.Label, k.spec.Derived, t.onChange)
	r := cache.NewReflectorWithOptions(lw, &metav1.PartialObjectMetadata{}, index, cache.ReflectorOptions{
		Name: k.spec.Resource.String(),
	})
	r.WatchListPageSize = listPageSize
	k.pending, k.cancel, k.index = false, cancel, index
	k.mu.Unlock()
	logrus.WithField("resource", k.spec.Resource.String()).Info("watching mapped objects")
	go r.RunWithContext(kctx)
	t.onChange()
}

func (t *Tracker) crdGone(k *kind) {
	k.mu.Lock()
	if k.cancel != nil {
		k.cancel()
	}
	k.pending, k.cancel, k.index = false, nil, nil
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
func (t *Tracker) MappedTo(shard string) []Object {
	var out []Object
	for _, k := range t.kinds {
		if index := k.current(); index != nil {
			out = append(out, index.mappedTo(shard)...)
		}
	}
	return out
}

// All returns every cached object of every kind, labelled or not.
func (t *Tracker) All() []Object {
	var out []Object
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
