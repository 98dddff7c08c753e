package balance

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// objects returns n movable unit-weight objects on shard, keyed prefix-i.
func objects(prefix, shard string, n int) []Object {
	out := make([]Object, n)
	for i := range out {
		out[i] = Object{Key: fmt.Sprintf("%s-%05d", prefix, i), Shard: shard, Movable: true, Weight: 1}
	}
	return out
}

// apply returns objs with moves applied, as the daemon would label them.
func apply(t *testing.T, objs []Object, moves []Move) []Object {
	t.Helper()
	out := slices.Clone(objs)
	idx := map[string]int{}
	for i, o := range out {
		idx[o.Key] = i
	}
	for _, m := range moves {
		i, ok := idx[m.Key]
		require.True(t, ok, "move of unknown object %s", m.Key)
		require.Equal(t, out[i].Shard, m.From, "move of %s", m.Key)
		out[i].Shard, out[i].MovedAt = m.To, now
	}
	return out
}

// spread returns max - min of loads.
func spread(loads map[string]int) int {
	lo, hi := -1, 0
	for _, l := range loads {
		if lo < 0 || l < lo {
			lo = l
		}
		hi = max(hi, l)
	}
	return hi - max(lo, 0)
}

func countReasons(moves []Move) map[Reason]int {
	out := map[Reason]int{}
	for _, m := range moves {
		out[m.Reason]++
	}
	return out
}

func TestMovesBalance(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	targets := names(16)
	objs := make([]Object, 10000)
	total := 0
	for i := range objs {
		objs[i] = Object{Key: fmt.Sprintf("gitrepos ns/o-%05d", i), Movable: true, Weight: 1 + r.IntN(10)}
		total += objs[i].Weight
	}

	start := time.Now()
	moves := Moves(Input{Objects: objs, Targets: targets, Now: now, Threshold: 1, MaxMoves: 100})
	assert.Less(t, time.Since(start), time.Second)

	seen := map[string]bool{}
	for _, m := range moves {
		assert.Equal(t, Assign, m.Reason)
		assert.Empty(t, m.From)
		assert.False(t, seen[m.Key], "%s moved twice", m.Key)
		seen[m.Key] = true
	}
	assert.Len(t, seen, len(objs))

	loads := loads(apply(t, objs, moves), targets)
	mean := float64(total) / float64(len(targets))
	hi := 0
	for _, l := range loads {
		hi = max(hi, l)
	}
	assert.LessOrEqual(t, float64(hi)/mean, 1.05)
}

func TestMovesStability(t *testing.T) {
	old := names(8)
	var objs []Object
	for i := range 10000 {
		objs = append(objs, Object{Key: fmt.Sprintf("o-%05d", i), Shard: old[i%8], Movable: true, Weight: 1})
	}
	in := Input{Objects: objs, Targets: old, Now: now, Threshold: 1, MaxMoves: 100000}
	assert.Empty(t, Moves(in), "balanced input")

	// A ninth shard only pulls objects in.
	in.Targets = names(9)
	moves := Moves(in)
	ideal := (10000 + 8) / 9
	assert.LessOrEqual(t, float64(len(moves)), 1.1*float64(ideal))
	assert.GreaterOrEqual(t, len(moves), ideal-1)
	for _, m := range moves {
		assert.Equal(t, "shard-8", m.To)
		assert.Equal(t, Rebalance, m.Reason)
	}
	objs = apply(t, objs, moves)
	assert.LessOrEqual(t, spread(loads(objs, in.Targets)), in.Threshold)
	in.Objects = objs
	assert.Empty(t, Moves(in), "rebalanced input is stable")

	// Draining shard-3 (still listed as a target) moves only its objects.
	in.Draining = []string{"shard-3"}
	in.Now = now.Add(time.Minute)
	in.Cooldown = time.Hour
	moves = Moves(in)
	onShard3 := loads(objs, []string{"shard-3"})["shard-3"]
	assert.Len(t, moves, onShard3)
	for _, m := range moves {
		assert.Equal(t, "shard-3", m.From)
		assert.NotEqual(t, "shard-3", m.To)
		assert.Equal(t, Drain, m.Reason)
	}
	rest := slices.DeleteFunc(names(9), func(s string) bool { return s == "shard-3" })
	assert.LessOrEqual(t, spread(loads(apply(t, objs, moves), rest)), in.Threshold+1)
}

