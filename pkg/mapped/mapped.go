// Package mapped counts, per shard ID, the objects (GitRepos, HelmOps,
// HelmReleases, ...) whose shard label maps them to a shard. It watches
// metadata only, keeps only what the decisions read (name, namespace, the
// shard label, the deletion state), and follows each kind's CRD so that a
// kind installed later is picked up without a restart.
package mapped

import (
	"context"
	"fmt"
	"sort"
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
	// pending: the CRD exists but the informer does not run yet.
	pending bool
	cancel  context.CancelFunc
	synced  cache.InformerSynced
	indexer cache.Indexer
	counts  map[string]int
}

const shardIndex = "shard"

// maxDiscoveryAttempts bounds the wait, at one a second, for a new CRD's
// version to be served.
const maxDiscoveryAttempts = 30

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
		logrus.WithError(err).WithField("resource", k.spec.Resource.String()).
			Warn("the CRD exists but does not serve this version; its objects count as zero")
		k.mu.Lock()
		k.pending = false
		k.mu.Unlock()
		t.onChange()
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cancel != nil {
		return
	}
	kctx, cancel := context.WithCancel(ctx)
	label := k.spec.Label
	inf := metadatainformer.NewFilteredMetadataInformer(t.client, k.spec.Resource, metav1.NamespaceAll, 0,
		cache.Indexers{shardIndex: func(obj any) ([]string, error) {
			m, err := meta(obj)
			if err != nil {
				return nil, err
			}
			return []string{m.Labels[label]}, nil
		}},
		func(o *metav1.ListOptions) { o.LabelSelector = label }).Informer()
	if err := inf.SetTransform(trim(label)); err != nil {
		cancel()
		logrus.WithError(err).Error("setting transform")
		return
	}
	counts := map[string]int{}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			k.adjust(counts, obj, 1)
			t.onChange()
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, err1 := meta(oldObj)
			n, err2 := meta(newObj)
			if err1 != nil || err2 != nil {
				return
			}
			if o.Labels[label] == n.Labels[label] && (o.DeletionTimestamp == nil) == (n.DeletionTimestamp == nil) {
				return
			}
			k.adjust(counts, oldObj, -1)
			k.adjust(counts, newObj, 1)
			t.onChange()
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			k.adjust(counts, obj, -1)
			t.onChange()
		},
	})
	if err != nil {
		cancel()
		logrus.WithError(err).Error("adding handler")
		return
	}
	// Counts are kept by the handler, so they are complete when the
	// handler has seen the initial list, not when the store has.
	k.pending, k.cancel, k.synced, k.indexer, k.counts = false, cancel, reg.HasSynced, inf.GetIndexer(), counts
	logrus.WithField("resource", k.spec.Resource.String()).Info("watching mapped objects")
	go inf.Run(kctx.Done())
	t.onChange()
}

func (t *Tracker) crdGone(k *kind) {
	k.mu.Lock()
	if k.cancel != nil {
		k.cancel()
	}
	k.pending, k.cancel, k.synced, k.indexer, k.counts = false, nil, nil, nil, nil
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

// adjust counts the object under its shard label. It is called from the
// informer's single handler goroutine, but read from the reconciler, hence
// the lock.
func (k *kind) adjust(counts map[string]int, obj any, delta int) {
	m, err := meta(obj)
	if err != nil {
		return
	}
	id := m.Labels[k.spec.Label]
	k.mu.Lock()
	defer k.mu.Unlock()
	counts[id] += delta
	if counts[id] <= 0 {
		delete(counts, id)
	}
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
		ok := !k.pending && (k.synced == nil || k.synced())
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
		k.mu.RLock()
		if n := k.counts[shard]; n > 0 {
			out[k.spec.Name()] = n
		}
		k.mu.RUnlock()
	}
	return out
}

// Sample returns up to n objects mapped to shard, as "kind namespace/name".
func (t *Tracker) Sample(shard string, n int) []string {
	var out []string
	for _, k := range t.kinds {
		k.mu.RLock()
		indexer := k.indexer
		k.mu.RUnlock()
		if indexer == nil {
			continue
		}
		keys, err := indexer.IndexKeys(shardIndex, shard)
		if err != nil {
			continue
		}
		sort.Strings(keys)
		for _, key := range keys {
			if len(out) >= n {
				return out
			}
			out = append(out, k.spec.Name()+" "+key)
		}
	}
	return out
}

// Shards returns every shard ID that some mapped object carries.
func (t *Tracker) Shards() []string {
	seen := map[string]bool{}
	for _, k := range t.kinds {
		k.mu.RLock()
		for id := range k.counts {
			if id != "" { // an empty shard label is the unsharded controller's
				seen[id] = true
			}
		}
		k.mu.RUnlock()
	}
	out := make([]string, 0, len(seen))
	for id := range seen {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// trim keeps only what the decisions read. A metadata watch still carries
// every annotation (a last-applied one alone is most of an object), and the
// cache would hold all of it for every object.
func trim(label string) cache.TransformFunc {
	return func(obj any) (any, error) {
		m, ok := obj.(*metav1.PartialObjectMetadata)
		if !ok {
			return obj, nil
		}
		out := &metav1.PartialObjectMetadata{
			TypeMeta: m.TypeMeta,
			ObjectMeta: metav1.ObjectMeta{
				Name:              m.Name,
				Namespace:         m.Namespace,
				UID:               m.UID,
				ResourceVersion:   m.ResourceVersion,
				DeletionTimestamp: m.DeletionTimestamp,
			},
		}
		if v, ok := m.Labels[label]; ok {
			out.Labels = map[string]string{label: v}
		}
		return out, nil
	}
}

func meta(obj any) (*metav1.PartialObjectMetadata, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return nil, fmt.Errorf("unexpected object %T", obj)
	}
	return m, nil
}
