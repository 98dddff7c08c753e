package balance

import (
	"cmp"
	"math/bits"
)

// ShardCount returns the number of shards `shards: auto` wants. current is the
// number that exist now (0 at first), objects the load to place, perShard
// the target load per shard (values < 1 count as 1), least and most the
// bounds (least is at least 1, most <= 0 means no upper bound, a most below
// least yields to least).
//
// At first the answer is ceil(objects/perShard), clamped. Afterwards it only
// changes when objects > 1.2*perShard*current (grow) or
// objects < 0.6*perShard*current (shrink): the band between keeps a load that
// hovers around a boundary from adding and removing a shard every round, as
// each change relabels objects. Otherwise current is kept, clamped.
func ShardCount(current, objects, perShard, least, most int) int {
	perShard = max(perShard, 1)
	objects = max(objects, 0)
	clamp := func(n int) int {
		if most > 0 && n > most {
			n = most
		}
		return max(n, least, 1)
	}
	want := clamp(objects/perShard + boolInt(objects%perShard != 0))
	if current <= 0 {
		return want
	}
	// objects > 1.2*perShard*current and objects < 0.6*perShard*current,
	// compared as 5*objects against 6 and 3 times the capacity in 128 bits,
	// exact where floats would round at the boundaries.
	hi, capacity := bits.Mul64(nonNegative(perShard), nonNegative(current))
	if hi != 0 { // more capacity than any int of objects can fill
		return want
	}
	if mulCompare(5, nonNegative(objects), 6, capacity) > 0 || mulCompare(5, nonNegative(objects), 3, capacity) < 0 {
		return want
	}
	return clamp(current)
}

// nonNegative converts n, which the caller has made >= 0, for unsigned
// arithmetic; a negative n would be a bug, and counts as 0.
func nonNegative(n int) uint64 {
	if n < 0 {
		return 0
	}
	return uint64(n)
}

// mulCompare compares a*x with b*y without overflow.
func mulCompare(a, x, b, y uint64) int {
	xh, xl := bits.Mul64(a, x)
	yh, yl := bits.Mul64(b, y)
	return cmp.Or(cmp.Compare(xh, yh), cmp.Compare(xl, yl))
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
