// Package balance holds the pure decisions of automatic placement: which
// mapped objects get which shard label in one round. It reads no client and
// no clock, so a round can be replayed and tested from its Input alone.
//
// It is the daemon's own: not a supported API, and it may change in any
// release.
package balance

import (
	"cmp"
	"container/heap"
	"slices"
	"sort"
	"time"
)

// Object is one mapped object as placement sees it.
type Object struct {
	// Key is unique, e.g. "gitrepos ns/name"; it breaks every tie so that a
	// round does not depend on the order the caches list objects in.
	Key string
	// Shard is the current shard ID; "" means the object has no shard label.
	Shard string
	// Movable is true when the object is in scope, not pinned by a person
	// and not being deleted, i.e. placement may (re)label it.
	Movable bool
	// Weight is the load the object adds to its shard; values < 1 count as 1
	// so that every object costs something.
	Weight int
	// MovedAt is when placement last assigned the object (zero = never).
	MovedAt time.Time
	// Paced, for an object with no shard label, makes its assignment count
	// against MaxMoves: a controller serves it already (the unsharded one),
	// so it can wait, or its assignment starts work, such as a git Job,
	// that must not start for a whole estate at once.
	Paced bool
}

// Input is everything one placement round decides from.
type Input struct {
	// Objects are all mapped objects, movable or not: pinned objects still
	// add load to their shard.
	Objects []Object
	// Targets are the shards that may receive objects (listed and
	// Available). Objects on shards that are neither targets nor draining
	// are left alone and add load to no target.
	Targets []string
	// Draining are the shards whose Movable objects must leave. A draining
	// shard never receives objects, even when it is also listed in Targets.
	Draining []string
	// FailingOver are the shards that are down: their Movable objects leave
	// as a drain's do (paced by MaxMoves), with the reason Failover.
	FailingOver []string
	// Now is the time of the round, compared with Object.MovedAt.
	Now time.Time
	// Threshold is the spread (max - min load over the targets) that
	// rebalance tolerates; values < 1 count as 1.
	Threshold int
	// MaxMoves bounds the paced moves in this round (drains, failovers,
	// rebalances and the assignments of Paced objects), so that a round
	// never relabels half the fleet at once. The other assignments are not
	// bounded: nothing serves those objects until they have a shard. <= 0
	// means no paced moves.
	MaxMoves int
	// Cooldown keeps rebalance off an object placement moved less than this
	// long ago, so that objects do not flap. Drain ignores it: the shard is
	// going away.
	Cooldown time.Duration
}

// Reason says why a move is made.
type Reason string

// Reasons of a move.
const (
	// Assign: an object with no shard label got one.
	Assign Reason = "Assign"
	// Drain: the object left a draining shard.
	Drain Reason = "Drain"
	// Rebalance: the object moved to narrow the spread between targets.
	Rebalance Reason = "Rebalance"
	// Failover: the object left a shard whose controllers are down.
	Failover Reason = "Failover"
)

// Move relabels one object from shard From ("" for an assignment) to To.
type Move struct {
	Key    string
	From   string
	To     string
	Reason Reason
	// Paced is whether the move counts against Input.MaxMoves.
	Paced bool
}

// Moves returns the moves of one round, in the order they should be applied:
// the assignments that cannot wait first, then drains and failovers, then
// the assignments that can, then rebalancing, each step seeing the loads
// left by the previous ones. The result depends only on in, not on the
// order of in.Objects.
func Moves(in Input) []Move {
	failing := set(in.FailingOver)
	draining := set(append(slices.Clone(in.Draining), in.FailingOver...))
	var targets []string
	for _, t := range set(in.Targets) {
		if _, ok := slices.BinarySearch(draining, t); !ok {
			targets = append(targets, t)
		}
	}
	if len(targets) == 0 {
		return nil
	}

	objs := slices.Clone(in.Objects)
	slices.SortFunc(objs, compareObjects)
	g := group(objs, targets, draining, in.Now, in.Cooldown)

	a := newAssigner(objs, targets, g.loads)
	for _, i := range g.unlabelled {
		a.toLightest(i, Assign, false)
	}
	// Objects that leave a shard go before the assignments that wait: a
	// shard that is down serves nothing, the unsharded controller does.
	budget := max(in.MaxMoves, 0)
	for _, i := range append(g.leaving, g.waiting...) {
		if budget == 0 {
			break
		}
		a.toLightest(i, pacedReason(objs[i], failing), true)
		budget--
	}
	for _, s := range a.h {
		g.loads[s.name] = s.load
	}

	return append(a.moves, rebalance(objs, targets, g.loads, g.cands, max(in.Threshold, 1), budget)...)
}

