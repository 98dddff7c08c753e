package mapped

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const label = "fleet.cattle.io/shard-ref"

func obj(ns, name, shard string, deleting bool) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{label: shard, "team": "x"}}}
	if deleting {
		now := metav1.Now()
		m.DeletionTimestamp = &now
	}
	return m
}

func TestShardIndex(t *testing.T) {
	changes := 0
	s := newShardIndex(label, func() { changes++ })
	assert.False(t, s.hasSynced())

	require.NoError(t, s.Replace([]any{obj("a", "r1", "s1", false), obj("a", "r2", "s1", false), obj("b", "r3", "s2", false)}, "1"))
	assert.True(t, s.hasSynced())
	assert.Equal(t, 2, s.count("s1"))
	assert.Equal(t, 1, s.count("s2"))
	assert.ElementsMatch(t, []string{"s1", "s2"}, s.shards())
	assert.Equal(t, 1, changes)

	// An update that does not move the object is no change.
	require.NoError(t, s.Update(obj("a", "r1", "s1", false)))
	assert.Equal(t, 1, changes)
	// Being deleted still counts: the finalizers need the shard.
	require.NoError(t, s.Update(obj("a", "r1", "s1", true)))
	assert.Equal(t, 2, s.count("s1"))

	// A relabel moves it.
	require.NoError(t, s.Update(obj("a", "r2", "s2", false)))
	assert.Equal(t, 1, s.count("s1"))
	assert.Equal(t, 2, s.count("s2"))
	assert.Equal(t, []string{"a/r2", "b/r3"}, s.sample("s2", 5))
	assert.Equal(t, []string{"a/r2"}, s.sample("s2", 1))
	assert.Equal(t, 2, changes)

	// Deleting the last object of a shard forgets the shard.
	require.NoError(t, s.Delete(obj("a", "r1", "s1", true)))
	assert.Equal(t, 0, s.count("s1"))
	assert.Equal(t, []string{"s2"}, s.shards())
	assert.Empty(t, s.ids["s1"])
	require.NoError(t, s.Delete(obj("a", "gone", "s1", false)), "deleting an unknown object is a no-op")
	assert.Equal(t, 3, changes)

	// A relist replaces everything.
	require.NoError(t, s.Replace([]any{obj("c", "r9", "s3", false)}, "2"))
	assert.Equal(t, []string{"s3"}, s.shards())
	assert.Equal(t, 0, s.count("s2"))

	assert.Error(t, s.Add("not metadata"))
}

func TestShardIndexSharesIDs(t *testing.T) {
	s := newShardIndex(label, func() {})
	require.NoError(t, s.Add(obj("a", "r1", string([]byte("shard-x")), false)))
	require.NoError(t, s.Add(obj("a", "r2", string([]byte("shard-x")), false)))
	a, b := s.shardOf["a/r1"], s.shardOf["a/r2"]
	assert.Equal(t, a, b)
	assert.Same(t, unsafeData(a), unsafeData(b), "objects of one shard share one copy of its ID")
}

func unsafeData(s string) *byte { return unsafe.StringData(s) }
