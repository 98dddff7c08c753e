package mapped

import (
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/shardkeeper/shardkeeper/pkg/placement"
	"github.com/shardkeeper/shardkeeper/pkg/wire"
)

// maxWeight bounds the weight annotation, so that one object cannot
// overflow a shard's load.
const maxWeight = 1000

// entry is a placement.Object without its kind and key, which the index holds
// elsewhere. It is 32 bytes, as a million of them must fit in a small
// memory limit: strings that repeat (shard IDs, label sets) are shared, a
// shard ID is held as its index in the index's table, and the
// resourceVersion as the number that kube-apiserver writes (see rvOf).
type entry struct {
	rv         uint64
	labels     *labelSet
	shard      idRef
	assigned   idRef
	assignedAt uint32 // Unix seconds; 0 for none
	weight     uint16
	labelled   bool
	deleting   bool
}

// idRef is a shard ID's index in shardIndex.ids; 0 is "".
type idRef uint32

// shardIndex is the whole cache of one mapped kind. A reflector writes to it
// directly and its transform strips each object as it is decoded, so no
// object outlives the event that brought it: an informer's store would keep
// every object's metadata (about 2 KB each even when trimmed, most of it the
// last-applied annotation).
//
// Objects that are being deleted stay until they are gone: their finalizers
// still need the shard's controller.
type shardIndex struct {
	kind    string
	label   string
	derived bool
	// grouped is the kind's GroupByNamespace; ownerLabel, on a kind that
	// is not derived, makes the objects that carry it derived ones (a
	// HelmChart that a HelmRelease made).
	grouped    bool
	ownerLabel string
	onChange   func()

	mu      sync.RWMutex
	byKey   map[string]*entry            // "namespace/name"
	members map[string]map[string]*entry // shard label value -> "namespace/name"
	ids     []string                     // one copy of each shard ID, by idRef
	idRefs  map[string]idRef             // the inverse of ids
	sets    map[string]*labelSet         // one shared copy of each label set
	// opaqueRV holds, by key, the resourceVersions that are not a decimal
	// number, whose entries hold 0: the API's contract makes them opaque
	// strings, although kube-apiserver writes etcd's revision.
	opaqueRV map[string]string
	synced   bool
	// pending is the initial state while it arrives, nil otherwise.
	pending *chunks[stripped]
}

func newShardIndex(kind, label string, derived bool, onChange func()) *shardIndex {
	return &shardIndex{kind: kind, label: label, derived: derived, onChange: onChange,
		byKey: map[string]*entry{}, members: map[string]map[string]*entry{},
		ids: []string{""}, idRefs: map[string]idRef{"": 0}, sets: map[string]*labelSet{}, opaqueRV: map[string]string{}}
}

// stripped is an object as the index keeps it: its key and its entry.
type stripped struct {
	key string
	e   *entry
}

// strip returns what the index keeps of obj.
func (s *shardIndex) strip(obj any) (*stripped, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return nil, fmt.Errorf("unexpected object %T", obj)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := m.Namespace + "/" + m.Name
	return &stripped{key: key, e: s.entryOf(key, m)}, nil
}

// BeginSync implements wire.Store.
func (s *shardIndex) BeginSync() {
	s.mu.Lock()
	s.pending = &chunks[stripped]{}
	s.mu.Unlock()
}

// DropSync implements wire.Store.
func (s *shardIndex) DropSync() {
	s.mu.Lock()
	s.pending = nil
	s.mu.Unlock()
}

// SyncObject implements wire.Store.
func (s *shardIndex) SyncObject(obj runtime.Object) error {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return fmt.Errorf("unexpected object %T", obj)
	}
	_, err := s.syncMeta(m)
	return err
}

// syncMeta adds m to the initial state begun and returns its key.
func (s *shardIndex) syncMeta(m *metav1.PartialObjectMetadata) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending == nil {
		return "", errors.New("an object of an initial state that was not begun")
	}
	key := m.Namespace + "/" + m.Name
	s.pending.add(stripped{key: key, e: s.entryOf(key, m)})
	return key, nil
}

var _ wire.Store = (*shardIndex)(nil)

// ref returns the idRef of the shard ID v, adding it to the table.
func (s *shardIndex) ref(v string) idRef {
	if r, ok := s.idRefs[v]; ok {
		return r
	}
	r := idRef(len(s.ids)) //nolint:gosec // distinct label values of one kind's objects, far fewer than 2^32
	s.ids = append(s.ids, v)
	s.idRefs[v] = r
	return r
}

