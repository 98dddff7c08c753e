package stamp

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/shardkeeper/shardkeeper/pkg/balance"
	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
)

func placementOf(t *testing.T, value string) shardconfig.Placement {
	t.Helper()
	p, err := shardconfig.ParsePlacement(value)
	require.NoError(t, err)
	return p
}

// objects makes n movable objects of weight 1 on shard, in group.
func objects(prefix, shard, group string, n int) []balance.Object {
	out := make([]balance.Object, n)
	for i := range out {
		out[i] = balance.Object{Key: prefix + string(rune('a'+i)), Shard: shard, Movable: true, Weight: 1, Group: group}
	}
	return out
}

func TestNextIsTheLightestShardThatReceives(t *testing.T) {
	p := placementOf(t, "")
	objs := append(objects("a", "a", "", 3), objects("b", "b", "", 1)...)
	objs = append(objs, objects("c", "c", "", 0)...)
	in := balance.Input{Objects: objs, Targets: []string{"a", "b", "c", "d"}, Draining: []string{"d"}, FailingOver: []string{"c"}}
	got := Params(p, in, nil, nil)
	assert.Equal(t, "b", got[KeyNext], "c is down and d draining, though both are empty: never a shard that takes no objects")

	in.FailingOver = nil
	assert.Equal(t, "c", Params(p, in, nil, nil)[KeyNext])

	// The round's own moves count: after them, b is the heavier.
	moves := []balance.Move{{Key: "aa", From: "a", To: "b"}, {Key: "ab", From: "a", To: "b"}}
	in.Targets, in.Draining = []string{"a", "b"}, nil
	assert.Equal(t, "a", Params(p, in, moves, nil)[KeyNext])

	// Weights count, ties go to the first ID.
	in = balance.Input{Objects: []balance.Object{{Key: "x", Shard: "b", Weight: 5, Movable: true}, {Key: "y", Shard: "a", Weight: 5}}, Targets: []string{"b", "a"}}
	assert.Equal(t, "a", Params(p, in, nil, nil)[KeyNext])

	assert.NotContains(t, Params(p, balance.Input{Targets: []string{"a"}, Draining: []string{"a"}}, nil, nil), KeyNext,
		"no shard receives: nothing to stamp with")
}

func TestNextAgreesWithTheRound(t *testing.T) {
	// A new object of no group that the round assigns goes where next said
	// before it: the policy and the daemon choose alike.
	p := placementOf(t, "")
	in := balance.Input{Objects: append(objects("a", "a", "", 4), objects("b", "b", "", 2)...),
		Targets: []string{"a", "b", "c"}, Threshold: 100, MaxMoves: 100}
	for range 5 {
		next := Params(p, in, balance.Moves(in), nil)[KeyNext]
		in.Objects = append(in.Objects, balance.Object{Key: "new" + next + string(rune('0'+len(in.Objects))), Movable: true, Weight: 1})
		moves := balance.Moves(in)
		require.Len(t, moves, 1)
		assert.Equal(t, next, moves[0].To)
		in.Objects[len(in.Objects)-1].Shard = moves[0].To
	}
}

func TestSequenceIsTheRoundsOwnChoices(t *testing.T) {
	// The sequence is what one round gives as many new objects created at
	// once: the policy spreads a burst as the daemon would.
	p := placementOf(t, "")
	objs := append(objects("a", "a", "", 3), objects("b", "b", "", 1)...)
	in := balance.Input{Objects: objs, Targets: []string{"a", "b", "c"}, Threshold: 1000, MaxMoves: 1000}
	got := strings.Split(Params(p, in, nil, nil)[KeySequence], ",")
	require.Len(t, got, SequenceLength)
	assert.Equal(t, []string{"c", "b", "c", "b", "c", "a", "b", "c", "a"}, got[:9])

	for i := range SequenceLength {
		in.Objects = append(in.Objects, balance.Object{Key: fmt.Sprintf("new-%03d", i), Movable: true, Weight: 1})
	}
	var round []string
	for _, m := range balance.Moves(in) {
		round = append(round, m.To)
	}
	assert.Equal(t, got, round)
}