func TestMovesWeightedStability(t *testing.T) {
	// Weighted input spread evenly must not churn.
	r := rand.New(rand.NewPCG(3, 4))
	var objs []Object
	for i := range 2000 {
		objs = append(objs, Object{Key: fmt.Sprintf("o-%04d", i), Movable: true, Weight: 1 + r.IntN(10)})
	}
	in := Input{Objects: objs, Targets: names(5), Now: now, Threshold: 10, MaxMoves: 1000}
	in.Objects = apply(t, objs, Moves(in))
	assert.Empty(t, Moves(in))
}

func TestMovesPinsAndScope(t *testing.T) {
	pinned := objects("pinned", "a", 6)
	for i := range pinned {
		pinned[i].Movable = false
	}
	unlabelledPinned := Object{Key: "x-unlabelled-pinned", Movable: false, Weight: 1}
	in := Input{
		Objects: append(append(pinned, objects("new", "", 10)...), unlabelledPinned),
		Targets: []string{"a", "b"},
		Now:     now, Threshold: 1, MaxMoves: 10,
	}
	moves := Moves(in)
	got := map[string]int{}
	for _, m := range moves {
		assert.NotContains(t, m.Key, "pinned")
		got[m.To]++
	}
	// a starts at 6: b takes 8 of the 10 new objects, a 2.
	assert.Equal(t, map[string]int{"a": 2, "b": 8}, got)
	assert.Equal(t, map[string]int{"a": 8, "b": 8}, loads(apply(t, in.Objects, moves), in.Targets))

	// A heavy pinned shard must not stop rebalancing between the others.
	heavy := objects("pinned", "a", 20)
	for i := range heavy {
		heavy[i].Movable = false
	}
	in = Input{
		Objects: append(heavy, objects("movable", "b", 10)...),
		Targets: []string{"a", "b", "c"},
		Now:     now, Threshold: 1, MaxMoves: 100,
	}
	moves = Moves(in)
	assert.Len(t, moves, 5)
	for _, m := range moves {
		assert.Equal(t, Move{Key: m.Key, From: "b", To: "c", Reason: Rebalance, Paced: true}, m)
	}
}

func TestMovesCooldown(t *testing.T) {
	hot := objects("hot", "a", 10)
	for i := range hot {
		hot[i].MovedAt = now.Add(-time.Minute)
	}
	cold := objects("cold", "a", 4)
	for i := range cold {
		cold[i].MovedAt = now.Add(-2 * time.Hour)
	}
	tests := []struct {
		name     string
		objects  []Object
		draining []string
		want     map[Reason]int
		fromCold bool
	}{
		{name: "cooling objects stay", objects: hot, want: map[Reason]int{}},
		{name: "only cold objects rebalance", objects: append(slices.Clone(hot), cold...), want: map[Reason]int{Rebalance: 4}, fromCold: true},
		{name: "drain ignores cool-down", objects: hot, draining: []string{"a"}, want: map[Reason]int{Drain: 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			moves := Moves(Input{
				Objects: tt.objects, Targets: []string{"a", "b"}, Draining: tt.draining,
				Now: now, Threshold: 1, MaxMoves: 100, Cooldown: time.Hour,
			})
			assert.Equal(t, tt.want, countReasons(moves))
			for _, m := range moves {
				if tt.fromCold {
					assert.Contains(t, m.Key, "cold")
				}
			}
		})
	}
}