// rvOf reads a resourceVersion as the decimal number kube-apiserver writes;
// any other value is kept in opaqueRV under key, and its entry holds 0.
func (s *shardIndex) rvOf(key, v string) uint64 {
	if n, err := strconv.ParseUint(v, 10, 64); err == nil && n != 0 && strconv.FormatUint(n, 10) == v {
		delete(s.opaqueRV, key)
		return n
	}
	if v == "" {
		delete(s.opaqueRV, key)
	} else {
		s.opaqueRV[key] = v
	}
	return 0
}

// resourceVersion is the resourceVersion of the entry e of key.
func (s *shardIndex) resourceVersion(key string, e *entry) string {
	if e.rv == 0 {
		return s.opaqueRV[key]
	}
	return strconv.FormatUint(e.rv, 10)
}

// labelSet is shared by pointer, so that entries stay comparable. It is
// forgotten when the last entry that holds it goes.
type labelSet struct {
	set  labels.Set
	id   string
	refs int
}

// internLabels shares one map between objects with the same labels (the
// shard label aside, which the entry holds).
func (s *shardIndex) internLabels(in map[string]string) *labelSet {
	n := len(in)
	if _, ok := in[s.label]; ok {
		n--
	}
	if n == 0 {
		return nil
	}
	keys := make([]string, 0, n)
	for k := range in {
		if k != s.label {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var sb strings.Builder
	for _, k := range keys {
		sb.WriteString(k)
		sb.WriteByte(0)
		sb.WriteString(in[k])
		sb.WriteByte(0)
	}
	id := sb.String()
	if set, ok := s.sets[id]; ok {
		return set
	}
	set := &labelSet{set: make(labels.Set, n), id: id}
	for _, k := range keys {
		set.set[k] = in[k]
	}
	s.sets[id] = set
	return set
}

// entryOf makes the entry of m, whose key is key; s.mu must be held.
func (s *shardIndex) entryOf(key string, m *metav1.PartialObjectMetadata) *entry {
	shard, labelled := m.Labels[s.label]
	e := &entry{rv: s.rvOf(key, m.ResourceVersion), shard: s.ref(shard), labelled: labelled,
		labels: s.internLabels(m.Labels), deleting: m.DeletionTimestamp != nil, weight: 1}
	if v, ok := m.Annotations[placement.AssignedShardAnnotation]; ok {
		e.assigned = s.ref(v)
	}
	// Before 1970 or after 2106, the time is dropped: as no time, it lets
	// placement move the object again.
	if t, err := time.Parse(time.RFC3339, m.Annotations[placement.AssignedAtAnnotation]); err == nil && t.Unix() > 0 && t.Unix() <= math.MaxUint32 {
		e.assignedAt = uint32(t.Unix()) //nolint:gosec // within range: checked just above
	}
	if w, err := strconv.Atoi(m.Annotations[placement.WeightAnnotation]); err == nil && w > 0 {
		e.weight = uint16(min(w, maxWeight))
	}
	return e
}

// keyed returns obj's key and entry; s.mu must be held.
func (s *shardIndex) keyed(obj any) (string, *entry, error) {
	switch o := obj.(type) {
	case *stripped:
		return o.key, o.e, nil
	case *metav1.PartialObjectMetadata:
		key := o.Namespace + "/" + o.Name
		return key, s.entryOf(key, o), nil
	}
	return "", nil, fmt.Errorf("unexpected object %T", obj)
}

// set records obj; it reports whether anything but the resourceVersion
// changed: status updates bump that alone, and are nobody's business here.
func (s *shardIndex) set(obj any) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key, e, err := s.keyed(obj)
	if err != nil {
		return false, err
	}
	old, had := s.byKey[key]
	if had {
		s.remove(key, old)
	}
	s.add(key, e)
	if had {
		rv := old.rv
		old.rv = e.rv
		same := *old == *e
		old.rv = rv
		if same {
			return false, nil
		}
	}
	return true, nil
}

// unlabelled is the members key of objects without the shard label; no
// shard ID can contain a NUL.
const unlabelled = "\x00"

func (s *shardIndex) memberKey(e *entry) string {
	if !e.labelled {
		return unlabelled
	}
	return s.ids[e.shard]
}

func (s *shardIndex) add(key string, e *entry) {
	set := s.members[s.memberKey(e)]
	if set == nil {
		set = map[string]*entry{}
		s.members[s.memberKey(e)] = set
	}
	set[key] = e
	s.byKey[key] = e
	if e.labels != nil {
		if e.labels.refs == 0 {
			// New, or just forgotten by the remove of the entry it replaces.
			s.sets[e.labels.id] = e.labels
		}
		e.labels.refs++
	}
}

func (s *shardIndex) remove(key string, e *entry) {
	delete(s.byKey, key)
	if set := s.members[s.memberKey(e)]; set != nil {
		delete(set, key)
		if len(set) == 0 {
			delete(s.members, s.memberKey(e))
		}
	}
	if e.labels != nil {
		if e.labels.refs--; e.labels.refs <= 0 {
			delete(s.sets, e.labels.id)
		}
	}
}

// Add implements cache.ReflectorStore.
func (s *shardIndex) Add(obj any) error { return s.Update(obj) }

// Update implements cache.ReflectorStore.
func (s *shardIndex) Update(obj any) error {
	changed, err := s.set(obj)
	if changed {
		s.onChange()
	}
	return err
}

// Delete implements cache.ReflectorStore.
func (s *shardIndex) Delete(obj any) error {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return fmt.Errorf("unexpected object %T", obj)
	}
	key := m.GetNamespace() + "/" + m.GetName()
	s.mu.Lock()
	e, had := s.byKey[key]
	if had {
		s.remove(key, e)
	}
	delete(s.opaqueRV, key)
	s.mu.Unlock()
	if had {
		s.onChange()
	}
	return nil
}

