package mover

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/shardkeeper/shardkeeper/pkg/balance"
	"github.com/shardkeeper/shardkeeper/pkg/mapped"
	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
	"github.com/shardkeeper/shardkeeper/pkg/source"
)

func TestInput(t *testing.T) {
	p, err := shardconfig.ParsePlacement("namespaces: [apps]\nthreshold: 50%\ncooldown: 1m")
	require.NoError(t, err)
	placedAt := time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
	objs := []mapped.Object{
		{Kind: "gitrepos", Namespace: "apps", Name: "new", Weight: 1},
		{Kind: "gitrepos", Namespace: "apps", Name: "placed", Shard: "a", Labelled: true, AssignedShard: "a", AssignedAt: placedAt, Weight: 3},
		{Kind: "helmreleases", Namespace: "apps", Name: "pinned", Shard: "a", Labelled: true, Weight: 2},
		{Kind: "helmreleases", Namespace: "other", Name: "outside", Weight: 1},
		{Kind: "gitrepos", Namespace: "apps", Name: "on-drained", Shard: "b", Labelled: true, AssignedShard: "b", Weight: 1},
		{Kind: "gitrepos", Namespace: "apps", Name: "empty-label", Shard: "", Labelled: true, Labels: labels.Set{"x": "y"}, Weight: 1},
	}
	now := placedAt.Add(time.Hour)
	in, index := input(State{Placement: p, Targets: []string{"a", "b", "c"}, Draining: []string{"b"}}, objs, now, 7)
	assert.Equal(t, 7, in.MaxMoves)
	assert.Equal(t, time.Minute, in.Cooldown)
	assert.Equal(t, now, in.Now)
	byKey := map[string]balance.Object{}
	for _, o := range in.Objects {
		byKey[o.Key] = o
	}
	require.Len(t, byKey, 6)
	assert.Equal(t, balance.Object{Key: "gitrepos apps/new", Movable: true, Weight: 1}, byKey["gitrepos apps/new"])
	assert.Equal(t, balance.Object{Key: "gitrepos apps/placed", Shard: "a", Movable: true, Weight: 3, MovedAt: placedAt}, byKey["gitrepos apps/placed"])
	assert.False(t, byKey["helmreleases apps/pinned"].Movable, "labelled by a person")
	assert.False(t, byKey["helmreleases other/outside"].Movable, "out of scope")
	assert.Equal(t, "", byKey["gitrepos apps/empty-label"].Shard)
	assert.Equal(t, "placed", index["gitrepos apps/placed"].Name)
	// Load on the targets a and c (b drains): 3 + 2, plus 2 unlabelled
	// movable objects (new, empty-label) to come = 7 over 2 targets; half
	// of a mean of 3.5 rounds up to 2.
	assert.Equal(t, 2, in.Threshold)
}

func TestPatch(t *testing.T) {
	now := time.Date(2026, 11, 29, 20, 0, 0, 0, time.FixedZone("x", 3600))
	body, err := movePatch(mapped.Object{Namespace: "apps", Name: "r", ResourceVersion: "42"}, "fleet.cattle.io/shard-ref", "shard-1", now)
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(body, &got))
	assert.Equal(t, map[string]any{"metadata": map[string]any{
		"resourceVersion": "42",
		"labels":          map[string]any{"fleet.cattle.io/shard-ref": "shard-1"},
		"annotations": map[string]any{
			mapped.AssignedShardAnnotation: "shard-1",
			mapped.AssignedAtAnnotation:    "2026-11-29T19:00:00Z",
		},
	}}, got, "the label, placement's record, and the resourceVersion as precondition; nothing else")
}

func TestMovedMessage(t *testing.T) {
	res := result{
		moved:     map[balance.Reason]int{balance.Assign: 3, balance.Drain: 2},
		to:        map[string]int{"shard-1": 4, "shard-0": 1},
		from:      map[string]int{"shard-2": 2},
		conflicts: 1,
	}
	assert.Equal(t, "placement moved 5 objects (3 assigned, 2 drained) to shard-0: 1, shard-1: 4; drained from shard-2: 2; "+
		"1 changed since they were read and are decided again", movedMessage(res))
}