func TestMovesBudget(t *testing.T) {
	objs := slices.Concat(
		objects("new", "", 5),
		objects("drain", "d", 4),
		objects("heavy", "a", 20),
	)
	tests := []struct {
		maxMoves int
		want     map[Reason]int
	}{
		{maxMoves: -1, want: map[Reason]int{Assign: 5}},
		{maxMoves: 0, want: map[Reason]int{Assign: 5}},
		{maxMoves: 2, want: map[Reason]int{Assign: 5, Drain: 2}},
		{maxMoves: 6, want: map[Reason]int{Assign: 5, Drain: 4, Rebalance: 2}},
		{maxMoves: 100, want: map[Reason]int{Assign: 5, Drain: 4, Rebalance: 5}},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.maxMoves), func(t *testing.T) {
			moves := Moves(Input{Objects: objs, Targets: []string{"a", "b"}, Draining: []string{"d"}, Now: now, Threshold: 1, MaxMoves: tt.maxMoves})
			assert.Equal(t, tt.want, countReasons(moves))
			// Assign, then Drain, then Rebalance.
			assert.True(t, slices.IsSortedFunc(moves, func(a, b Move) int {
				order := map[Reason]int{Assign: 0, Drain: 1, Rebalance: 2}
				return order[a.Reason] - order[b.Reason]
			}))
		})
	}
}

