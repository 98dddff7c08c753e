// Package stamp decides what the chart's MutatingAdmissionPolicy reads to
// label a new object with its shard in its create request, so that it is
// born on its shard instead of being taken by the unsharded controller
// for the seconds until a placement round labels it.
//
// The policy cannot run the daemon's decisions: CEL has no loads, no
// groups and no Deployments to look at. So after every placement round
// the daemon publishes the answers a new object needs, in a ConfigMap the
// policy binds as its parameter: the shard a new object of a group goes
// to, and the shard a new object of no group (or of a group with no
// shard yet) goes to. Both are what the round itself would choose, so
// the policy and the daemon never disagree; an object the policy misses
// (it fails open) is placed by the daemon as before.
//
// The ConfigMap's format is the contract with the policy in
// charts/shardkeeper/templates/stamppolicy.yaml; the Go package is the
// daemon's own: not a supported API, and it may change in any release.
package stamp

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/shardkeeper/shardkeeper/pkg/balance"
	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
)

// Data keys of the stamp ConfigMap. A group's key is its
// placement.Object.Group key itself ("namespace.<ns>", "label.<ns>.<value>"),
// which is a valid data key and cannot meet these.
const (
	// KeyNext is the shard the next new object goes to: the lightest
	// shard that may receive objects. Absent: stamp nothing.
	KeyNext = "next"
	// KeySequence lists, comma-separated, the shards the daemon would give
	// the next SequenceLength new objects one after the other, KeyNext
	// first. A new object of no recorded group takes the entry its
	// name's hash picks, a new group the entry its key's hash picks: a
	// burst created before the next round is spread as the round would
	// spread it, instead of all landing on KeyNext and most of it being
	// moved again.
	KeySequence = "sequence"
	// KeyGroupBy and KeyGroupLabel repeat the grouping setting, so that
	// the policy computes a new object's group key as the daemon does.
	KeyGroupBy    = "groupBy"
	KeyGroupLabel = "groupLabel"
	// KeyGroupedKinds lists, as ",<resource>.<group>,...,", the kinds
	// placed by namespace without a setting (source.MappedKind.GroupByNamespace).
	KeyGroupedKinds = "groupedKinds"
	// KeyNamespaces is placement's namespaces as ",a,b,", absent for all.
	KeyNamespaces = "namespaces"
	// KeySelector is placement's selector as requirements separated by
	// ";", each "<op>|<key>|<value>,<value>" with op one of in, notin,
	// exists and !. Absent: every object.
	KeySelector = "selector"
)

// SequenceLength is the number of entries of KeySequence: with equal
// loads, every shard of up to 64 appears at least once, and a burst's
// share of each follows the daemon's choices over as many objects.
const SequenceLength = 64

// Wait is a group's record when a new object of it must not be stamped:
// its group lives on a shard that takes no objects now (draining, down,
// not Available), or its pins disagree. The object is then created
// unlabelled and waits for the daemon, as without the policy.
const Wait = "-"

// IsShardRecord reports whether the data key k holds a shard ID (or
// Wait): KeyNext, or a group's record.
func IsShardRecord(k string) bool {
	switch k {
	case KeyGroupBy, KeyGroupLabel, KeyGroupedKinds, KeyNamespaces, KeySelector, KeySequence:
		return false
	}
	return true
}

// Withdraw returns data without the shards for which receives is false:
// a group record that names one waits (Wait), and next and the sequence
// go when either names one, so that nothing is stamped onto such a shard
// until Params is published again.
func Withdraw(data map[string]string, receives func(string) bool) map[string]string {
	out := maps.Clone(data)
	for k, v := range data {
		if IsShardRecord(k) && k != KeyNext && v != Wait && !receives(v) {
			out[k] = Wait
		}
	}
	seq := strings.Split(data[KeySequence], ",")
	if next, ok := data[KeyNext]; ok && (!receives(next) || slices.ContainsFunc(seq, func(s string) bool { return s != "" && !receives(s) })) {
		delete(out, KeyNext)
		delete(out, KeySequence)
	}
	return out
}

// MaxBytes bounds the data published: a ConfigMap holds at most 1 MiB.
// Past it, groups are left out, and so is KeyNext, so that a new object
// of a group left out is never stamped onto a shard its group is not on.
const MaxBytes = 900 * 1024

