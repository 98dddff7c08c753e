package mover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/shardkeeper/shardkeeper/pkg/balance"
	"github.com/shardkeeper/shardkeeper/pkg/metrics"
	"github.com/shardkeeper/shardkeeper/pkg/placement"
	"github.com/shardkeeper/shardkeeper/pkg/plan"
	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
	"github.com/shardkeeper/shardkeeper/pkg/source"
	"github.com/shardkeeper/shardkeeper/pkg/status"
)

// result is what a round's writes came to.
type result struct {
	// moved counts the relabels done, by reason; to by shard they went to.
	moved map[balance.Reason]int
	to    map[string]int
	// from counts the drained objects by the shard they left; down the
	// failed-over ones.
	from, down map[string]int
	// paced counts the paced moves tried, against the budget.
	paced int
	// conflicts are objects that changed since the cache was read, or whose
	// shard no longer receives objects: the next round decides again from
	// the cache and the shard set's latest decision, never blindly.
	conflicts int
	errs      []error
	// notes say which pins the round's moves followed.
	notes []string
}

func (r result) total() int {
	n := 0
	for _, c := range r.moved {
		n += c
	}
	return n
}

// movePatch is the merge patch that moves o to shard to: the shard label and
// placement's record, with o's resourceVersion as precondition, so that a
// label someone set meanwhile is never overwritten.
func movePatch(o placement.Object, label, to string, now time.Time) ([]byte, error) {
	return json.Marshal(patch(o, label, to, now))
}

func patch(o placement.Object, label, to string, now time.Time) map[string]any {
	return map[string]any{"metadata": map[string]any{
		"resourceVersion": o.ResourceVersion,
		"labels":          map[string]string{label: to},
		"annotations": map[string]string{
			placement.AssignedShardAnnotation: to,
			placement.AssignedAtAnnotation:    now.UTC().Format(time.RFC3339),
		},
	}}
}

// bumpPatch is movePatch that also sets the integer field at path (as
// "spec.forceSyncGeneration") to value. In one write with the label, the
// controller of the new shard is the one that sees the bump: Fleet's gitjob
// then runs `fleet apply` again, which relabels the GitRepo's Bundles.
func bumpPatch(o placement.Object, label, to string, now time.Time, path string, value int64) ([]byte, error) {
	body := patch(o, label, to, now)
	setField(body, strings.Split(path, "."), value)
	return json.Marshal(body)
}

// fullPatch is the patch of a move that read the whole object first
// (full, at the resourceVersion the decision saw): movePatch, plus the
// kind's BumpOnMove field incremented when bump is set, plus the shard
// label in the kind's SpecLabels map when the object may hold that map.
// The label there is what the controller copies onto the objects it
// makes from this one (a HelmRelease's HelmChart, a HelmOp's Bundle), so
// they move in the same write.
func fullPatch(o placement.Object, kind source.MappedKind, to string, now time.Time, full *unstructured.Unstructured, bump bool) ([]byte, error) {
	body := patch(o, kind.Label, to, now)
	if bump {
		path := strings.Split(kind.BumpOnMove, ".")
		v, _, err := unstructured.NestedInt64(full.Object, path...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", kind.BumpOnMove, err)
		}
		setField(body, path, v+1)
	}
	if kind.SpecLabels != "" {
		path := strings.Split(kind.SpecLabels, ".")
		if mayHold(full.Object, path) {
			setField(body, append(path, kind.Label), to)
		}
	}
	return json.Marshal(body)
}

// mayHold reports whether a merge patch may give obj the map at path. Such
// a patch creates every map missing on the way, and a missing field right
// under spec must stay missing: spec.chart and spec.chartRef of a
// HelmRelease are one or the other, and one with spec.chartRef has no
// chart template to label (the API server refuses both at once). So the
// field under spec that the path goes through must exist; deeper maps,
// such as spec.chart.metadata, may be created. A map right under spec
// (a HelmOp's spec.labels) only needs spec.
func mayHold(obj map[string]any, path []string) bool {
	need := path[:min(2, len(path)-1)]
	_, found, err := unstructured.NestedFieldNoCopy(obj, need...)
	return found && err == nil
}

