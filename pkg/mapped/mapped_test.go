package mapped

import (
	"context"
	"errors"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/cache"

	"github.com/shardkeeper/shardkeeper/pkg/placement"
	"github.com/shardkeeper/shardkeeper/pkg/source"
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
	s := newShardIndex("gitrepos", label, false, func() { changes++ })
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
	assert.Equal(t, []string{"a/r2", "b/r3"}, keys(s.mappedTo("s2")))
	assert.Equal(t, 3, changes)

	// Deleting the last object of a shard forgets the shard.
	require.NoError(t, s.Delete(obj("a", "r1", "s1", true)))
	assert.Equal(t, 0, s.count("s1"))
	assert.Equal(t, []string{"s2"}, s.shards())
	require.NoError(t, s.Delete(obj("a", "gone", "s1", false)), "deleting an unknown object is a no-op")
	assert.Equal(t, 4, changes)

	// A relist replaces everything.
	require.NoError(t, s.Replace([]any{obj("c", "r9", "s3", false)}, "2"))
	assert.Equal(t, []string{"s3"}, s.shards())
	assert.Equal(t, 0, s.count("s2"))

	assert.Error(t, s.Add("not metadata"))
}

func TestShardIndexSharesIDs(t *testing.T) {
	s := newShardIndex("gitrepos", label, false, func() {})
	require.NoError(t, s.Add(obj("a", "r1", string([]byte("shard-x")), false)))
	require.NoError(t, s.Add(obj("a", "r2", string([]byte("shard-x")), false)))
	a, b := s.byKey["a/r1"], s.byKey["a/r2"]
	assert.Equal(t, a.shard, b.shard, "objects of one shard refer to one copy of its ID")
	assert.Equal(t, "shard-x", s.ids[a.shard])
	assert.Len(t, s.ids, 2, "the table holds the ID once, beside the empty one")
	assert.Same(t, a.labels, b.labels, "objects with the same labels share one set")
}

func keys(objs []placement.Object) []string {
	out := []string{}
	for _, o := range objs {
		out = append(out, o.Namespace+"/"+o.Name)
	}
	return out
}

func TestShardIndexPlacementFacts(t *testing.T) {
	changes := 0
	s := newShardIndex("gitrepos", label, false, func() { changes++ })
	placed := obj("a", "placed", "s1", false)
	placed.Annotations = map[string]string{placement.AssignedShardAnnotation: "s1", placement.AssignedAtAnnotation: "2026-11-29T20:00:00Z",
		placement.WeightAnnotation: "7", "kubectl.kubernetes.io/last-applied-configuration": "{}"}
	pinned := obj("a", "pinned", "s1", false)
	pinned.Annotations = map[string]string{placement.AssignedShardAnnotation: "s2", placement.WeightAnnotation: "nonsense"}
	bare := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "bare"}}
	heavy := obj("b", "heavy", "s2", false)
	heavy.Annotations = map[string]string{placement.WeightAnnotation: "999999"}

	// The initial state is taken object by object as it arrives, and is
	// the content from the empty Replace that follows.
	s.BeginSync()
	for _, o := range []*metav1.PartialObjectMetadata{placed, pinned, bare, heavy} {
		require.NoError(t, s.SyncObject(o))
	}
	assert.Empty(t, s.all(nil), "an initial state shows only once it is complete")
	assert.Equal(t, 0, changes)
	require.NoError(t, s.Replace(nil, "1"))
	assert.Equal(t, 1, changes)
	all := map[string]placement.Object{}
	for _, o := range s.all(nil) {
		all[o.Name] = o
	}
	require.Len(t, all, 4)
	assert.False(t, all["placed"].Pinned())
	assert.Equal(t, 7, all["placed"].Weight)
	assert.Equal(t, int64(1795982400), all["placed"].AssignedAt.Unix())
	assert.True(t, all["pinned"].Pinned(), "a label that differs from placement's record was set by a person")
	assert.Equal(t, 1, all["pinned"].Weight, "an invalid weight counts as 1")
	assert.False(t, all["bare"].Labelled)
	assert.False(t, all["bare"].Pinned())
	assert.Equal(t, maxWeight, all["heavy"].Weight)
	assert.Equal(t, "x", all["placed"].Labels["team"])
	assert.NotContains(t, all["placed"].Labels, label)
	assert.Equal(t, 2, s.count("s1"), "unlabelled objects count for no shard")
	assert.ElementsMatch(t, []string{"s1", "s2"}, s.shards())

	// A status update bumps only the resourceVersion: no change to report,
	// but the new version is kept for the next relabel's precondition.
	before := changes
	bumped := obj("b", "bare", "", false)
	bumped.Labels = nil
	bumped.ResourceVersion = "42"
	require.NoError(t, s.Update(bumped))
	assert.Equal(t, before, changes)
	assert.Equal(t, uint64(42), s.byKey["b/bare"].rv)
	assert.Equal(t, "42", s.resourceVersion("b/bare", s.byKey["b/bare"]))
	require.NoError(t, s.Update(obj("b", "bare", "s3", false)))
	assert.Equal(t, before+1, changes)
	assert.Equal(t, 1, s.count("s3"))
}