// Params returns the stamp ConfigMap's data after a round: in is the
// round's input and moves what it decided, so the records describe the
// shards as the round leaves them. groupedKinds are the kinds placed by
// namespace without a setting. A disabled placement, or a selector the
// policy cannot evaluate, publishes nothing to stamp with.
func Params(p shardconfig.Placement, in balance.Input, moves []balance.Move, groupedKinds []string) map[string]string {
	if !p.Enabled {
		return map[string]string{}
	}
	selector, ok := encodeSelector(p.Selector)
	if !ok {
		return map[string]string{}
	}
	out := map[string]string{}
	if p.GroupBy != "" {
		out[KeyGroupBy] = p.GroupBy
	}
	if p.GroupLabel != "" {
		out[KeyGroupLabel] = p.GroupLabel
	}
	if len(groupedKinds) > 0 {
		out[KeyGroupedKinds] = "," + strings.Join(slices.Sorted(slices.Values(groupedKinds)), ",") + ","
	}
	if len(p.Namespaces) > 0 {
		out[KeyNamespaces] = "," + strings.Join(p.Namespaces, ",") + ","
	}
	if selector != "" {
		out[KeySelector] = selector
	}
	receiving := receivers(in)
	after := shardsAfter(in.Objects, moves)
	sequence := assignments(in.Objects, after, receiving, SequenceLength)
	known := map[string]bool{}
	for _, s := range slices.Concat(in.Targets, in.Draining, in.FailingOver) {
		known[s] = true
	}
	size := 0
	for k, v := range out {
		size += len(k) + len(v)
	}
	groups := homes(in.Objects, after, receiving, known)
	for _, g := range slices.Sorted(maps.Keys(groups)) {
		if size += len(g) + len(groups[g]); size > MaxBytes {
			return out
		}
		out[g] = groups[g]
	}
	if len(sequence) > 0 {
		out[KeyNext] = sequence[0]
		out[KeySequence] = strings.Join(sequence, ",")
	}
	return out
}

// receivers are the targets that neither drain nor fail over: the only
// shards a round moves objects onto (balance.Moves).
func receivers(in balance.Input) map[string]bool {
	out := map[string]bool{}
	for _, t := range in.Targets {
		out[t] = true
	}
	for _, t := range slices.Concat(in.Draining, in.FailingOver) {
		delete(out, t)
	}
	return out
}

// shardsAfter returns each object's shard once moves are applied, by key.
func shardsAfter(objs []balance.Object, moves []balance.Move) map[string]string {
	out := make(map[string]string, len(objs))
	for _, o := range objs {
		out[o.Key] = o.Shard
	}
	for _, m := range moves {
		out[m.Key] = m.To
	}
	return out
}

// assignments returns the shards that balance would give n new objects of
// weight 1, one after the other, from the loads after the round: each to
// the lightest receiving shard, ties to the first ID. Empty when no shard
// receives.
func assignments(objs []balance.Object, after map[string]string, receiving map[string]bool, n int) []string {
	if len(receiving) == 0 {
		return nil
	}
	load := map[string]int{}
	for _, o := range objs {
		if s := after[o.Key]; receiving[s] {
			load[s] += max(o.Weight, 1)
		}
	}
	shards := slices.Sorted(maps.Keys(receiving))
	out := make([]string, 0, n)
	for range n {
		best := shards[0]
		for _, s := range shards[1:] {
			if load[s] < load[best] {
				best = s
			}
		}
		load[best]++
		out = append(out, best)
	}
	return out
}

// homes returns, per group with a shard after the round, where a new
// object of it goes: the shard a pin holds it on, else the receiving
// shard with most of its weight (ties to the first ID), or Wait when that
// shard receives nothing, pins disagree, or an object of the group is on
// a shard placement leaves alone (one it does not know: balance leaves
// the whole group there). A group none of whose objects
// has a shard has no record: a new object of it goes to KeyNext, and the
// rest of the group joins it (balance's join).
func homes(objs []balance.Object, after map[string]string, receiving, known map[string]bool) map[string]string {
	type tally struct {
		held   map[string]bool
		weight map[string]int
		alone  bool
	}
	groups := map[string]*tally{}
	for _, o := range objs {
		s := after[o.Key]
		if o.Group == "" || s == "" {
			continue
		}
		t := groups[o.Group]
		if t == nil {
			t = &tally{held: map[string]bool{}, weight: map[string]int{}}
			groups[o.Group] = t
		}
		switch {
		case !o.Movable:
			t.held[s] = true
		case !known[s]:
			t.alone = true
		default:
			t.weight[s] += max(o.Weight, 1)
		}
	}
	out := make(map[string]string, len(groups))
	for g, t := range groups {
		if t.alone {
			out[g] = Wait
			continue
		}
		out[g] = home(t.held, t.weight, receiving)
	}
	return out
}

// home decides one group's record, see homes.
func home(held map[string]bool, weight map[string]int, receiving map[string]bool) string {
	switch len(held) {
	case 0:
	case 1:
		for s := range held {
			if receiving[s] {
				return s
			}
		}
		return Wait
	default:
		return Wait
	}
	shards := slices.SortedFunc(maps.Keys(weight), func(a, b string) int {
		return cmp.Or(cmp.Compare(weight[b], weight[a]), cmp.Compare(a, b))
	})
	if len(shards) == 0 || !receiving[shards[0]] {
		return Wait
	}
	return shards[0]
}

// encodeSelector writes sel for the policy, and reports false when CEL
// cannot evaluate it as the daemon does (a numeric comparison).
func encodeSelector(sel labels.Selector) (string, bool) {
	if sel == nil || sel.Empty() {
		return "", true
	}
	reqs, selectable := sel.Requirements()
	if !selectable {
		return "", false
	}
	parts := make([]string, 0, len(reqs))
	for _, r := range reqs {
		op := ""
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			op = "in"
		case selection.NotEquals, selection.NotIn:
			op = "notin"
		case selection.Exists:
			op = "exists"
		case selection.DoesNotExist:
			op = "!"
		default:
			return "", false
		}
		parts = append(parts, op+"|"+r.Key()+"|"+strings.Join(r.ValuesUnsorted(), ","))
	}
	return strings.Join(parts, ";"), true
}