// setField sets the field at path of the patch body to value, creating the
// maps on the way.
func setField(body map[string]any, path []string, value any) {
	m := body
	for _, f := range path[:len(path)-1] {
		next, ok := m[f].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[f] = next
		}
		m = next
	}
	m[path[len(path)-1]] = value
}

// errWithdrawn refuses a write onto a shard that the shard set withdrew
// from placement after the round decided.
var errWithdrawn = errors.New("the shard no longer receives objects")

// apply writes the moves, a few at a time. An object in bumped is bumped as
// it moves.
func (p *Mover) apply(ctx context.Context, moves []balance.Move, index map[string]placement.Object, bumped map[string]bool, now time.Time) result {
	res := result{moved: map[balance.Reason]int{}, to: map[string]int{}, from: map[string]int{}, down: map[string]int{}}
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(writeParallelism)
	for _, m := range moves {
		if m.Paced {
			res.paced++
		}
		o, ok := index[m.Key]
		kind, known := p.kinds[o.Kind]
		if !ok || !known {
			continue
		}
		// The outcome of each move goes into res, never to the group: one
		// failed relabel must not stop or skip the others.
		g.Go(func() error {
			err := p.relabel(ctx, o, kind, m.To, now, bumped[o.Ref()])
			outcome := "moved"
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				res.moved[m.Reason]++
				res.to[m.To]++
				switch m.Reason {
				case balance.Drain:
					res.from[m.From]++
				case balance.Failover:
					res.down[m.From]++
				}
			case apierrors.IsConflict(err) || apierrors.IsNotFound(err) || errors.Is(err, errWithdrawn):
				outcome = "conflict"
				res.conflicts++
			default:
				outcome = "error"
				res.errs = append(res.errs, err)
			}
			metrics.PlacementMoves.WithLabelValues(string(m.Reason), outcome).Inc()
			return nil
		})
	}
	_ = g.Wait() // always nil: the errors are in res.errs
	return res
}

func (p *Mover) relabel(ctx context.Context, o placement.Object, kind source.MappedKind, to string, now time.Time, bump bool) error {
	body, err := p.body(ctx, o, kind, to, now, bump)
	if err != nil {
		return err
	}
	p.gate.RLock()
	defer p.gate.RUnlock()
	if !p.receivers[to] {
		return fmt.Errorf("relabelling %s %s/%s to shard %s: %w", o.Kind, o.Namespace, o.Name, to, errWithdrawn)
	}
	rv, err := p.client.Patch(ctx, kind.Resource, o.Namespace, o.Name, types.MergePatchType, body)
	if err != nil {
		return fmt.Errorf("relabelling %s %s/%s to shard %s: %w", o.Kind, o.Namespace, o.Name, to, err)
	}
	p.writes.Updated(o.Ref(), rv)
	logrus.WithFields(logrus.Fields{"resource": kind.Resource.String(), "object": o.Ref(), "shard": to}).Debug("relabelled")
	return nil
}

// body builds the patch that moves o. A move that bumps a field, or whose
// kind carries the shard label in its spec, reads the whole object first,
// at write time: the caches hold metadata only.
func (p *Mover) body(ctx context.Context, o placement.Object, kind source.MappedKind, to string, now time.Time, bump bool) ([]byte, error) {
	var body []byte
	var err error
	if bump || kind.SpecLabels != "" {
		var full *unstructured.Unstructured
		if full, err = p.read(ctx, o, kind); err != nil {
			return nil, err
		}
		body, err = fullPatch(o, kind, to, now, full, bump)
	} else {
		body, err = movePatch(o, kind.Label, to, now)
	}
	if err != nil {
		return nil, fmt.Errorf("building the patch of %s %s/%s: %w", o.Kind, o.Namespace, o.Name, err)
	}
	return body, nil
}

