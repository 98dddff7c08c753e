// Package mover carries out automatic placement: in rounds, it asks
// pkg/balance which mapped objects get which shard label and writes those
// labels, paced, with each object's resourceVersion as precondition. Which
// shards may receive objects and which are draining comes from the shard
// set's reconcile (a placement.State), so the two never disagree.
//
// It is the daemon's own: not a supported API, and it may change in any
// release.
package mover

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/record"

	"github.com/shardkeeper/shardkeeper/pkg/balance"
	"github.com/shardkeeper/shardkeeper/pkg/expect"
	"github.com/shardkeeper/shardkeeper/pkg/placement"
	"github.com/shardkeeper/shardkeeper/pkg/plan"
	"github.com/shardkeeper/shardkeeper/pkg/source"
	"github.com/shardkeeper/shardkeeper/pkg/stamp"
)

// minRoundGap is the least time between two rounds: a burst of new objects
// arrives as many cache changes, and one round places them all.
const minRoundGap = time.Second

// retryAfter is when a round that met conflicts or errors runs again; the
// caches have caught up by then.
const retryAfter = 2 * time.Second

// stampTimeout bounds each write of the stamp records, a round's and a
// withdrawal's, and a withdrawal's confirmation: the shard set waits for
// a withdrawal before it deletes a shard, and must not wait on a write
// that hangs.
const stampTimeout = 10 * time.Second

// writeParallelism bounds the relabels in flight; the client's rate
// limiter paces them further.
const writeParallelism = 8

// objectCache is what the mover reads of the mapped-object caches.
type objectCache interface {
	// Synced reports whether every mapped kind is cached.
	Synced() bool
	// All returns every cached object, labelled or not.
	All() []placement.Object
}

// patcher is the one write the mover makes: a patch of one object. It is
// this narrow so that tests can record the writes of whole rounds without a
// control plane; in the daemon it is the metadata client (metadataPatcher),
// which sends the patch without decoding the whole object back.
type patcher interface {
	// Patch returns the patched object's new resourceVersion.
	Patch(ctx context.Context, resource schema.GroupVersionResource, namespace, name string, pt types.PatchType, body []byte) (string, error)
}

// reader is the one read of a whole object the mover makes, for the field
// a move bumps. It is narrow for the same reason as patcher; in the daemon
// it is the dynamic client (dynamicReader).
type reader interface {
	Get(ctx context.Context, resource schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error)
}

// metadataPatcher patches through the metadata client.
type metadataPatcher struct{ client metadata.Interface }

func (m metadataPatcher) Patch(ctx context.Context, resource schema.GroupVersionResource, namespace, name string, pt types.PatchType, body []byte) (string, error) {
	out, err := m.client.Resource(resource).Namespace(namespace).Patch(ctx, name, pt, body, metav1.PatchOptions{})
	if err != nil {
		return "", err
	}
	return out.ResourceVersion, nil
}

// dynamicReader reads through the dynamic client: the metadata client
// returns no spec.
type dynamicReader struct{ client dynamic.Interface }