// Replace implements cache.ReflectorStore: a full list, at start and after
// a watch could not be resumed. An empty list after an initial state was
// begun stands for that state.
func (s *shardIndex) Replace(list []any, _ string) error {
	s.mu.Lock()
	state := s.pending
	s.pending = nil
	if state == nil || len(list) > 0 {
		state = &chunks[stripped]{}
		for _, obj := range list {
			key, e, err := s.keyed(obj)
			if err != nil {
				s.mu.Unlock()
				return err
			}
			state.add(stripped{key: key, e: e})
		}
	}
	n := state.n
	for _, set := range s.sets {
		set.refs = 0
	}
	s.byKey, s.members = make(map[string]*entry, n), map[string]map[string]*entry{}
	state.drain(func(st *stripped) {
		if old, had := s.byKey[st.key]; had {
			s.remove(st.key, old)
		}
		s.add(st.key, st.e)
	})
	for id, set := range s.sets {
		if set.refs == 0 {
			delete(s.sets, id)
		}
	}
	for key := range s.opaqueRV {
		if _, ok := s.byKey[key]; !ok {
			delete(s.opaqueRV, key)
		}
	}
	s.synced = true
	s.mu.Unlock()
	if n >= releaseAfter {
		// The stream that brought the state left garbage about as large
		// as the index: left alone, the runtime keeps it until the heap
		// next doubles or for two minutes; returned now, the daemon's
		// memory right after start is what it keeps.
		go debug.FreeOSMemory()
	}
	s.onChange()
	return nil
}

// releaseAfter is the list size from which a relist returns its garbage to
// the operating system at once.
const releaseAfter = 1000

// Resync implements cache.ReflectorStore; there is nothing to resync.
func (s *shardIndex) Resync() error { return nil }

func (s *shardIndex) hasSynced() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.synced
}

func (s *shardIndex) count(shard string) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.members[shard])
}

// object is the entry e of key as placement reads it; s.mu must be held.
func (s *shardIndex) object(key string, e *entry) placement.Object {
	ns, name, _ := strings.Cut(key, "/")
	o := placement.Object{Kind: s.kind, Derived: s.derived, Namespace: ns, Name: name, ResourceVersion: s.resourceVersion(key, e),
		Shard: s.ids[e.shard], Labelled: e.labelled, AssignedShard: s.ids[e.assigned],
		Weight: int(e.weight), Deleting: e.deleting, Grouped: s.grouped}
	if e.labels != nil {
		o.Labels = e.labels.set
		o.Derived = o.Derived || (s.ownerLabel != "" && o.Labels[s.ownerLabel] != "")
	}
	if e.assignedAt != 0 {
		o.AssignedAt = time.Unix(int64(e.assignedAt), 0)
	}
	return o
}

// mappedTo returns the objects labelled with shard, in key order.
func (s *shardIndex) mappedTo(shard string) []placement.Object {
	s.mu.RLock()
	defer s.mu.RUnlock()
	set := s.members[shard]
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]placement.Object, len(keys))
	for i, k := range keys {
		out[i] = s.object(k, set[k])
	}
	return out
}

// all appends every object, labelled or not, to out.
func (s *shardIndex) all(out []placement.Object) []placement.Object {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for k, e := range s.byKey {
		out = append(out, s.object(k, e))
	}
	return out
}

func (s *shardIndex) shards() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, len(s.members))
	for id := range s.members {
		if id != unlabelled {
			out = append(out, id)
		}
	}
	return out
}
