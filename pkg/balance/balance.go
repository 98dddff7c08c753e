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
	// Group, when set, makes the object one unit of placement with every
	// other object of the same Group: they live on one shard, and move
	// together, in one round, or not at all. An object of the group that
	// is not Movable but has a shard holds the group on that shard (a
	// pin). "" makes the object a unit of its own.
	Group string
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
	// means no paced moves. A group costs as many moves as it moves
	// objects.
	MaxMoves int
	// FreshWindow says that MaxMoves is the whole budget of a pacing
	// window, none of it spent: a group that moves more objects than that
	// may then move, alone, as the round's first paced move. Otherwise it
	// could never move at all; the caller carries the excess over to the
	// next windows.
	FreshWindow bool
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
	// Regroup: the object joined the shard its group lives on, from
	// another target: the one a pin holds the group on, or the one most
	// of the group is on after a move that did not complete.
	Regroup Reason = "Regroup"
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
// the moves that bring a group together, then the assignments that can
// wait, then rebalancing, each step seeing the loads left by the previous
// ones. A group (Object.Group) moves as one unit; an object of no group is
// a unit of its own. The result depends only on in, not on the order of
// in.Objects.
func Moves(in Input) []Move {
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
	r := &round{objs: objs, targets: targets, draining: draining, failing: set(in.FailingOver)}
	q := r.sort(unitsOf(objs), in.Now, in.Cooldown)
	a := newAssigner(r, loads(objs, targets))
	// Only the moves nobody can wait for: unlabelled objects that no
	// controller serves.
	for _, it := range q.joins {
		a.join(it, false)
	}
	for _, it := range q.unlabelled {
		a.toLightest(it, false)
	}
	// Objects that leave a shard go before the assignments that wait: a
	// shard that is down serves nothing, the unsharded controller does.
	// The order is kept: a unit that does not fit the budget waits for
	// the next window rather than be overtaken, so none waits for ever.
	p := pacer{budget: max(in.MaxMoves, 0), fresh: in.FreshWindow}
	for _, it := range slices.Concat(q.leaving, q.joins, q.waiting) {
		if !p.take(r.cost(it)) {
			p.budget = 0
			break
		}
		if it.home != "" {
			a.join(it, true)
		} else {
			a.toLightest(it, true)
		}
	}
	loads := make(map[string]int, len(targets))
	for _, s := range a.h {
		loads[s.name] = s.load
	}
	return append(a.moves, r.rebalance(loads, q.cands, max(in.Threshold, 1), &p)...)
}

// round is what Moves decides from, sorted.
type round struct {
	// objs are the objects sorted by key; units index them.
	objs []Object
	// targets receive objects; draining (failing included) lose theirs.
	targets, draining, failing []string
}

// unit is what moves as one: a whole group, or an object of no group.
type unit struct {
	// members index the round's objects, in key order.
	members []int
}

// unitsOf returns the units of objs, in the order of their first members.
func unitsOf(objs []Object) []unit {
	var out []unit
	byGroup := map[string]int{}
	for i, o := range objs {
		if o.Group == "" {
			out = append(out, unit{members: []int{i}})
			continue
		}
		j, ok := byGroup[o.Group]
		if !ok {
			j = len(out)
			byGroup[o.Group] = j
			out = append(out, unit{})
		}
		out[j].members = append(out[j].members, i)
	}
	return out
}

// item is a unit on its way: to home when that is fixed, else to the
// lightest target.
type item struct {
	u    unit
	home string
	// weight is the load its moving objects add, for the heaviest-first
	// orders.
	weight int
}

// queues are a round's units as Moves treats them.
type queues struct {
	// unlabelled are assigned at once; waiting (Paced) within the budget.
	unlabelled, waiting []item
	// leaving are on draining or failing shards.
	leaving []item
	// joins have objects to bring to the shard their group lives on.
	joins []item
	// cands are, per target, the units rebalance may move.
	cands map[string][]item
}

// action is what becomes of a unit in a round.
type action int

const (
	stay action = iota
	// assignNew: none of its objects has a shard; it goes to the lightest
	// target.
	assignNew
	// leave: its shard is draining or failing; it goes to the lightest
	// target.
	leave
	// join: the objects not on its home go there.
	join
	// candidate: wholly on its home, which rebalance may move it off.
	candidate
)