func (d dynamicReader) Get(ctx context.Context, resource schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	return d.client.Resource(resource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
}

// publisher writes what the admission policy reads to stamp a new
// object's shard (pkg/stamp); the daemon's is a stamp.Publisher.
type publisher interface {
	Publish(ctx context.Context, data map[string]string) error
	Confirm(ctx context.Context, labels []string) error
}

// Mover relabels mapped objects. It runs only on the leader.
type Mover struct {
	client patcher
	// reader reads whole objects, for the kinds whose move bumps a field.
	reader reader
	kinds  map[string]source.MappedKind
	// ownerLabels are the derived kinds' OwnerLabel, by kind name.
	ownerLabels map[string]string
	objects     objectCache
	recorder    record.EventRecorder
	now         func() time.Time
	wake        chan struct{}
	// writes are the relabels that the mapped caches have not shown yet:
	// a round waits for them rather than decide on the labels before.
	writes *expect.Writes

	mu    sync.Mutex
	state placement.State
	// window paces the paced moves (balance.Move.Paced): at most MaxMoves
	// of them per Interval.
	windowStart time.Time
	windowMoves int

	// gate guards receivers, the shards a write may label objects onto at
	// the moment it is sent, which may have changed since its round
	// decided. Every write holds it for reading, so that Set and Restrict,
	// which hold it for writing, return only once no write onto a shard
	// they withdrew is in flight.
	gate      sync.RWMutex
	receivers map[string]bool

	// stamp, when set, publishes after every round what the admission
	// policy needs to label new objects as the round would; grouped are
	// the kinds placed by namespace without a setting.
	stamp   publisher
	grouped []string
	// stampLabels are the shard labels of the placed kinds: one policy
	// stamps each, and each is asked before a removal (publisher.Confirm).
	stampLabels []string
	// stamped is the data last written to stamp; only write touches it,
	// under stampMu, which also makes the writes one at a time.
	stampMu sync.Mutex
	stamped map[string]string
	// stampTimeout is the constant of that name; tests shorten it.
	stampTimeout time.Duration

	// conflicts are the PinConflict messages last reported, by namespace,
	// so that a conflict is reported when it appears or changes, not every
	// round. Only round touches it.
	conflicts map[string]string
}

// New returns a Mover for the mapped kinds. Derived kinds are never
// moved: they follow the objects they are made from.
func New(client metadata.Interface, reader dynamic.Interface, kinds []source.MappedKind, objects objectCache, recorder record.EventRecorder) *Mover {
	return newMover(metadataPatcher{client}, dynamicReader{reader}, kinds, objects, recorder)
}

// newMover is New for any patcher and reader, so that tests can pass
// recording fakes.
func newMover(client patcher, full reader, kinds []source.MappedKind, objects objectCache, recorder record.EventRecorder) *Mover {
	p := &Mover{client: client, reader: full, kinds: map[string]source.MappedKind{}, ownerLabels: map[string]string{},
		objects: objects, recorder: recorder, now: time.Now, wake: make(chan struct{}, 1), writes: expect.New(expect.DefaultTTL),
		stampTimeout: stampTimeout}
	for _, k := range kinds {
		switch {
		case !k.Derived:
			p.kinds[k.Name()] = k
			if !slices.Contains(p.stampLabels, k.Label) {
				p.stampLabels = append(p.stampLabels, k.Label)
			}
			if k.GroupByNamespace {
				p.grouped = append(p.grouped, k.CRDName())
			}
		case k.OwnerLabel != "":
			p.ownerLabels[k.Name()] = k.OwnerLabel
		}
	}
	return p
}

// Stamp makes the mover publish, after every round, what the chart's
// MutatingAdmissionPolicy reads to label new objects at their create
// (pkg/stamp). Call it before Run.
func (p *Mover) Stamp(pub publisher) { p.stamp = pub }

// publish hands the stamp records to the publisher, without the shards
// that receive no objects at the moment of the write: a round decided
// before Set or Restrict withdrew a shard must not put it back. The writes
// go out one at a time (stampMu), each withdrawing what the gate says then,
// so the last one written never names a withdrawn shard; none holds the
// gate, so a write that hangs holds no relabel and no Restrict for longer
// than the publisher's deadline. A failure is returned, and the next round
// writes the records again.
func (p *Mover) publish(ctx context.Context, data map[string]string) error {
	return p.write(ctx, func() map[string]string { return data })
}

// write publishes the records that records returns, called under stampMu.
func (p *Mover) write(ctx context.Context, records func() map[string]string) error {
	if p.stamp == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.stampTimeout)
	defer cancel()
	p.stampMu.Lock()
	defer p.stampMu.Unlock()
	data := records()
	p.gate.RLock()
	data = stamp.Withdraw(data, func(id string) bool { return p.receivers[id] })
	p.gate.RUnlock()
	if err := p.stamp.Publish(ctx, data); err != nil {
		logrus.WithError(err).Warn("publishing the shards new objects are born on")
		return err
	}
	p.stamped = data
	return nil
}

// cachesBehind reports whether a relabel of this process is not yet in the
// mapped caches, whose objects index holds by Ref: a round decided now would
// count its object on the shard it left, and move it again.
func (p *Mover) cachesBehind(index map[string]placement.Object) bool {
	return p.writes.Behind(func(key string) expect.Cached {
		o, ok := index[key]
		return expect.Cached{ResourceVersion: o.ResourceVersion, Exists: ok}
	}, logrus.WithField("caches", "mapped objects"))
}

// Set records the latest state and asks for a round if it changed; a
// change of the objects wakes the mover through Wake.
func (p *Mover) Set(st placement.State) {
	p.gate.Lock()
	p.receivers = receiving(st)
	p.gate.Unlock()
	p.mu.Lock()
	changed := !sameState(p.state, st)
	p.state = st
	p.mu.Unlock()
	if changed {
		p.Wake()
	}
}

