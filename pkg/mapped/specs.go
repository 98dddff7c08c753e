package mapped

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/sirupsen/logrus"

	"github.com/shardkeeper/shardkeeper/pkg/crossref"
	"github.com/shardkeeper/shardkeeper/pkg/source"
	"github.com/shardkeeper/shardkeeper/pkg/wire"
)

// Flux's API groups and the source kinds that a reference names, with the
// resources that the mapped kinds of the flux preset call them by.
const (
	fluxSourceGroup = "source.toolkit.fluxcd.io"
	fluxHelmGroup   = "helm.toolkit.fluxcd.io"
	// helmReleaseNameLabel marks the HelmChart that helm-controller made
	// from a HelmRelease (fluxcd/pkg ssa's owner labels).
	helmReleaseNameLabel = "helm.toolkit.fluxcd.io/name"
)

var fluxSourceKinds = map[string]string{
	"GitRepository":  "gitrepositories",
	"OCIRepository":  "ocirepositories",
	"HelmRepository": "helmrepositories",
	"HelmChart":      "helmcharts",
	"Bucket":         "buckets",
}

// refField is the field of a reference; the zero value is none.
type refField uint8

const (
	noRef refField = iota
	// sourceRefField is a HelmChart's, resolved by its own shard.
	sourceRefField
	// chartSourceRefField is a HelmRelease's chart template's: the HelmChart
	// made from it lives in the source's namespace and is built by the
	// shard its labels name.
	chartSourceRefField
	// chartRefField is a HelmRelease's chartRef, resolved by its own shard.
	chartRefField
)

var refFieldPaths = [...]string{sourceRefField: "spec.sourceRef", chartSourceRefField: "spec.chart.spec.sourceRef", chartRefField: "spec.chartRef"}

// refsOf returns how an object of kind k refers to a source, nil when its
// kind refers to none: a HelmChart to its repository, a HelmRelease to its
// chart's source. The reference's namespace defaults to the object's.
func refsOf(k source.MappedKind) func(o *wire.SpecObject) (refField, wire.SourceRef) {
	switch (schema.GroupResource{Group: k.Resource.Group, Resource: k.Resource.Resource}) {
	case schema.GroupResource{Group: fluxSourceGroup, Resource: "helmcharts"}:
		return func(o *wire.SpecObject) (refField, wire.SourceRef) {
			if o.Metadata.Labels[helmReleaseNameLabel] != "" {
				// Made from a HelmRelease, which answers for it.
				return noRef, wire.SourceRef{}
			}
			if r := o.Spec.SourceRef; r != nil && r.Name != "" {
				return sourceRefField, wire.SourceRef{Kind: r.Kind, Name: r.Name, Namespace: o.Metadata.Namespace}
			}
			return noRef, wire.SourceRef{}
		}
	case schema.GroupResource{Group: fluxHelmGroup, Resource: "helmreleases"}:
		return func(o *wire.SpecObject) (refField, wire.SourceRef) {
			if c := o.Spec.Chart; c != nil && c.Spec.SourceRef.Name != "" {
				r := c.Spec.SourceRef
				return chartSourceRefField, wire.SourceRef{Kind: r.Kind, Name: r.Name, Namespace: orDefault(r.Namespace, o.Metadata.Namespace)}
			}
			if r := o.Spec.ChartRef; r != nil && r.Name != "" {
				return chartRefField, wire.SourceRef{Kind: r.Kind, Name: r.Name, Namespace: orDefault(r.Namespace, o.Metadata.Namespace)}
			}
			return noRef, wire.SourceRef{}
		}
	}
	return nil
}

// readsSpec reports whether the decisions read the spec of k's objects.
func readsSpec(k source.MappedKind) bool { return k.SpecLabels != "" || refsOf(k) != nil }

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// specEntry is what the reference decision keeps of one object, in one
// allocation whose repeated strings (shard IDs, kinds, namespaces) are
// shared; only objects that derive an object or refer to a source have
// one. It is comparable.
type specEntry struct {
	shard, derived    string
	ref               wire.SourceRef
	field             refField
	labelled, derives bool
	derivedLabelled   bool
}