// sort sorts units into queues, each queue heaviest first but for joins,
// which are in unit order.
func (r *round) sort(units []unit, now time.Time, cooldown time.Duration) queues {
	q := queues{cands: map[string][]item{}}
	for _, u := range units {
		act, home := r.decide(u, now, cooldown)
		it := item{u: u, home: home, weight: r.weight(u, home)}
		switch act {
		case assignNew:
			if r.paced(u) {
				q.waiting = append(q.waiting, it)
			} else {
				q.unlabelled = append(q.unlabelled, it)
			}
		case leave:
			q.leaving = append(q.leaving, it)
		case join:
			q.joins = append(q.joins, it)
		case candidate:
			it.home, it.weight = "", r.weight(u, "")
			q.cands[home] = append(q.cands[home], it)
		case stay:
		}
	}
	// Heaviest first is LPT greedy: the light units placed last fill the
	// gaps the heavy ones left. Units are in key order, so a stable sort
	// keeps key order among equal weights.
	heaviestFirst := func(a, b item) int { return cmp.Compare(b.weight, a.weight) }
	slices.SortStableFunc(q.unlabelled, heaviestFirst)
	slices.SortStableFunc(q.leaving, heaviestFirst)
	slices.SortStableFunc(q.waiting, heaviestFirst)
	return q
}

// decide says what becomes of u this round, and the shard it lives on
// when that is fixed. An object that may not move holds its unit on its
// shard; two that hold it on different shards keep the whole unit where
// it is. A unit whose objects are on several shards (a move that did not
// complete) joins the target that holds most of its weight.
func (r *round) decide(u unit, now time.Time, cooldown time.Duration) (action, string) {
	var held, placed []string
	weightOn := map[string]int{}
	movable, unlabelled, cool := false, false, false
	for _, i := range u.members {
		o := r.objs[i]
		switch {
		case !o.Movable && o.Shard != "":
			held = append(held, o.Shard)
		case !o.Movable:
		case o.Shard == "":
			movable, unlabelled = true, true
		case !r.isTarget(o.Shard) && !r.isDraining(o.Shard):
			// Left alone, and so is the rest of its unit.
			return stay, ""
		default:
			movable = true
			placed = append(placed, o.Shard)
			weightOn[o.Shard] += weight(o)
			cool = cool || cooling(o, now, cooldown)
		}
	}
	held, placed = set(held), set(placed)
	switch {
	case !movable || len(held) > 1:
		return stay, ""
	case len(held) == 1 && r.isTarget(held[0]):
		return join, held[0]
	case len(held) == 1:
		return stay, ""
	case len(placed) == 0:
		return assignNew, ""
	}
	home := ""
	for _, s := range placed {
		if r.isTarget(s) && (home == "" || weightOn[s] > weightOn[home]) {
			home = s
		}
	}
	switch {
	case home == "":
		return leave, ""
	case len(placed) > 1 || unlabelled:
		return join, home
	case cool:
		return stay, ""
	}
	return candidate, home
}

// movers returns the objects of u that move to home ("" for the lightest
// target): the movable ones not there already.
func (r *round) movers(u unit, home string) []int {
	var out []int
	for _, i := range u.members {
		if o := r.objs[i]; o.Movable && (home == "" || o.Shard != home) {
			out = append(out, i)
		}
	}
	return out
}

// weight is the load u's objects add to home when they move there.
func (r *round) weight(u unit, home string) int {
	w := 0
	for _, i := range r.movers(u, home) {
		w += weight(r.objs[i])
	}
	return w
}

// paced reports whether u's assignment can wait: every one of its
// unlabelled objects can. One that nobody serves cannot.
func (r *round) paced(u unit) bool {
	for _, i := range r.movers(u, "") {
		if !r.objs[i].Paced {
			return false
		}
	}
	return true
}

// cost is the number of paced moves of it: the objects it moves, but for
// a join the unlabelled objects that cannot wait, which it moved already.
func (r *round) cost(it item) int {
	n := 0
	for _, i := range r.movers(it.u, it.home) {
		if o := r.objs[i]; it.home == "" || o.Shard != "" || o.Paced {
			n++
		}
	}
	return n
}

// reason is why o moves off its shard other than to rebalance.
func (r *round) reason(o Object) Reason {
	switch {
	case o.Shard == "":
		return Assign
	case slices.Contains(r.failing, o.Shard):
		return Failover
	case r.isDraining(o.Shard):
		return Drain
	}
	return Regroup
}

func (r *round) isTarget(s string) bool {
	_, ok := slices.BinarySearch(r.targets, s)
	return ok
}

func (r *round) isDraining(s string) bool {
	_, ok := slices.BinarySearch(r.draining, s)
	return ok
}