func TestMovesTargets(t *testing.T) {
	objs := slices.Concat(objects("new", "", 6), objects("gone", "unknown", 3), objects("old", "d", 2))
	tests := []struct {
		name     string
		targets  []string
		draining []string
		want     map[string]int // moves per To
	}{
		{name: "no targets", want: map[string]int{}},
		{name: "only draining targets", targets: []string{"d"}, draining: []string{"d"}, want: map[string]int{}},
		{name: "draining listed as target", targets: []string{"a", "d", "b", "a", ""}, draining: []string{"d"}, want: map[string]int{"a": 4, "b": 4}},
		{name: "d not draining", targets: []string{"a", "b"}, want: map[string]int{"a": 3, "b": 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			moves := Moves(Input{Objects: objs, Targets: tt.targets, Draining: tt.draining, Now: now, Threshold: 1, MaxMoves: 100})
			got := map[string]int{}
			for _, m := range moves {
				got[m.To]++
				assert.NotContains(t, m.Key, "gone")
				assert.NotEqual(t, m.From, m.To)
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestMovesPicksSpreadNarrowingObject(t *testing.T) {
	tests := []struct {
		name    string
		objects []Object
		want    []Move
	}{
		{
			// spread 9: the heaviest with w <= 4 is 4 (key b before c).
			name: "largest half",
			objects: []Object{
				{Key: "a", Shard: "x", Movable: true, Weight: 1},
				{Key: "c", Shard: "x", Movable: true, Weight: 4},
				{Key: "b", Shard: "x", Movable: true, Weight: 4},
			},
			want: []Move{{Key: "b", From: "x", To: "y", Reason: Rebalance, Paced: true}},
		},
		{
			// spread 5, nothing movable <= 2: the lightest below 5 is 4
			// (key b before c), after which y is heavier by 3.
			name: "smallest below spread",
			objects: []Object{
				{Key: "a", Shard: "x", Movable: false, Weight: 1},
				{Key: "c", Shard: "x", Movable: true, Weight: 4},
				{Key: "b", Shard: "x", Movable: true, Weight: 4},
				{Key: "d", Shard: "y", Movable: true, Weight: 4},
			},
			want: []Move{{Key: "b", From: "x", To: "y", Reason: Rebalance, Paced: true}},
		},
		{
			name:    "nothing helps",
			objects: []Object{{Key: "a", Shard: "x", Movable: true, Weight: 7}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			moves := Moves(Input{Objects: tt.objects, Targets: []string{"x", "y"}, Now: now, Threshold: 1, MaxMoves: 1})
			assert.Equal(t, tt.want, moves)
		})
	}
}

func TestMovesDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var objs []Object
	shards := []string{"", "a", "b", "c", "d", "x"}
	for i := range 500 {
		objs = append(objs, Object{
			Key: fmt.Sprintf("o-%03d", i), Shard: shards[r.IntN(len(shards))],
			Movable: r.IntN(5) > 0, Weight: r.IntN(4), MovedAt: now.Add(-time.Duration(r.IntN(120)) * time.Minute),
		})
	}
	in := Input{Objects: objs, Targets: []string{"c", "a", "b", "d"}, Draining: []string{"d"}, Now: now, Threshold: 1, MaxMoves: 40, Cooldown: time.Hour}
	want := Moves(in)
	require.NotEmpty(t, want)
	for range 5 {
		shuffled := slices.Clone(objs)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		in.Objects = shuffled
		slices.Reverse(in.Targets)
		assert.Equal(t, want, Moves(in))
	}
}

func TestLoads(t *testing.T) {
	objs := []Object{
		{Key: "a", Shard: "x", Weight: 3},
		{Key: "b", Shard: "x", Weight: 0, Movable: true},
		{Key: "c", Shard: "z", Weight: 5},
		{Key: "d", Weight: 5},
	}
	assert.Equal(t, map[string]int{"x": 4, "y": 0}, loads(objs, []string{"x", "y"}))
}

func BenchmarkMoves(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	objs := make([]Object, 10000)
	for i := range objs {
		objs[i] = Object{Key: fmt.Sprintf("o-%05d", i), Movable: true, Weight: 1 + r.IntN(10)}
		if i%3 > 0 {
			objs[i].Shard = fmt.Sprintf("shard-%d", r.IntN(15))
		}
	}
	in := Input{Objects: objs, Targets: names(16), Now: now, Threshold: 1, MaxMoves: 10000}
	for b.Loop() {
		Moves(in)
	}
}

// FuzzMoves checks the invariants of any round: only movable objects move,
// none twice, only to targets that are neither draining nor failing over,
// drains, failovers and rebalances within budget, and the same plan for
// reordered input.
func FuzzMoves(f *testing.F) {
	f.Add([]byte{3, 1, 1, 2, 60, 0, 1, 7, 2, 3, 5, 2, 1, 1, 9, 0, 3, 4, 4})
	f.Add([]byte{2, 0, 0, 100, 0, 0, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		next := func() int {
			if len(data) == 0 {
				return 0
			}
			b := data[0]
			data = data[1:]
			return int(b)
		}
		// Shards s0..s4: the first nTargets are targets, the last nDrain
		// draining (possibly overlapping), plus "" and an unknown one.
		shards := []string{"s0", "s1", "s2", "s3", "s4"}
		in := Input{
			Targets:     shards[:next()%6],
			Draining:    shards[5-next()%6:],
			FailingOver: shards[2 : 2+next()%4],
			Threshold:   next()%5 - 1,
			MaxMoves:    next()%12 - 2,
			Cooldown:    time.Duration(next()%3) * time.Hour,
			Now:         now,
		}
		all := append([]string{"", "unknown"}, shards...)
		for i := 0; len(data) > 0; i++ {
			shard, w, flags := next(), next(), next()
			in.Objects = append(in.Objects, Object{
				Key:     fmt.Sprintf("o%03d", i),
				Shard:   all[shard%len(all)],
				Weight:  w%12 - 1,
				Movable: flags&1 == 1,
				Paced:   w&16 != 0,
				MovedAt: now.Add(-time.Duration(flags>>1) * 20 * time.Minute),
			})
		}

		moves := Moves(in)

		byKey := map[string]Object{}
		for _, o := range in.Objects {
			byKey[o.Key] = o
		}
		receivers := map[string]bool{}
		for _, s := range in.Targets {
			receivers[s] = !slices.Contains(in.Draining, s) && !slices.Contains(in.FailingOver, s)
		}
		moved := map[string]bool{}
		budgeted := 0
		for _, m := range moves {
			o := byKey[m.Key]
			require.True(t, o.Movable, "non-movable %s moved", m.Key)
			require.False(t, moved[m.Key], "%s moved twice", m.Key)
			moved[m.Key] = true
			require.True(t, receivers[m.To], "%s moved to %q", m.Key, m.To)
			require.Equal(t, o.Shard, m.From)
			switch m.Reason {
			case Assign:
				require.Empty(t, m.From)
				require.Equal(t, o.Paced, m.Paced, "%s: an assignment is paced as its object says", m.Key)
			case Drain:
				require.Contains(t, in.Draining, m.From)
				require.NotContains(t, in.FailingOver, m.From)
				require.True(t, m.Paced)
			case Failover:
				require.Contains(t, in.FailingOver, m.From)
				require.True(t, m.Paced)
			case Rebalance:
				require.True(t, receivers[m.From])
				require.False(t, o.MovedAt.After(now.Add(-in.Cooldown)) && in.Cooldown > 0, "%s rebalanced in cool-down", m.Key)
				require.True(t, m.Paced)
			default:
				t.Fatalf("unknown reason %q", m.Reason)
			}
			if m.Paced {
				budgeted++
			}
		}
		require.LessOrEqual(t, budgeted, max(in.MaxMoves, 0))

		// With anywhere to go, every movable unlabelled object that cannot
		// wait gets a shard.
		if slices.ContainsFunc(in.Targets, func(s string) bool { return receivers[s] }) {
			for _, o := range in.Objects {
				if o.Movable && o.Shard == "" && !o.Paced {
					require.True(t, moved[o.Key], "%s left unassigned", o.Key)
				}
			}
		}

		reversed := slices.Clone(in.Objects)
		slices.Reverse(reversed)
		in.Objects = reversed
		require.Equal(t, moves, Moves(in))
	})
}

// A shard that is down loses its movable objects as a drain would, paced,
// with the reason Failover; it receives none, its pinned objects stay.
func TestMovesFailover(t *testing.T) {
	in := Input{Targets: []string{"a", "b", "c"}, FailingOver: []string{"b"}, MaxMoves: 2, Now: now, Threshold: 100,
		Objects: []Object{
			{Key: "o1", Shard: "b", Movable: true, Weight: 1},
			{Key: "o2", Shard: "b", Movable: true, Weight: 1},
			{Key: "o3", Shard: "b", Movable: true, Weight: 1},
			{Key: "pinned", Shard: "b", Weight: 1},
			{Key: "new", Movable: true, Weight: 1},
		}}
	moves := Moves(in)
	var failover, to []string
	for _, m := range moves {
		to = append(to, m.To)
		if m.Reason == Failover {
			failover = append(failover, m.Key)
			assert.Equal(t, "b", m.From)
		}
	}
	assert.Equal(t, []string{"o1", "o2"}, failover, "paced by maxMoves, the pinned object stays")
	assert.NotContains(t, to, "b", "nothing goes to a shard that is down")
	assert.Len(t, moves, 3, "the new object is assigned elsewhere")
}

func TestMovesAssignHeaviestFirst(t *testing.T) {
	// In key order a, b, c would end 3:1; heaviest first ends 2:2.
	objs := []Object{
		{Key: "a", Movable: true, Weight: 1},
		{Key: "b", Movable: true},
		{Key: "c", Movable: true, Weight: 2},
	}
	assert.Equal(t, []Move{
		{Key: "c", To: "x", Reason: Assign},
		{Key: "a", To: "y", Reason: Assign},
		{Key: "b", To: "y", Reason: Assign},
	}, Moves(Input{Objects: objs, Targets: []string{"y", "x"}, Now: now}))
}

// names returns n shard IDs, shard-0 … shard-(n-1).
func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("shard-%d", i)
	}
	return out
}

// Objects that a controller serves already, or whose assignment starts
// work, are assigned within the budget, after the objects that leave a
// shard; the others are assigned at once.
func TestMovesPacesAssignmentsThatCanWait(t *testing.T) {
	waiting := objects("served", "", 4)
	for i := range waiting {
		waiting[i].Paced = true
	}
	in := Input{Targets: []string{"a", "b"}, Draining: []string{"d"}, MaxMoves: 3, Now: now, Threshold: 100,
		Objects: slices.Concat(objects("new", "", 3), objects("old", "d", 2), waiting)}

	var got []string
	for _, m := range Moves(in) {
		got = append(got, fmt.Sprintf("%s %s paced=%t", m.Key, m.Reason, m.Paced))
	}

	assert.Equal(t, []string{
		"new-00000 Assign paced=false", "new-00001 Assign paced=false", "new-00002 Assign paced=false",
		"old-00000 Drain paced=true", "old-00001 Drain paced=true",
		"served-00000 Assign paced=true",
	}, got)
}