// object returns the entry as the decision reads it.
func (e *specEntry) object(k source.MappedKind, namespace, name string) crossref.Object {
	o := crossref.Object{Kind: k.Name(), Label: k.Label, Namespace: namespace, Name: name, Shard: crossref.On(e.shard, e.labelled)}
	derived := o.Shard
	if e.derives {
		derived = crossref.On(e.derived, e.derivedLabelled)
		o.Derived = &crossref.Derived{Path: k.SpecLabels, Shard: derived}
	}
	if e.field != noRef {
		from := o.Shard
		if e.field == chartSourceRefField {
			from = derived
		}
		o.Ref = &crossref.Ref{Field: refFieldPaths[e.field], Kind: e.ref.Kind, Namespace: e.ref.Namespace, Name: e.ref.Name, From: from}
	}
	return o
}

// specIndex is the cache of a mapped kind whose spec the decisions read.
// It wraps the kind's shardIndex, which keeps the metadata as for any
// other kind, and keeps the references of each object beside it.
type specIndex struct {
	*shardIndex
	spec source.MappedKind
	refs func(o *wire.SpecObject) (refField, wire.SourceRef)

	specMu  sync.RWMutex
	entries map[string]*sharedEntry // "namespace/name"
	// shared holds one copy of each distinct entry: the releases of a
	// namespace mostly refer to the same few sources from the same shard,
	// so that an object costs its slot in entries and little more.
	shared map[specEntry]*sharedEntry
	strs   map[string]string // one shared copy of each repeated string
	// specPending is the initial state's entries while it arrives.
	specPending *chunks[keyedSpecEntry]
}

// sharedEntry is an entry and how many objects hold it.
type sharedEntry struct {
	specEntry
	refs int
}

func newSpecIndex(spec source.MappedKind, index *shardIndex) *specIndex {
	return &specIndex{shardIndex: index, spec: spec, refs: refsOf(spec), entries: map[string]*sharedEntry{},
		shared: map[specEntry]*sharedEntry{}, strs: map[string]string{}}
}

// acquire returns the shared copy of e; s.specMu must be held.
func (s *specIndex) acquire(e specEntry) *sharedEntry {
	c, ok := s.shared[e]
	if !ok {
		c = &sharedEntry{specEntry: e}
		s.shared[e] = c
	}
	c.refs++
	return c
}

// release forgets c once no object holds it; s.specMu must be held.
func (s *specIndex) release(c *sharedEntry) {
	if c.refs--; c.refs <= 0 {
		delete(s.shared, c.specEntry)
	}
}

// specStripped is an object as both indexes keep it.
type specStripped struct {
	inner *stripped
	e     *specEntry
}

// strip returns what the indexes keep of o.
func (s *specIndex) strip(obj any) (*specStripped, error) {
	o, ok := obj.(*wire.SpecObject)
	if !ok {
		return nil, fmt.Errorf("unexpected object %T", obj)
	}
	inner, err := s.shardIndex.strip(o.Partial())
	if err != nil {
		return nil, err
	}
	s.specMu.Lock()
	defer s.specMu.Unlock()
	return &specStripped{inner: inner, e: s.entryOf(o)}, nil
}

// keyedSpecEntry is a specEntry of an initial state, while it arrives.
type keyedSpecEntry struct {
	key string
	e   specEntry
}

// BeginSync implements wire.Store.
func (s *specIndex) BeginSync() {
	s.shardIndex.BeginSync()
	s.specMu.Lock()
	s.specPending = &chunks[keyedSpecEntry]{}
	s.specMu.Unlock()
}

// DropSync implements wire.Store.
func (s *specIndex) DropSync() {
	s.shardIndex.DropSync()
	s.specMu.Lock()
	s.specPending = nil
	s.specMu.Unlock()
}

// SyncObject implements wire.Store.
func (s *specIndex) SyncObject(obj runtime.Object) error {
	o, ok := obj.(*wire.SpecObject)
	if !ok {
		return fmt.Errorf("unexpected object %T", obj)
	}
	key, err := s.syncMeta(o.Partial())
	if err != nil {
		return err
	}
	s.specMu.Lock()
	defer s.specMu.Unlock()
	if s.specPending == nil {
		return errors.New("an object of an initial state that was not begun")
	}
	if e := s.entryOf(o); e != nil {
		s.specPending.add(keyedSpecEntry{key: key, e: *e})
	}
	return nil
}

var _ wire.Store = (*specIndex)(nil)