// read reads the whole object. It must still be the one the decision saw:
// a newer resourceVersion is a conflict, decided again from the cache.
func (p *Mover) read(ctx context.Context, o placement.Object, kind source.MappedKind) (*unstructured.Unstructured, error) {
	full, err := p.reader.Get(ctx, kind.Resource, o.Namespace, o.Name)
	if err != nil {
		return nil, fmt.Errorf("reading %s %s/%s: %w", o.Kind, o.Namespace, o.Name, err)
	}
	if full.GetResourceVersion() != o.ResourceVersion {
		return nil, apierrors.NewConflict(kind.Resource.GroupResource(), o.Name, errors.New("changed since the placement decision"))
	}
	return full, nil
}

// report emits one Event for a round's moves, and one for its errors.
func (p *Mover) report(cm *corev1.ConfigMap, res result) {
	if n := res.total(); n > 0 {
		p.recorder.Event(cm, corev1.EventTypeNormal, status.ReasonObjectsMoved, movedMessage(res))
	}
	if len(res.errs) > 0 {
		err := errors.Join(res.errs[:min(3, len(res.errs))]...)
		p.recorder.Event(cm, corev1.EventTypeWarning, status.ReasonPlacementFailed,
			fmt.Sprintf("%d objects could not be relabelled; retrying: %v", len(res.errs), err))
	}
}

// movedMessage summarises a round: how many objects moved, why, and where.
func movedMessage(res result) string {
	var why []string
	for _, r := range []balance.Reason{balance.Assign, balance.Drain, balance.Failover, balance.Regroup, balance.Rebalance} {
		if n := res.moved[r]; n > 0 {
			why = append(why, fmt.Sprintf("%d %s", n, verbs[r]))
		}
	}
	msg := fmt.Sprintf("placement moved %d objects (%s) to %s", res.total(), strings.Join(why, ", "), counts(res.to))
	if len(res.from) > 0 {
		msg += "; drained from " + counts(res.from)
	}
	if len(res.down) > 0 {
		msg += "; failed over from " + counts(res.down) + ", which is down"
	}
	if res.conflicts > 0 {
		msg += fmt.Sprintf("; %d changed since they were read and are decided again", res.conflicts)
	}
	if len(res.notes) > 0 {
		msg += "; " + strings.Join(res.notes, "; ")
	}
	return msg
}

var verbs = map[balance.Reason]string{balance.Assign: "assigned", balance.Drain: "drained", balance.Failover: "failed over",
	balance.Regroup: "moved to their group's shard", balance.Rebalance: "rebalanced"}

// maxNotes bounds the pins one ObjectsMoved Event names.
const maxNotes = 3

// pinNotes says, for the groups that moves bring to the shard a pin holds
// them on, where and by what they are held: up to maxNotes of them, and
// how many more.
func pinNotes(p shardconfig.Placement, moves []balance.Move, index map[string]placement.Object, holds map[string][]placement.Object) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range moves {
		g := index[m.Key].Group(p)
		h := holds[g]
		if g == "" || seen[g] || !slices.Equal(plan.HoldShards(h), []string{m.To}) {
			continue
		}
		seen[g] = true
		if len(out) < maxNotes {
			out = append(out, plan.HoldMessage(placement.DescribeGroup(g, p), h))
		}
	}
	if len(seen) > maxNotes {
		out = append(out, fmt.Sprintf("%d more pinned groups", len(seen)-maxNotes))
	}
	return out
}

// reportConflicts emits a PinConflict Event for each group held on more
// than one shard, when its conflict appears or changes.
func (p *Mover) reportConflicts(cm *corev1.ConfigMap, settings shardconfig.Placement, holds map[string][]placement.Object) {
	now := map[string]string{}
	for _, g := range slices.Sorted(maps.Keys(holds)) {
		if len(plan.HoldShards(holds[g])) < 2 {
			continue
		}
		now[g] = plan.HoldMessage(placement.DescribeGroup(g, settings), holds[g])
		if p.conflicts[g] != now[g] {
			p.recorder.Event(cm, corev1.EventTypeWarning, status.ReasonPinConflict, now[g])
		}
	}
	p.conflicts = now
}

func counts(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s: %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