func TestShardIndexKeepsOpaqueResourceVersions(t *testing.T) {
	s := newShardIndex("gitrepos", label, false, func() {})
	odd := obj("a", "odd", "s1", false)
	odd.ResourceVersion = "v7-abc"
	padded := obj("a", "padded", "s1", false)
	padded.ResourceVersion = "007"
	require.NoError(t, s.Add(odd))
	require.NoError(t, s.Add(padded))
	got := map[string]string{}
	for _, o := range s.all(nil) {
		got[o.Name] = o.ResourceVersion
	}
	assert.Equal(t, map[string]string{"odd": "v7-abc", "padded": "007"}, got, "a resourceVersion that is not a plain number comes back as it was")

	odd.ResourceVersion = "12"
	require.NoError(t, s.Update(odd))
	assert.Equal(t, "12", s.resourceVersion("a/odd", s.byKey["a/odd"]))
	assert.NotContains(t, s.opaqueRV, "a/odd", "a number replaces the opaque value")
	require.NoError(t, s.Delete(padded))
	assert.Empty(t, s.opaqueRV, "a deleted object's opaque value goes with it")

	odd.ResourceVersion = "x"
	require.NoError(t, s.Update(odd))
	require.NoError(t, s.Replace([]any{obj("b", "other", "s1", false)}, "2"))
	assert.Empty(t, s.opaqueRV, "a relist forgets the objects it does not list")
}

func TestShardIndexEntryIsSmall(t *testing.T) {
	// A million entries must fit in the memory figure docs/performance.md
	// states: the entry is one 32-byte allocation.
	assert.Equal(t, uintptr(32), unsafe.Sizeof(entry{}))
}

func TestShardIndexForgetsLabelSets(t *testing.T) {
	s := newShardIndex("gitrepos", label, false, func() {})
	require.NoError(t, s.Replace([]any{obj("a", "r1", "s1", false), obj("a", "r2", "s1", false)}, "1"))
	require.Len(t, s.sets, 1, "one shared set for {team: x}")
	odd := obj("a", "r3", "s1", false)
	odd.Labels["unique"] = "r3"
	require.NoError(t, s.Add(odd))
	assert.Len(t, s.sets, 2)
	require.NoError(t, s.Delete(odd))
	assert.Len(t, s.sets, 1, "a set no object holds is forgotten")
	require.NoError(t, s.Update(obj("a", "r1", "s2", false)))
	assert.Len(t, s.sets, 1)
	// The only holder of a set moves: the set stays known, and shared.
	require.NoError(t, s.Add(odd))
	moved := obj("a", "r3", "s2", false)
	moved.Labels["unique"] = "r3"
	require.NoError(t, s.Update(moved))
	require.Len(t, s.sets, 2)
	require.NoError(t, s.Delete(moved))
	// An entry made by the transform but never stored does not outlive the
	// next relist.
	_, err := s.strip(odd)
	require.NoError(t, err)
	assert.Len(t, s.sets, 2)
	require.NoError(t, s.Replace([]any{obj("a", "r1", "s1", false)}, "2"))
	assert.Len(t, s.sets, 1)
	assert.Equal(t, 1, s.byKey["a/r1"].labels.refs)
}

// brokenDiscovery fails every lookup, as when the aggregation layer or the
// API server's discovery is unwell.
type brokenDiscovery struct {
	discovery.DiscoveryInterface
	calls int
}

func (d *brokenDiscovery) ServerResourcesForGroupVersion(string) (*metav1.APIResourceList, error) {
	d.calls++
	return nil, errors.New("the server is currently unable to handle the request")
}

// A kind whose CRD exists but whose objects cannot be listed must never
// count as synced: its objects would count as zero, and a shard holding
// only them could be deleted.
func TestTrackerFailsClosedWhileDiscoveryFails(t *testing.T) {
	disc := &brokenDiscovery{}
	tr := New(nil, disc, []source.MappedKind{{Resource: schema.GroupVersionResource{Group: "fleet.cattle.io", Version: "v1alpha1", Resource: "gitrepos"}, Label: label}}, func() {})
	tr.crdSynced = []cache.InformerSynced{func() bool { return true }}
	var delays []time.Duration
	var next []func()
	tr.after = func(d time.Duration, f func()) { delays, next = append(delays, d), append(next, f) }

	tr.crdSeen(context.Background(), tr.kinds[0])
	for i := 0; i < 100 && len(next) > 0; i++ {
		f := next[0]
		next = next[1:]
		f()
		require.False(t, tr.Synced(), "synced after %d failed discovery attempts", disc.calls)
	}
	assert.Equal(t, 101, disc.calls, "discovery is retried for as long as it fails")
	assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}, delays[:4])
	assert.Equal(t, time.Minute, delays[len(delays)-1], "the delay is capped")
	assert.Equal(t, []string{"gitrepos: discovering fleet.cattle.io/v1alpha1: the server is currently unable to handle the request"}, tr.Failing())

	// Changes of the CRD do not start a second chain of checks.
	tr.crdSeen(context.Background(), tr.kinds[0])
	assert.Len(t, next, 1)

	// Once the CRD is gone, the kind counts as absent and the checks stop.
	tr.crdGone(tr.kinds[0])
	assert.True(t, tr.Synced())
	assert.Empty(t, tr.Failing())
	next[0]()
	assert.Equal(t, 101, disc.calls)
}

func TestShardIndexGroupsAndOwnerLabels(t *testing.T) {
	s := newShardIndex("helmcharts", label, false, func() {})
	s.grouped, s.ownerLabel = true, "helm.toolkit.fluxcd.io/name"
	made := obj("team-a", "team-a-app", "s1", false)
	made.Labels["helm.toolkit.fluxcd.io/name"] = "app"
	require.NoError(t, s.Replace([]any{obj("team-a", "own", "s1", false), made}, "1"))
	all := map[string]placement.Object{}
	for _, o := range s.all(nil) {
		all[o.Name] = o
	}
	assert.True(t, all["own"].Grouped)
	assert.False(t, all["own"].Derived, "a HelmChart of its own is placed")
	assert.True(t, all["team-a-app"].Derived, "one a HelmRelease made follows that HelmRelease's chart labels")
}