// entryOf returns what the decision needs of o, nil when it neither
// derives an object nor refers to a source; s.specMu must be held.
func (s *specIndex) entryOf(o *wire.SpecObject) *specEntry {
	v, labelled := o.Metadata.Labels[s.spec.Label]
	e := specEntry{shard: s.intern(v), labelled: labelled}
	if derivedLabels, derives := s.derivedLabels(o); derives {
		v, labelled := derivedLabels[s.spec.Label]
		e.derives, e.derived, e.derivedLabelled = true, s.intern(v), labelled
	}
	if s.refs != nil {
		if field, r := s.refs(o); field != noRef {
			e.field, e.ref = field, wire.SourceRef{Kind: s.intern(r.Kind), Namespace: s.intern(r.Namespace), Name: r.Name}
		}
	}
	if !e.derives && e.field == noRef {
		return nil
	}
	return &e
}

// derivedLabels returns the labels map at the kind's SpecLabels, and
// whether the object derives anything: a HelmRelease makes a HelmChart only
// from spec.chart, a HelmOp always makes its Bundle.
func (s *specIndex) derivedLabels(o *wire.SpecObject) (map[string]string, bool) {
	switch s.spec.SpecLabels {
	case "spec.chart.metadata.labels":
		if o.Spec.Chart == nil {
			return nil, false
		}
		if o.Spec.Chart.Metadata == nil {
			return nil, true
		}
		return o.Spec.Chart.Metadata.Labels, true
	case "spec.labels":
		return o.Spec.Labels, true
	}
	return nil, false
}

func (s *specIndex) intern(v string) string {
	if c, ok := s.strs[v]; ok {
		return c
	}
	s.strs[v] = v
	return v
}

// keyedSpec returns obj's key, what the metadata index takes of it, and its
// entry.
func (s *specIndex) keyedSpec(obj any) (string, any, *specEntry, error) {
	st, ok := obj.(*specStripped)
	if !ok {
		var err error
		if st, err = s.strip(obj); err != nil {
			return "", nil, nil, err
		}
	}
	return st.inner.key, st.inner, st.e, nil
}

// setEntry records e as key's and reports whether that changed anything.
func (s *specIndex) setEntry(key string, e *specEntry) bool {
	s.specMu.Lock()
	defer s.specMu.Unlock()
	old, had := s.entries[key]
	switch {
	case e == nil && !had:
		return false
	case e == nil:
		s.release(old)
		delete(s.entries, key)
		return true
	case had && old.specEntry == *e:
		return false
	}
	c := s.acquire(*e)
	if had {
		s.release(old)
	}
	s.entries[key] = c
	return true
}

// Add implements cache.ReflectorStore.
func (s *specIndex) Add(obj any) error { return s.Update(obj) }

// Update implements cache.ReflectorStore. A change of the spec alone is a
// change too, which the metadata index does not see.
func (s *specIndex) Update(obj any) error {
	key, meta, e, err := s.keyedSpec(obj)
	if err != nil {
		return err
	}
	refsChanged := s.setEntry(key, e)
	changed, err := s.set(meta)
	if changed || refsChanged {
		s.onChange()
	}
	return err
}

// Delete implements cache.ReflectorStore.
func (s *specIndex) Delete(obj any) error {
	inner := obj
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		inner = d.Obj
	}
	if m, ok := inner.(metav1.Object); ok {
		s.setEntry(m.GetNamespace()+"/"+m.GetName(), nil)
	}
	return s.shardIndex.Delete(obj)
}

// Replace implements cache.ReflectorStore. An empty list after an initial
// state was begun stands for that state.
func (s *specIndex) Replace(list []any, rv string) error {
	s.specMu.Lock()
	state := s.specPending
	s.specPending = nil
	s.specMu.Unlock()
	if state != nil && len(list) == 0 {
		s.specMu.Lock()
		s.entries, s.shared = make(map[string]*sharedEntry, state.n), map[specEntry]*sharedEntry{}
		state.drain(func(k *keyedSpecEntry) {
			if old, had := s.entries[k.key]; had {
				s.release(old)
			}
			s.entries[k.key] = s.acquire(k.e)
		})
		s.specMu.Unlock()
		return s.shardIndex.Replace(nil, rv)
	}
	type keyed struct {
		key string
		e   *specEntry
	}
	var kept []keyed
	inner := make([]any, 0, len(list))
	for _, obj := range list {
		key, meta, e, err := s.keyedSpec(obj)
		if err != nil {
			return err
		}
		if e != nil {
			kept = append(kept, keyed{key, e})
		}
		inner = append(inner, meta)
	}
	s.specMu.Lock()
	s.entries, s.shared = make(map[string]*sharedEntry, len(kept)), map[specEntry]*sharedEntry{}
	for _, k := range kept {
		if old, had := s.entries[k.key]; had {
			s.release(old)
		}
		s.entries[k.key] = s.acquire(*k.e)
	}
	s.specMu.Unlock()
	return s.shardIndex.Replace(inner, rv)
}

