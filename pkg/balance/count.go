package balance

import (
	"cmp"
	"math/bits"
)

// ShardCount returns the number of shards `shards: auto` wants. current is the
// number that exist now (0 at first), objects the load to place, perShard
// the target load per shard (values < 1 count as 1), min and max the bounds
// (min is at least 1, max <= 0 means no upper bound, a max below min yields
// to min).
//
// At first the answer is ceil(objects/perShard), clamped. Afterwards it only
// changes when objects > 1.2*perShard*current (grow) or
// objects < 0.6*perShard*current (shrink): the band between keeps a load that
// hovers around a boundary from adding and removing a shard every round, as
// each change relabels objects. Otherwise current is kept, clamped.
func ShardCount(current, objects, perShard, min, max int) int {
	perShard = maxInt(perShard, 1)
	objects = maxInt(objects, 0)
	clamp := func(n int) int {
		if max > 0 && n > max {
			n = max
		}
		return maxInt(n, min, 1)
	}
	want := clamp(objects/perShard + boolInt(objects%perShard != 0))
	if current <= 0 {
		return want
	}
	// objects > 1.2*perShard*current and objects < 0.6*perShard*current,
	// compared as 5*objects against 6 and 3 times the capacity in 128 bits,
	// exact where floats would round at the boundaries.
	hi, capacity := bits.Mul64(uint64(perShard), uint64(current))
	if hi != 0 { // more capacity than any int of objects can fill
		return want
	}
	if mulCompare(5, uint64(objects), 6, capacity) > 0 || mulCompare(5, uint64(objects), 3, capacity) < 0 {
		return want
	}
	return clamp(current)
}

// mulCompare compares a*x with b*y without overflow.
func mulCompare(a, x, b, y uint64) int {
	xh, xl := bits.Mul64(a, x)
	yh, yl := bits.Mul64(b, y)
	return cmp.Or(cmp.Compare(xh, yh), cmp.Compare(xl, yl))
}

// maxInt is the builtin max; Count's parameters shadow it.
func maxInt(a int, rest ...int) int {
	for _, b := range rest {
		a = max(a, b)
	}
	return a
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