func TestSetWakesOnlyOnChange(t *testing.T) {
	on, err := shardconfig.ParsePlacement("selector: team=a")
	require.NoError(t, err)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "1"}}
	p := New(nil, nil, nil, nil, nil)
	woken := func() bool {
		select {
		case <-p.wake:
			return true
		default:
			return false
		}
	}
	st := State{ConfigMap: cm, Placement: on, Targets: []string{"a", "b"}}
	p.Set(st)
	assert.True(t, woken())
	same, err := shardconfig.ParsePlacement("selector: team=a")
	require.NoError(t, err)
	p.Set(State{ConfigMap: cm.DeepCopy(), Placement: same, Targets: []string{"a", "b"}})
	assert.False(t, woken(), "a reconcile that changed nothing does not run a round")
	for name, next := range map[string]State{
		"targets":   {ConfigMap: cm, Placement: on, Targets: []string{"a"}},
		"draining":  {ConfigMap: cm, Placement: on, Targets: []string{"a", "b"}, Draining: []string{"c"}},
		"settings":  {ConfigMap: cm, Targets: []string{"a", "b"}},
		"configmap": {ConfigMap: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "2"}}, Placement: on, Targets: []string{"a", "b"}},
	} {
		p.Set(st)
		woken()
		p.Set(next)
		assert.True(t, woken(), name)
	}
	p.Wake()
	assert.True(t, woken(), "a change of the objects always wakes it")
}

func TestBumpPatch(t *testing.T) {
	now := time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
	o := mapped.Object{Namespace: "apps", Name: "r", ResourceVersion: "42"}
	body, err := bumpPatch(o, "fleet.cattle.io/shard-ref", "shard-1", now, "spec.forceSyncGeneration", 4)
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(body, &got))
	assert.Equal(t, map[string]any{"forceSyncGeneration": float64(4)}, got["spec"])
	plain, err := movePatch(o, "fleet.cattle.io/shard-ref", "shard-1", now)
	require.NoError(t, err)
	var want map[string]any
	require.NoError(t, json.Unmarshal(plain, &want))
	assert.Equal(t, want["metadata"], got["metadata"], "the label and the bump go in one write")
}

func TestBumpedReadsTheField(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "fleet.cattle.io", Version: "v1alpha1", Resource: "gitrepos"}
	repo := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "fleet.cattle.io/v1alpha1", "kind": "GitRepo",
		"metadata": map[string]any{"name": "r", "namespace": "apps", "resourceVersion": "42"},
		"spec":     map[string]any{"forceSyncGeneration": int64(3)},
	}}
	fresh := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "fleet.cattle.io/v1alpha1", "kind": "GitRepo",
		"metadata": map[string]any{"name": "fresh", "namespace": "apps", "resourceVersion": "7"},
	}}
	reader := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{gvr: "GitRepoList"}, repo, fresh)
	kind := source.MappedKind{Resource: gvr, Label: source.FleetShardRefLabel, BumpOnMove: "spec.forceSyncGeneration"}
	p := New(nil, reader, []source.MappedKind{kind}, nil, nil)

	v, err := p.bumped(context.Background(), mapped.Object{Namespace: "apps", Name: "r", ResourceVersion: "42"}, kind)
	require.NoError(t, err)
	assert.Equal(t, int64(4), v)
	v, err = p.bumped(context.Background(), mapped.Object{Namespace: "apps", Name: "fresh", ResourceVersion: "7"}, kind)
	require.NoError(t, err)
	assert.Equal(t, int64(1), v, "an unset field counts as 0")
	_, err = p.bumped(context.Background(), mapped.Object{Namespace: "apps", Name: "r", ResourceVersion: "41"}, kind)
	assert.True(t, apierrors.IsConflict(err), "an object changed since the decision is decided again: %v", err)
}

func TestDerivedKindsAreNeverMoved(t *testing.T) {
	bundles := source.MappedKind{Resource: schema.GroupVersionResource{Group: "fleet.cattle.io", Version: "v1alpha1", Resource: "bundles"}, Derived: true}
	p := New(nil, nil, []source.MappedKind{bundles}, nil, nil)
	assert.Empty(t, p.kinds)
	in, _ := input(State{Targets: []string{"a"}}, []mapped.Object{{Kind: "bundles", Namespace: "n", Name: "b", Shard: "a", Labelled: true, Derived: true, Weight: 1}}, time.Now(), 10)
	assert.Empty(t, in.Objects, "a Bundle is no load of its own")
}

func TestOwners(t *testing.T) {
	objs := []mapped.Object{
		{Kind: "gitrepos", Namespace: "apps", Name: "with-bundles"},
		{Kind: "gitrepos", Namespace: "apps", Name: "fresh"},
		{Kind: "bundles", Namespace: "apps", Name: "with-bundles-app", Derived: true, Labels: labels.Set{"fleet.cattle.io/repo-name": "with-bundles"}},
		{Kind: "bundledeployments", Namespace: "cluster-1", Name: "x", Derived: true, Labels: labels.Set{"fleet.cattle.io/repo-name": "fresh"}},
	}
	got := owners(objs, map[string]string{"bundles": "fleet.cattle.io/repo-name"})
	assert.Equal(t, map[string]bool{"apps/with-bundles": true}, got,
		"a GitRepo with Bundles is applied again on a move; a fresh one has nothing to carry along")
}