func TestGroupRecords(t *testing.T) {
	p := placementOf(t, "groupBy: namespace")
	objs := objects("a", "a", "namespace.team-a", 2)
	objs = append(objs, objects("b", "b", "namespace.team-b", 1)...)
	// Split between two shards (a move that did not complete): the side
	// with most of its weight.
	objs = append(objs, objects("c", "a", "namespace.team-c", 1)...)
	objs = append(objs, objects("cc", "b", "namespace.team-c", 2)...)
	// On a draining shard, not moved this round: a new object waits.
	objs = append(objs, objects("d", "d", "namespace.team-d", 1)...)
	// Pinned to b: b, whatever the rest says.
	objs = append(objs, objects("e", "a", "namespace.team-e", 3)...)
	objs = append(objs, balance.Object{Key: "epin", Shard: "b", Weight: 1, Group: "namespace.team-e"})
	// Pinned to two shards: nothing is moved, a new object waits.
	objs = append(objs, balance.Object{Key: "f1", Shard: "a", Weight: 1, Group: "namespace.team-f"},
		balance.Object{Key: "f2", Shard: "b", Weight: 1, Group: "namespace.team-f"})
	// Not labelled yet: no record, a new object goes to next.
	objs = append(objs, balance.Object{Key: "g", Movable: true, Weight: 1, Group: "namespace.team-g"})
	// On a shard placement does not know: left alone, and so is a new object.
	objs = append(objs, objects("h", "gone", "namespace.team-h", 1)...)
	// Moving this round: where it goes.
	objs = append(objs, objects("i", "d", "namespace.team-i", 1)...)
	in := balance.Input{Objects: objs, Targets: []string{"a", "b", "d"}, Draining: []string{"d"}}
	got := Params(p, in, []balance.Move{{Key: "ia", From: "d", To: "a"}}, nil)
	assert.Equal(t, map[string]string{
		"namespace.team-a": "a", "namespace.team-b": "b", "namespace.team-c": "b", "namespace.team-d": Wait,
		"namespace.team-e": "b", "namespace.team-f": Wait, "namespace.team-h": Wait, "namespace.team-i": "a",
	}, groupRecords(got))
	assert.Equal(t, "namespace", got[KeyGroupBy])
}

func groupRecords(data map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range data {
		if strings.HasPrefix(k, "namespace.") || strings.HasPrefix(k, "label.") {
			out[k] = v
		}
	}
	return out
}

func TestScopeAndSettings(t *testing.T) {
	p := placementOf(t, "namespaces: [apps, web]\nselector: team in (a,b),tier!=db,!legacy,owner\ngroupBy: label\ngroupLabel: example.com/tenant")
	got := Params(p, balance.Input{Targets: []string{"a"}}, nil, []string{"kustomizations.kustomize.toolkit.fluxcd.io", "helmreleases.helm.toolkit.fluxcd.io"})
	assert.Equal(t, map[string]string{
		KeyNext: "a", KeyGroupBy: "label", KeyGroupLabel: "example.com/tenant", KeyNamespaces: ",apps,web,",
		KeyGroupedKinds: ",helmreleases.helm.toolkit.fluxcd.io,kustomizations.kustomize.toolkit.fluxcd.io,",
		KeySelector:     "!|legacy|;exists|owner|;in|team|a,b;notin|tier|db",
		KeySequence:     strings.Repeat("a,", SequenceLength-1) + "a",
	}, got)

	assert.Empty(t, Params(placementOf(t, "selector: replicas>2"), balance.Input{Targets: []string{"a"}}, nil, nil),
		"a numeric comparison CEL cannot make as the daemon does: nothing stamped")
	assert.Empty(t, Params(shardconfig.Placement{}, balance.Input{Targets: []string{"a"}}, nil, nil), "placement off: nothing stamped")
	sel, err := labels.Parse("team=a")
	require.NoError(t, err)
	s, ok := encodeSelector(sel)
	assert.True(t, ok)
	assert.Equal(t, "in|team|a", s)
}

func TestTooManyGroupsStampNothingWrong(t *testing.T) {
	p := placementOf(t, "groupBy: namespace")
	var objs []balance.Object
	for i := range 40000 {
		objs = append(objs, balance.Object{Key: "o" + strconv.Itoa(i), Shard: "a", Movable: true, Weight: 1, Group: "namespace.tenant-with-a-long-name-" + strconv.Itoa(i)})
	}
	got := Params(p, balance.Input{Objects: objs, Targets: []string{"a", "b"}}, nil, nil)
	size := 0
	for k, v := range got {
		size += len(k) + len(v)
	}
	assert.LessOrEqual(t, size, MaxBytes)
	assert.NotContains(t, got, KeyNext, "a group left out must not be stamped onto next")
	assert.Less(t, len(groupRecords(got)), 40000)
	assert.NotEmpty(t, groupRecords(got))
}

func TestWithdraw(t *testing.T) {
	data := map[string]string{KeyNext: "a", KeySequence: "a,b,a", "namespace.x": "b", "label.y": "a", "namespace.w": Wait, KeyGroupBy: "namespace"}
	onlyA := func(s string) bool { return s == "a" }
	assert.Equal(t, map[string]string{"namespace.x": Wait, "label.y": "a", "namespace.w": Wait, KeyGroupBy: "namespace"}, Withdraw(data, onlyA),
		"b named in the sequence: next and the sequence go, b's group waits")
	all := func(string) bool { return true }
	assert.Equal(t, data, Withdraw(data, all))
	assert.Equal(t, "a,b,a", data[KeySequence], "data itself is left as it was")
}

func TestIsShardRecord(t *testing.T) {
	for _, k := range []string{KeyNext, "namespace.a", "label.b"} {
		assert.True(t, IsShardRecord(k), k)
	}
	for _, k := range []string{KeyGroupBy, KeyGroupLabel, KeyGroupedKinds, KeyNamespaces, KeySelector} {
		assert.False(t, IsShardRecord(k), k)
	}
}
