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
	"github.com/shardkeeper/shardkeeper/pkg/mapped"
	"github.com/shardkeeper/shardkeeper/pkg/metrics"
	"github.com/shardkeeper/shardkeeper/pkg/placement"
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
			mapped.AssignedShardAnnotation: to,
			mapped.AssignedAtAnnotation:    now.UTC().Format(time.RFC3339),
		},
	}}
}

// bumpPatch is Patch that also sets the integer field at path (as
// "spec.forceSyncGeneration") to value. In one write with the label, the
// controller of the new shard is the one that sees the bump: Fleet's gitjob
// then runs `fleet apply` again, which relabels the GitRepo's Bundles.
func bumpPatch(o placement.Object, label, to string, now time.Time, path string, value int64) ([]byte, error) {
	body := patch(o, label, to, now)
	fields := strings.Split(path, ".")
	m := body
	for _, f := range fields[:len(fields)-1] {
		next, ok := m[f].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[f] = next
		}
		m = next
	}
	m[fields[len(fields)-1]] = value
	return json.Marshal(body)
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
	body, err := movePatch(o, kind.Label, to, now)
	if bump {
		var value int64
		if value, err = p.bumped(ctx, o, kind); err != nil {
			return err
		}
		body, err = bumpPatch(o, kind.Label, to, now, kind.BumpOnMove, value)
	}
	if err != nil {
		return fmt.Errorf("building the patch of %s %s/%s: %w", o.Kind, o.Namespace, o.Name, err)
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

// bumped reads the object's BumpOnMove field and returns it plus one. The
// object must still be the one the decision saw: a newer resourceVersion is
// a conflict, decided again from the cache.
func (p *Mover) bumped(ctx context.Context, o placement.Object, kind source.MappedKind) (int64, error) {
	full, err := p.reader.Get(ctx, kind.Resource, o.Namespace, o.Name)
	if err != nil {
		return 0, fmt.Errorf("reading %s %s/%s: %w", o.Kind, o.Namespace, o.Name, err)
	}
	if full.GetResourceVersion() != o.ResourceVersion {
		return 0, apierrors.NewConflict(kind.Resource.GroupResource(), o.Name, errors.New("changed since the placement decision"))
	}
	v, _, err := unstructured.NestedInt64(full.Object, strings.Split(kind.BumpOnMove, ".")...)
	if err != nil {
		return 0, fmt.Errorf("%s %s/%s: %s: %w", o.Kind, o.Namespace, o.Name, kind.BumpOnMove, err)
	}
	return v + 1, nil
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
	for _, r := range []balance.Reason{balance.Assign, balance.Drain, balance.Failover, balance.Rebalance} {
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
	return msg
}

var verbs = map[balance.Reason]string{balance.Assign: "assigned", balance.Drain: "drained", balance.Failover: "failed over",
	balance.Rebalance: "rebalanced"}

func counts(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s: %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
