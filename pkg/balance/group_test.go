package balance

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// member returns a movable unit-weight object of group on shard.
func member(group, name, shard string) Object {
	return Object{Key: "helmreleases " + group + "/" + name, Shard: shard, Movable: true, Weight: 1, Group: group}
}

// shardsOf returns, by group, the shards its objects are on once moves
// are applied ("" for an unlabelled object).
func shardsOf(objs []Object) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, o := range objs {
		if o.Group == "" {
			continue
		}
		if out[o.Group] == nil {
			out[o.Group] = map[string]bool{}
		}
		out[o.Group][o.Shard] = true
	}
	return out
}

func TestGroupsDrainTogether(t *testing.T) {
	var objs []Object
	for g := range 4 {
		for i := range 3 {
			objs = append(objs, member(fmt.Sprintf("team-%d", g), strconv.Itoa(i), "c"))
		}
	}
	objs = append(objs, objects("gitrepos", "c", 2)...)
	in := Input{Objects: objs, Targets: []string{"a", "b"}, Draining: []string{"c"}, Now: now, MaxMoves: 100}
	moves := Moves(in)
	require.Len(t, moves, 14, "everything leaves c")
	for g, shards := range shardsOf(apply(t, objs, moves)) {
		assert.Len(t, shards, 1, "%s is on one shard", g)
		assert.NotContains(t, shards, "c", g)
	}
	after := loads(apply(t, objs, moves), in.Targets)
	assert.Equal(t, map[string]int{"a": 7, "b": 7}, after, "a group weighs what its objects weigh together")
	for _, m := range moves {
		assert.Equal(t, Drain, m.Reason)
		assert.True(t, m.Paced)
	}
}

func TestGroupCountsItsSizeAgainstTheBudget(t *testing.T) {
	objs := []Object{
		member("big", "0", "c"), member("big", "1", "c"), member("big", "2", "c"),
		{Key: "gitrepos apps/small", Shard: "c", Movable: true, Weight: 1},
	}
	in := Input{Objects: objs, Targets: []string{"a", "b"}, Draining: []string{"c"}, Now: now, MaxMoves: 2}
	assert.Empty(t, Moves(in), "the group is first in line and does not fit; nothing overtakes it, so it cannot starve")

	in.MaxMoves = 4
	moves := Moves(in)
	assert.Len(t, moves, 4, "3 for the group, 1 for the object")

	in.MaxMoves, in.FreshWindow = 2, true
	moves = Moves(in)
	require.Len(t, moves, 3, "bigger than a whole window, it moves alone when nothing is spent yet")
	assert.Len(t, shardsOf(apply(t, objs, moves))["big"], 1)
	for _, m := range moves {
		assert.NotEqual(t, "gitrepos apps/small", m.Key, "nothing else is paced in that round")
	}

	in.MaxMoves = 0
	assert.Empty(t, Moves(in), "no budget at all is no move, fresh or not")
}

func TestNewObjectJoinsItsGroup(t *testing.T) {
	objs := []Object{
		member("team-a", "source", "a"),
		member("team-a", "release", "a"),
		{Key: "helmreleases team-a/new", Movable: true, Weight: 1, Group: "team-a"},
		{Key: "helmreleases team-b/new", Movable: true, Weight: 1, Group: "team-b"},
	}
	moves := Moves(Input{Objects: objs, Targets: []string{"a", "b"}, Now: now, MaxMoves: 0, Threshold: 100})
	assert.ElementsMatch(t, []Move{
		{Key: "helmreleases team-a/new", To: "a", Reason: Assign},
		{Key: "helmreleases team-b/new", To: "b", Reason: Assign},
	}, moves, "to the group's shard, not the lightest; a new group goes to the lightest")

	objs[2].Paced = true
	moves = Moves(Input{Objects: objs, Targets: []string{"a", "b"}, Now: now, MaxMoves: 0, Threshold: 100})
	assert.Equal(t, []Move{{Key: "helmreleases team-b/new", To: "b", Reason: Assign}}, moves, "one that can wait waits for budget")

	moves = Moves(Input{Objects: objs, Targets: []string{"b"}, Now: now, MaxMoves: 10})
	assert.Equal(t, []Move{{Key: "helmreleases team-b/new", To: "b", Reason: Assign}}, moves,
		"while the group's shard takes no objects, the new one waits: never elsewhere")
}