// groups are a round's objects as Moves treats them, each an index into
// the sorted objects.
type groups struct {
	// loads is the load of every target before the round.
	loads map[string]int
	// unlabelled are assigned at once; waiting (Paced) are assigned within
	// the budget.
	unlabelled, waiting []int
	// leaving are on a draining or failing shard.
	leaving []int
	// cands are, per target, the objects rebalance may move.
	cands map[string][]int
}

// group sorts objs into groups, each group heaviest first.
func group(objs []Object, targets, draining []string, now time.Time, cooldown time.Duration) groups {
	g := groups{loads: make(map[string]int, len(targets)), cands: make(map[string][]int, len(targets))}
	for _, t := range targets {
		g.loads[t] = 0
	}
	for i, o := range objs {
		if _, ok := g.loads[o.Shard]; ok {
			g.loads[o.Shard] += weight(o)
			if o.Movable && !cooling(o, now, cooldown) {
				g.cands[o.Shard] = append(g.cands[o.Shard], i)
			}
			continue
		}
		if !o.Movable {
			continue
		}
		if o.Shard == "" && o.Paced {
			g.waiting = append(g.waiting, i)
		} else if o.Shard == "" {
			g.unlabelled = append(g.unlabelled, i)
		} else if _, ok := slices.BinarySearch(draining, o.Shard); ok {
			g.leaving = append(g.leaving, i)
		}
	}

	// Heaviest first is LPT greedy: the light objects placed last fill the
	// gaps the heavy ones left. objs is sorted by key, so a stable sort keeps
	// key order among equal weights.
	heaviestFirst := func(a, b int) int { return cmp.Compare(weight(objs[b]), weight(objs[a])) }
	slices.SortStableFunc(g.unlabelled, heaviestFirst)
	slices.SortStableFunc(g.leaving, heaviestFirst)
	slices.SortStableFunc(g.waiting, heaviestFirst)
	return g
}

// pacedReason is why the paced move of o is made: it has no shard yet, or
// it leaves a failing or a draining one.
func pacedReason(o Object, failing []string) Reason {
	if o.Shard == "" {
		return Assign
	}
	if _, ok := slices.BinarySearch(failing, o.Shard); ok {
		return Failover
	}
	return Drain
}

// assigner moves objects to the lightest target, keeping the targets'
// loads in a heap.
type assigner struct {
	objs  []Object
	h     loadHeap
	moves []Move
}

func newAssigner(objs []Object, targets []string, loads map[string]int) *assigner {
	a := &assigner{objs: objs, h: make(loadHeap, 0, len(targets))}
	for _, t := range targets {
		a.h = append(a.h, shardLoad{name: t, load: loads[t]})
	}
	heap.Init(&a.h)
	return a
}

// toLightest moves objs[i] to the lightest target.
func (a *assigner) toLightest(i int, r Reason, paced bool) {
	o := a.objs[i]
	a.moves = append(a.moves, Move{Key: o.Key, From: o.Shard, To: a.h[0].name, Reason: r, Paced: paced})
	a.h[0].load += weight(o)
	heap.Fix(&a.h, 0)
}

