package placer

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/shardkeeper/shardkeeper/pkg/mapped"
	"github.com/shardkeeper/shardkeeper/pkg/placement"
	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
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
	in, index := Input(State{Placement: p, Targets: []string{"a", "b", "c"}, Draining: []string{"b"}}, objs, now, 7)
	assert.Equal(t, 7, in.MaxMoves)
	assert.Equal(t, time.Minute, in.Cooldown)
	assert.Equal(t, now, in.Now)
	byKey := map[string]placement.Object{}
	for _, o := range in.Objects {
		byKey[o.Key] = o
	}
	require.Len(t, byKey, 6)
	assert.Equal(t, placement.Object{Key: "gitrepos apps/new", Movable: true, Weight: 1}, byKey["gitrepos apps/new"])
	assert.Equal(t, placement.Object{Key: "gitrepos apps/placed", Shard: "a", Movable: true, Weight: 3, MovedAt: placedAt}, byKey["gitrepos apps/placed"])
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
	body, err := Patch(mapped.Object{Namespace: "apps", Name: "r", ResourceVersion: "42"}, "fleet.cattle.io/shard-ref", "shard-1", now)
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
		moved:     map[placement.Reason]int{placement.Assign: 3, placement.Drain: 2},
		to:        map[string]int{"shard-1": 4, "shard-0": 1},
		from:      map[string]int{"shard-2": 2},
		conflicts: 1,
	}
	assert.Equal(t, "placement moved 5 objects (3 assigned, 2 drained) to shard-0: 1, shard-1: 4; drained from shard-2: 2; "+
		"1 changed since they were read and are decided again", MovedMessage(res))
}

func TestSetWakesOnlyOnChange(t *testing.T) {
	on, err := shardconfig.ParsePlacement("selector: team=a")
	require.NoError(t, err)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "1"}}
	p := New(nil, nil, nil, nil)
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