// objects appends the kind's objects, as the decision reads them, to out.
func (s *specIndex) objects(out []crossref.Object) []crossref.Object {
	s.specMu.RLock()
	defer s.specMu.RUnlock()
	for key, e := range s.entries {
		ns, name, _ := strings.Cut(key, "/")
		out = append(out, e.object(s.spec, ns, name))
	}
	return out
}

// CrossShard returns the objects whose derived object or source is on
// another shard than the one that needs it (see crossref.Find).
func (t *Tracker) CrossShard() []crossref.Crossed {
	var objs []crossref.Object
	for _, k := range t.kinds {
		k.mu.RLock()
		specs := k.specs
		k.mu.RUnlock()
		if specs != nil {
			objs = specs.objects(objs)
		}
	}
	if len(objs) == 0 {
		return nil
	}
	return crossref.Find(objs, t.sourceShard)
}

// sourceShard looks up a Flux source among the cached objects of the
// kinds that hold its shard label.
func (t *Tracker) sourceShard(kind, namespace, name string) (crossref.Shard, bool) {
	resource, ok := fluxSourceKinds[kind]
	if !ok {
		return crossref.Shard{}, false
	}
	for _, k := range t.kinds {
		if k.spec.Resource.Group != fluxSourceGroup || k.spec.Resource.Resource != resource {
			continue
		}
		index := k.current()
		if index == nil {
			continue
		}
		index.mu.RLock()
		e, had := index.byKey[namespace+"/"+name]
		var shard crossref.Shard
		if had {
			shard = crossref.On(index.ids[e.shard], e.labelled)
		}
		index.mu.RUnlock()
		if had {
			return shard, true
		}
	}
	return crossref.Shard{}, false
}

// ReadThrough makes the Tracker read through cfg with the skimmers of
// package wire. Without it (in tests) every kind is read through the
// metadata client given to New. Call it before Start.
func (t *Tracker) ReadThrough(cfg *rest.Config) error {
	c, err := wire.NewClients(cfg)
	if err != nil {
		return fmt.Errorf("reading through: %w", err)
	}
	t.reader = c
	return nil
}

// ReadStock makes the Tracker read through cfg with client-go's own
// clients and reflector (wire.Stock). Call it before Start.
func (t *Tracker) ReadStock(cfg *rest.Config) error {
	s, err := wire.NewStock(cfg)
	if err != nil {
		return fmt.Errorf("reading through client-go: %w", err)
	}
	t.reader, t.stock = s, true
	logrus.Info("the mapped objects are read by client-go's own clients and reflector (--mapped-reader=stock)")
	return nil
}

// SetInitialList sets how the initial state of each kind is read; the
// default is wire.InitialListAuto. Call it before Start.
func (t *Tracker) SetInitialList(mode wire.InitialList) { t.initialList = mode }

// watchOf returns how to watch k's objects into index: as metadata, or,
// for a kind whose spec the decisions read, as wire.SpecObject into a
// specIndex around index, which it returns too. Either way the initial
// state goes into the store as it arrives, a page or an object at a time
// (wire.InitialSync), unless the reader is the stock one.
func (t *Tracker) watchOf(k source.MappedKind, index *shardIndex) (cache.ListerWatcher, runtime.Object, cache.ReflectorStore, *specIndex) {
	if t.reader != nil && readsSpec(k) {
		specs := newSpecIndex(k, index)
		return t.initial(t.reader.Spec(k.Resource), specs), &wire.SpecObject{}, specs, specs
	}
	var lw wire.ListerWatcher
	if t.reader != nil {
		lw = t.reader.Meta(k.Resource)
	} else {
		client := t.client.Resource(k.Resource)
		lw = &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return client.List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return client.Watch(ctx, o)
			},
		}
	}
	return t.initial(lw, index), &metav1.PartialObjectMetadata{}, index, nil
}

// initial wraps lw in wire.InitialSync, as decided once for every kind; the
// stock reader's lw goes to the reflector as it is.
func (t *Tracker) initial(lw wire.ListerWatcher, store wire.Store) cache.ListerWatcher {
	if t.stock {
		return lw
	}
	t.decided.Do(func() { t.reading = wire.Decide(t.initialList, t.discovery) })
	return wire.InitialSync(lw, store, t.reading)
}