// rebalance moves objects from heavy targets to the lightest one until the
// spread is within threshold, the budget is spent or no move narrows it.
// cands holds, per target, the indexes into objs of the objects rebalance
// may move; objects assigned or drained in this round are never in it, so no
// object moves twice.
func rebalance(objs []Object, targets []string, loads map[string]int, cands map[string][]int, threshold, budget int) []Move {
	// Lightest first, ties by key: a binary search on weight then finds the
	// first key of a weight.
	for t, c := range cands {
		slices.SortStableFunc(c, func(a, b int) int { return cmp.Compare(weight(objs[a]), weight(objs[b])) })
		cands[t] = c
	}
	order := slices.Clone(targets)
	var moves []Move
	for ; budget > 0; budget-- {
		// Heaviest first, ties by name; the lightest is the last load's
		// first name, so it is looked up on its own.
		slices.SortFunc(order, func(a, b string) int { return cmp.Or(cmp.Compare(loads[b], loads[a]), cmp.Compare(a, b)) })
		lightest := order[len(order)-1]
		for _, t := range order {
			if loads[t] == loads[lightest] {
				lightest = t
				break
			}
		}
		// Sources are tried heaviest first: when the heaviest target holds
		// only pinned or cooling objects, the next one may still narrow the
		// spread instead of rebalancing stopping for good.
		moved := false
		for _, from := range order {
			diff := loads[from] - loads[lightest]
			if diff <= threshold {
				break
			}
			c := cands[from]
			j, ok := pick(objs, c, diff)
			if !ok {
				continue
			}
			o := objs[c[j]]
			moves = append(moves, Move{Key: o.Key, From: from, To: lightest, Reason: Rebalance, Paced: true})
			loads[from] -= weight(o)
			loads[lightest] += weight(o)
			cands[from] = slices.Delete(c, j, j+1)
			moved = true
			break
		}
		if !moved {
			break
		}
	}
	return moves
}

// pick returns the position in c (sorted by weight, then key) of the object
// whose move narrows a spread of diff the most: the heaviest with
// w <= diff/2, else the lightest with w < diff. Any move of w < diff lowers
// the sum of squared loads, so repeated picks always end.
func pick(objs []Object, c []int, diff int) (int, bool) {
	w := func(j int) int { return weight(objs[c[j]]) }
	above := sort.Search(len(c), func(j int) bool { return w(j) > diff/2 })
	if above > 0 {
		best := w(above - 1)
		return sort.Search(above, func(j int) bool { return w(j) >= best }), true
	}
	if len(c) > 0 && w(0) < diff {
		return 0, true
	}
	return 0, false
}

// loads returns the load of every target given the objects: the sum of the
// weights of the objects whose Shard is that target, pinned ones included.
func loads(objects []Object, targets []string) map[string]int {
	out := make(map[string]int, len(targets))
	for _, t := range targets {
		out[t] = 0
	}
	for _, o := range objects {
		if _, ok := out[o.Shard]; ok {
			out[o.Shard] += weight(o)
		}
	}
	return out
}

// weight is the load o adds, at least 1 so that every object costs something.
func weight(o Object) int { return max(o.Weight, 1) }

// cooling reports whether rebalance must leave o alone because placement
// moved it too recently. A MovedAt after now (clock skew) counts as recent.
func cooling(o Object, now time.Time, cooldown time.Duration) bool {
	return cooldown > 0 && !o.MovedAt.IsZero() && now.Sub(o.MovedAt) < cooldown
}

// set returns the shard IDs sorted and without duplicates. "" is dropped: it
// means "no shard label", never a shard.
func set(ids []string) []string {
	out := slices.DeleteFunc(slices.Clone(ids), func(s string) bool { return s == "" })
	slices.Sort(out)
	return slices.Compact(out)
}

// compareObjects orders by key and, should keys repeat, by every other field,
// so that the order of the caller's slice never shows in the plan.
func compareObjects(a, b Object) int {
	return cmp.Or(
		cmp.Compare(a.Key, b.Key),
		cmp.Compare(a.Shard, b.Shard),
		cmp.Compare(a.Weight, b.Weight),
		boolCompare(a.Movable, b.Movable),
		a.MovedAt.Compare(b.MovedAt),
	)
}

func boolCompare(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	default:
		return -1
	}
}

// shardLoad is one target in loadHeap.
type shardLoad struct {
	name string
	load int
}

// loadHeap keeps the lightest target (ties by name) on top, so assigning n
// objects costs O(n log targets).
type loadHeap []shardLoad

func (h loadHeap) Len() int { return len(h) }
func (h loadHeap) Less(i, j int) bool {
	return h[i].load < h[j].load || h[i].load == h[j].load && h[i].name < h[j].name
}
func (h loadHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *loadHeap) Push(x any)   { *h = append(*h, x.(shardLoad)) }
func (h *loadHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