// Restrict keeps, of the shards objects may be labelled onto, only those
// among targets, and returns once no write onto another is in flight: a
// relabel onto such a shard has then either completed, and the API
// server shows it, or is not sent. It also withdraws the others from the
// stamp records. With confirm, it returns nil only once the API server's
// admission policy applies that withdrawal, so that no new object is
// born on a shard it withdrew; otherwise the error says what is not in
// force yet. The shard set calls it with its new decision before it asks
// the API server whether a shard it deletes is empty, confirming when it
// deletes one.
func (p *Mover) Restrict(ctx context.Context, targets []string, confirm bool) error {
	withdrawn := func(id string) bool { return !slices.Contains(targets, id) }
	p.gate.Lock()
	maps.DeleteFunc(p.receivers, func(id string, _ bool) bool { return withdrawn(id) })
	p.gate.Unlock()
	p.mu.Lock()
	p.state.Targets = slices.DeleteFunc(slices.Clone(p.state.Targets), withdrawn)
	p.mu.Unlock()
	if p.stamp == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*p.stampTimeout)
	defer cancel()
	if err := p.write(ctx, func() map[string]string { return p.stamped }); err != nil {
		return fmt.Errorf("withdrawing shards from the stamp records: %w", err)
	}
	if !confirm {
		return nil
	}
	return p.stamp.Confirm(ctx, p.stampLabels)
}

// sameState compares what a round reads; the ConfigMap by version.
func sameState(a, b placement.State) bool {
	if (a.ConfigMap == nil) != (b.ConfigMap == nil) ||
		(a.ConfigMap != nil && a.ConfigMap.ResourceVersion != b.ConfigMap.ResourceVersion) {
		return false
	}
	return slices.Equal(a.Targets, b.Targets) && slices.Equal(a.Draining, b.Draining) &&
		slices.Equal(a.FailingOver, b.FailingOver) && slices.Equal(a.Shards, b.Shards) && a.Served == b.Served &&
		reflect.DeepEqual(a.FailingKinds, b.FailingKinds) && reflect.DeepEqual(a.Placement, b.Placement)
}

// carried returns the paced moves that a new window starts with: those
// that the windows since, elapsed ago, went over maxMoves by. Only a group
// bigger than maxMoves, which moves alone in a fresh window, goes over; it
// then leaves the windows after it with less, so that the pace holds over
// time.
func carried(spent, maxMoves int, elapsed, interval time.Duration) int {
	if maxMoves <= 0 || interval <= 0 {
		return 0
	}
	windows := int64(elapsed / interval)
	if windows >= int64(spent) {
		return 0
	}
	return max(spent-maxMoves*int(windows), 0)
}

// Wake asks for a round, for instance because a mapped object changed.
func (p *Mover) Wake() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Run runs rounds until ctx ends: when woken, and every Interval while
// placement is on (a cool-down that ran out wakes nothing else).
func (p *Mover) Run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-timer.C:
		}
		next := p.round(ctx)
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(next)
		select {
		case <-ctx.Done():
			return
		case <-time.After(minRoundGap):
		}
	}
}

// round runs one placement round and returns when the next is due.
func (p *Mover) round(ctx context.Context) time.Duration {
	p.mu.Lock()
	st := p.state
	now := p.now()
	if elapsed := now.Sub(p.windowStart); elapsed >= st.Placement.Interval {
		p.windowStart, p.windowMoves = now, carried(p.windowMoves, st.Placement.MaxMoves, elapsed, st.Placement.Interval)
	}
	budget := st.Placement.MaxMoves - p.windowMoves
	fresh := p.windowMoves == 0
	windowLeft := st.Placement.Interval - now.Sub(p.windowStart)
	p.mu.Unlock()

	if !st.Placement.Enabled {
		_ = p.publish(ctx, map[string]string{}) // logged; the next round writes again
		return time.Hour
	}
	if !p.objects.Synced() || st.ConfigMap == nil {
		return retryAfter
	}
	objs := p.objects.All()
	bumped := p.bumping(objs)
	in, index := input(st, objs, now, max(budget, 0), fresh, bumped)
	if p.cachesBehind(index) {
		return minRoundGap
	}
	holds := plan.GroupHolds(st.Placement, objs)
	p.reportConflicts(st.ConfigMap, st.Placement, holds)
	moves := balance.Moves(in)
	// Before the writes: a new object of a group that moves is born where
	// the group goes.
	_ = p.publish(ctx, stamp.Params(st.Placement, in, moves, p.grouped)) // logged; the next round writes again
	if len(moves) == 0 {
		return st.Placement.Interval
	}
	res := p.apply(ctx, moves, index, bumped, now)
	res.notes = pinNotes(st.Placement, moves, index, holds)
	p.mu.Lock()
	p.windowMoves += res.paced
	p.mu.Unlock()
	p.report(st.ConfigMap, res)
	logrus.WithFields(logrus.Fields{
		"configmap": st.ConfigMap.Namespace + "/" + st.ConfigMap.Name,
		"moved":     res.moved,
		"conflicts": res.conflicts,
		"errors":    len(res.errs), // a count; the errors themselves are in the PlacementFailed Event
	}).Info("placement round")
	switch {
	case res.conflicts > 0 || len(res.errs) > 0:
		return retryAfter
	case res.paced >= budget:
		return max(windowLeft, minRoundGap)
	default:
		return st.Placement.Interval
	}
}