// pacer spends the budget of paced moves.
type pacer struct {
	budget, spent int
	// fresh: budget is a whole window's, none of it spent.
	fresh bool
}

// fits reports whether a unit of n paced moves may go now: within the
// budget, or, being bigger than a whole window's, alone.
func (p *pacer) fits(n int) bool {
	return n <= p.budget || p.fresh && p.spent == 0 && p.budget > 0
}

// take spends n paced moves if they fit, and reports whether they did. A
// unit bigger than the budget spends all of it.
func (p *pacer) take(n int) bool {
	if !p.fits(n) {
		return false
	}
	p.budget = max(p.budget-n, 0)
	p.spent += n
	return true
}

// assigner moves units, keeping the targets' loads in a heap.
type assigner struct {
	r     *round
	h     loadHeap
	moves []Move
}

func newAssigner(r *round, loads map[string]int) *assigner {
	a := &assigner{r: r, h: make(loadHeap, 0, len(r.targets))}
	for _, t := range r.targets {
		a.h = append(a.h, shardLoad{name: t, load: loads[t]})
	}
	heap.Init(&a.h)
	return a
}

// toLightest moves the whole of it to the lightest target.
func (a *assigner) toLightest(it item, paced bool) {
	to := a.h[0].name
	for _, i := range a.r.movers(it.u, "") {
		o := a.r.objs[i]
		a.moves = append(a.moves, Move{Key: o.Key, From: o.Shard, To: to, Reason: a.r.reason(o), Paced: paced})
		a.h[0].load += weight(o)
	}
	heap.Fix(&a.h, 0)
}

// join moves the objects of it that are not on its home there: with paced
// false, only the unlabelled ones that cannot wait; with paced true, the
// others.
func (a *assigner) join(it item, paced bool) {
	added := 0
	for _, i := range a.r.movers(it.u, it.home) {
		o := a.r.objs[i]
		if (o.Shard != "" || o.Paced) != paced {
			continue
		}
		a.moves = append(a.moves, Move{Key: o.Key, From: o.Shard, To: it.home, Reason: a.r.reason(o), Paced: paced})
		added += weight(o)
	}
	for j := range a.h {
		if a.h[j].name == it.home {
			a.h[j].load += added
			heap.Fix(&a.h, j)
			return
		}
	}
}

// rebalance moves units from heavy targets to the lightest one until the
// spread is within threshold, the budget is spent or no move narrows it.
// cands holds, per target, the units rebalance may move; units moved in
// this round are never in it, so no object moves twice.
func (r *round) rebalance(loads map[string]int, cands map[string][]item, threshold int, p *pacer) []Move {
	// Lightest first, ties by key: a binary search on weight then finds the
	// first key of a weight.
	for t, c := range cands {
		slices.SortStableFunc(c, func(a, b item) int { return cmp.Compare(a.weight, b.weight) })
		cands[t] = c
	}
	order := slices.Clone(r.targets)
	var moves []Move
	for p.budget > 0 {
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
		// only pinned or cooling units, the next one may still narrow the
		// spread instead of rebalancing stopping for good.
		moved := false
		for _, from := range order {
			diff := loads[from] - loads[lightest]
			if diff <= threshold {
				break
			}
			j, ok := r.pick(cands[from], diff, p)
			if !ok {
				continue
			}
			it := cands[from][j]
			p.take(r.cost(it))
			for _, i := range r.movers(it.u, "") {
				moves = append(moves, Move{Key: r.objs[i].Key, From: from, To: lightest, Reason: Rebalance, Paced: true})
			}
			loads[from] -= it.weight
			loads[lightest] += it.weight
			cands[from] = slices.Delete(cands[from], j, j+1)
			moved = true
			break
		}
		if !moved {
			break
		}
	}
	return moves
}

// pick returns the position in c (sorted by weight, then key) of the unit
// whose move narrows a spread of diff the most, among those the budget
// allows: the heaviest with w <= diff/2, else the lightest with w < diff.
// Any move of w < diff lowers the sum of squared loads, so repeated picks
// always end.
func (r *round) pick(c []item, diff int, p *pacer) (int, bool) {
	var fit []int
	for j, it := range c {
		if p.fits(r.cost(it)) {
			fit = append(fit, j)
		}
	}
	w := func(k int) int { return c[fit[k]].weight }
	above := sort.Search(len(fit), func(k int) bool { return w(k) > diff/2 })
	if above > 0 {
		best := w(above - 1)
		return fit[sort.Search(above, func(k int) bool { return w(k) >= best })], true
	}
	if len(fit) > 0 && w(0) < diff {
		return fit[0], true
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
