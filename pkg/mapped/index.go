package mapped

import (
	"fmt"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// shardIndex is the whole cache of one mapped kind: which shard each object
// is mapped to, and nothing else. A reflector writes to it directly, so no
// object outlives the event that brought it: an informer's store would keep
// every object's metadata (about 2 KB each even when trimmed), this keeps a
// key and a shared shard ID.
//
// Objects that are being deleted stay until they are gone: their finalizers
// still need the shard's controller.
type shardIndex struct {
	label    string
	onChange func()

	mu      sync.RWMutex
	shardOf map[string]string              // "namespace/name" -> shard ID
	members map[string]map[string]struct{} // shard ID -> keys
	ids     map[string]string              // shard ID -> its one shared copy
	synced  bool
}

func newShardIndex(label string, onChange func()) *shardIndex {
	return &shardIndex{label: label, onChange: onChange,
		shardOf: map[string]string{}, members: map[string]map[string]struct{}{}, ids: map[string]string{}}
}

// set records obj under its shard label; it reports whether anything changed.
func (s *shardIndex) set(obj any) (bool, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return false, fmt.Errorf("unexpected object %T", obj)
	}
	key, shard := m.Namespace+"/"+m.Name, m.Labels[s.label]
	s.mu.Lock()
	defer s.mu.Unlock()
	old, had := s.shardOf[key]
	if had && old == shard {
		return false, nil
	}
	if had {
		s.remove(key, old)
	}
	s.add(key, shard)
	return true, nil
}

func (s *shardIndex) add(key, shard string) {
	set := s.members[shard]
	if set == nil {
		set = map[string]struct{}{}
		s.members[shard] = set
		s.ids[shard] = shard
	}
	set[key] = struct{}{}
	// Every object of a shard shares one copy of its ID.
	s.shardOf[key] = s.ids[shard]
}

func (s *shardIndex) remove(key, shard string) {
	delete(s.shardOf, key)
	if set := s.members[shard]; set != nil {
		delete(set, key)
		if len(set) == 0 {
			delete(s.members, shard)
			delete(s.ids, shard)
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
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return fmt.Errorf("unexpected object %T", obj)
	}
	key := m.Namespace + "/" + m.Name
	s.mu.Lock()
	shard, had := s.shardOf[key]
	if had {
		s.remove(key, shard)
	}
	s.mu.Unlock()
	if had {
		s.onChange()
	}
	return nil
}

// Replace implements cache.ReflectorStore: a full list, at start and after
// a watch could not be resumed.
func (s *shardIndex) Replace(list []any, _ string) error {
	fresh := newShardIndex(s.label, nil)
	for _, obj := range list {
		if _, err := fresh.set(obj); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.shardOf, s.members, s.ids, s.synced = fresh.shardOf, fresh.members, fresh.ids, true
	s.mu.Unlock()
	s.onChange()
	return nil
}

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

func (s *shardIndex) sample(shard string, n int) []string {
	s.mu.RLock()
	keys := make([]string, 0, len(s.members[shard]))
	for k := range s.members[shard] {
		keys = append(keys, k)
	}
	s.mu.RUnlock()
	slices.Sort(keys)
	if len(keys) > n {
		keys = keys[:n]
	}
	return keys
}

func (s *shardIndex) shards() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, len(s.members))
	for id := range s.members {
		out = append(out, id)
	}
	return out
}