func TestPinnedGroup(t *testing.T) {
	pin := Object{Key: "helmreleases team-a/pinned", Shard: "b", Weight: 1, Group: "team-a"}
	objs := []Object{pin, member("team-a", "x", "a"), member("team-a", "y", "a"),
		{Key: "helmreleases team-a/new", Movable: true, Weight: 1, Group: "team-a"}}
	moves := Moves(Input{Objects: objs, Targets: []string{"a", "b"}, Now: now, MaxMoves: 10})
	assert.Equal(t, []Move{
		{Key: "helmreleases team-a/new", To: "b", Reason: Assign},
		{Key: "helmreleases team-a/x", From: "a", To: "b", Reason: Regroup, Paced: true},
		{Key: "helmreleases team-a/y", From: "a", To: "b", Reason: Regroup, Paced: true},
	}, moves, "the group lives where its pin says")

	assert.Empty(t, Moves(Input{Objects: objs, Targets: []string{"a", "c"}, Now: now, MaxMoves: 10}),
		"pinned to a shard that takes no objects: the group waits, split no further")
	assert.Empty(t, Moves(Input{Objects: objs, Targets: []string{"a", "c"}, Draining: []string{"b"}, Now: now, MaxMoves: 10}),
		"pinned to a draining shard: it stays")

	other := Object{Key: "gitrepositories team-a/pinned", Shard: "a", Weight: 1, Group: "team-a"}
	moves = Moves(Input{Objects: append(objs, other), Targets: []string{"a", "b"}, Draining: []string{"c"}, Now: now, MaxMoves: 10})
	assert.Empty(t, moves, "pinned to two shards: nothing of the group moves, not even its new object")
}

func TestSplitGroupComesTogether(t *testing.T) {
	objs := []Object{
		member("team-a", "x", "a"),
		member("team-a", "y", "a"),
		member("team-a", "z", "b"),
		member("team-b", "x", "c"),
		member("team-b", "y", "b"),
	}
	moves := Moves(Input{Objects: objs, Targets: []string{"a", "b"}, Draining: []string{"c"}, Now: now, MaxMoves: 10, Threshold: 100})
	assert.Equal(t, []Move{
		{Key: "helmreleases team-a/z", From: "b", To: "a", Reason: Regroup, Paced: true},
		{Key: "helmreleases team-b/x", From: "c", To: "b", Reason: Drain, Paced: true},
	}, moves, "to where most of it is; off a draining shard to the rest of it")
}

func TestRebalanceMovesWholeGroups(t *testing.T) {
	objs := []Object{
		member("team-a", "x", "a"),
		member("team-a", "y", "a"),
		{Key: "gitrepos apps/1", Shard: "a", Movable: true, Weight: 1},
		{Key: "gitrepos apps/2", Shard: "a", Movable: true, Weight: 1},
	}
	in := Input{Objects: objs, Targets: []string{"a", "b"}, Now: now, MaxMoves: 10, Threshold: 1}
	moves := Moves(in)
	assert.Equal(t, []Move{
		{Key: "helmreleases team-a/x", From: "a", To: "b", Reason: Rebalance, Paced: true},
		{Key: "helmreleases team-a/y", From: "a", To: "b", Reason: Rebalance, Paced: true},
	}, moves, "a group of weight 2 halves a spread of 4")

	in.MaxMoves = 1
	moves = Moves(in)
	assert.Equal(t, []Move{{Key: "gitrepos apps/1", From: "a", To: "b", Reason: Rebalance, Paced: true}}, moves,
		"a group that does not fit the budget is not moved by halves")

	in.Objects[0].MovedAt = now
	in.Cooldown, in.MaxMoves = time.Hour, 10
	for _, m := range Moves(in) {
		assert.NotContains(t, m.Key, "team-a", "one object cooling keeps its whole group")
	}
}

func TestUngroupedObjectsMoveOneByOne(t *testing.T) {
	// The same namespace, no group: Fleet's kinds are placed object by
	// object.
	objs := []Object{
		{Key: "gitrepos team-a/x", Shard: "c", Movable: true, Weight: 1},
		{Key: "gitrepos team-a/y", Shard: "c", Movable: true, Weight: 1},
		{Key: "gitrepos team-a/z", Shard: "b", Weight: 1},
	}
	moves := Moves(Input{Objects: objs, Targets: []string{"a", "b"}, Draining: []string{"c"}, Now: now, MaxMoves: 1})
	assert.Equal(t, []Move{{Key: "gitrepos team-a/x", From: "c", To: "a", Reason: Drain, Paced: true}}, moves,
		"one at a time, to the lightest, whatever holds the others")
	moves = Moves(Input{Objects: objs, Targets: []string{"a", "b"}, Draining: []string{"c"}, Now: now, MaxMoves: 2})
	assert.Equal(t, []Move{
		{Key: "gitrepos team-a/x", From: "c", To: "a", Reason: Drain, Paced: true},
		{Key: "gitrepos team-a/y", From: "c", To: "a", Reason: Drain, Paced: true},
	}, moves)
}
