package mover

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/record"

	"github.com/shardkeeper/shardkeeper/pkg/placement"
	"github.com/shardkeeper/shardkeeper/pkg/stamp"
)

// fakePublisher records what the mover publishes; confirm is what
// Confirm answers, and asked the labels it was asked about.
type fakePublisher struct {
	published []map[string]string
	fail      error
	confirm   error
	asked     [][]string
}

func (f *fakePublisher) Confirm(_ context.Context, labels []string) error {
	f.asked = append(f.asked, labels)
	return f.confirm
}

func (f *fakePublisher) Publish(_ context.Context, data map[string]string) error {
	if f.fail != nil {
		return f.fail
	}
	f.published = append(f.published, maps.Clone(data))
	return nil
}

func (f *fakePublisher) last() map[string]string {
	if len(f.published) == 0 {
		return nil
	}
	return f.published[len(f.published)-1]
}

func TestRoundPublishesWhereNewObjectsAreBorn(t *testing.T) {
	c := newFakeCluster(gitrepo("placed", "a"), gitrepo("new", ""))
	clock := t0
	p := testMover(c, record.NewFakeRecorder(10), &clock)
	pub := &fakePublisher{}
	p.Stamp(pub)

	p.Set(placement.State{ConfigMap: shardCM, Placement: parsePlacement(t, ""), Targets: []string{"a", "b", "c"}, Draining: []string{"c"}})
	p.round(context.Background())
	// "new" goes to b this round, so a and b hold one each: the next new
	// object goes to a, the first ID. c is empty, but draining.
	assert.Equal(t, "a", pub.last()[stamp.KeyNext])
	assert.True(t, strings.HasPrefix(pub.last()[stamp.KeySequence], "a,b,a,b,"), pub.last()[stamp.KeySequence])
	assert.Equal(t, map[string]string{"gitrepos apps/new": "b"}, shardsOf(c.takePatches(t)))

	p.Set(placement.State{ConfigMap: shardCM})
	p.round(context.Background())
	assert.Empty(t, pub.last(), "placement off: nothing to stamp with")
	assert.Len(t, pub.published, 2)
}

func shardsOf(patches map[string]patchCall) map[string]string {
	out := map[string]string{}
	for ref, call := range patches {
		out[ref] = call.shard()
	}
	return out
}

func TestRestrictWithdrawsShardsFromTheStampRecords(t *testing.T) {
	c := newFakeCluster()
	clock := t0
	p := testMover(c, record.NewFakeRecorder(10), &clock)
	pub := &fakePublisher{}
	p.Stamp(pub)
	p.Set(placement.State{ConfigMap: shardCM, Placement: parsePlacement(t, ""), Targets: []string{"a", "b"}})
	records := map[string]string{stamp.KeyNext: "b", stamp.KeySequence: "b,a", "namespace.x": "b", "namespace.y": "a", stamp.KeyGroupBy: "namespace"}
	p.stamped = records

	require.NoError(t, p.Restrict(context.Background(), []string{"a", "b"}, false))
	assert.Equal(t, records, pub.last(), "nothing withdrawn: the records as they were (the publisher writes only changes)")

	require.NoError(t, p.Restrict(context.Background(), []string{"a"}, false))
	assert.Equal(t, map[string]string{"namespace.x": stamp.Wait, "namespace.y": "a", stamp.KeyGroupBy: "namespace"}, pub.last(),
		"before Restrict returns, no new object is stamped onto b: its group waits, and one of no group is not stamped")

	// A round that decided before the withdrawal publishes after it: the
	// withdrawn shard stays out.
	require.NoError(t, p.publish(context.Background(), map[string]string{stamp.KeyNext: "b", stamp.KeySequence: "b,a", "namespace.z": "b"}))
	assert.Equal(t, map[string]string{"namespace.z": stamp.Wait}, pub.last())

	pub.fail = errors.New("refused")
	require.ErrorContains(t, p.Restrict(context.Background(), []string{}, false), "refused", "the shard set learns that the withdrawal is not written")
	assert.Equal(t, map[string]string{"namespace.z": stamp.Wait}, p.stamped, "a failed write leaves what was published as it was")
	assert.Empty(t, pub.asked, "without confirm, the policy is not asked")
}

// A removal waits until the policy of every placed kind's shard label
// applies the withdrawal; the answer, good or bad, reaches the shard set.
func TestRestrictConfirmsTheWithdrawalWithThePolicies(t *testing.T) {
	c := newFakeCluster()
	clock := t0
	p := testMover(c, record.NewFakeRecorder(10), &clock)
	pub := &fakePublisher{confirm: errors.New("still applies resourceVersion 7")}
	p.Stamp(pub)
	p.Set(placement.State{ConfigMap: shardCM, Placement: parsePlacement(t, ""), Targets: []string{"a", "b"}})

	require.ErrorContains(t, p.Restrict(context.Background(), []string{"a"}, true), "resourceVersion 7")
	assert.Equal(t, [][]string{{"fleet.cattle.io/shard-ref"}}, pub.asked, "one policy per shard label of the placed kinds")

	pub.confirm = nil
	require.NoError(t, p.Restrict(context.Background(), []string{"a"}, true))
}

// hangingPublisher's writes never return on their own: only their
// context's deadline ends them.
type hangingPublisher struct{ started chan struct{} }

func (h *hangingPublisher) Confirm(context.Context, []string) error { return nil }

func (h *hangingPublisher) Publish(ctx context.Context, _ map[string]string) error {
	select {
	case h.started <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return ctx.Err()
}

// A stamp write that hangs in a round must not hold the shard set's
// reconcile: Restrict returns, with the reason, once its own write's
// deadline has passed.
func TestAHungStampWriteDoesNotStallRestrict(t *testing.T) {
	c := newFakeCluster(gitrepo("new", ""))
	clock := t0
	p := testMover(c, record.NewFakeRecorder(10), &clock)
	p.stampTimeout = 100 * time.Millisecond
	pub := &hangingPublisher{started: make(chan struct{}, 1)}
	p.Stamp(pub)
	p.Set(placement.State{ConfigMap: shardCM, Placement: parsePlacement(t, ""), Targets: []string{"a", "b"}})

	go p.round(context.Background())
	<-pub.started

	returned := make(chan error)
	go func() { returned <- p.Restrict(context.Background(), []string{"a"}, false) }()
	select {
	case err := <-returned:
		require.ErrorIs(t, err, context.DeadlineExceeded, "the withdrawal's own write hung too, and says so")
	case <-time.After(time.Minute):
		t.Fatal("Restrict is still held by a round's stamp write that hangs")
	}
}

// An object the policy stamped onto a shard that was deleted meanwhile
// (the plan drains unknown IDs) goes to a target; one labelled by hand
// stays.
func TestRoundTakesBackAnObjectBornOnADeletedShard(t *testing.T) {
	c := newFakeCluster(gitrepo("born", "gone"),
		placement.Object{Kind: "gitrepos", Namespace: "apps", Name: "typo", ResourceVersion: "5", Shard: "gone", Labelled: true})
	clock := t0
	p := testMover(c, record.NewFakeRecorder(10), &clock)
	p.Set(placement.State{ConfigMap: shardCM, Placement: parsePlacement(t, ""), Targets: []string{"a"}, Draining: []string{"gone"}, Shards: []string{"a"}})

	p.round(context.Background())

	assert.Equal(t, map[string]string{"gitrepos apps/born": "a"}, shardsOf(c.takePatches(t)))
}

func TestRoundPublishesAForeignPinOnlyForItsOwnNamespace(t *testing.T) {
	c := newFakeCluster(tenantRepo("acme", "app-1", "a", false), tenantRepo("acme", "app-2", "a", false),
		tenantRepo("mallory", "x", "b", true), tenantRepo("mallory", "y", "c", true))
	clock := t0
	p := testMover(c, record.NewFakeRecorder(10), &clock)
	pub := &fakePublisher{}
	p.Stamp(pub)
	p.Set(placement.State{ConfigMap: shardCM, Placement: parsePlacement(t, "groupBy: label\ngroupLabel: example.com/tenant"),
		Targets: []string{"a", "b", "c"}, Shards: []string{"a", "b", "c"}})
	p.round(context.Background())
	assert.Empty(t, c.takePatches(t))
	groups := map[string]string{}
	for k, v := range pub.last() {
		if strings.HasPrefix(k, "label.") {
			groups[k] = v
		}
	}
	assert.Equal(t, map[string]string{"label.acme.acme": "a", "label.mallory.acme": stamp.Wait}, groups,
		"a new object of acme's is born on acme's shard; mallory's pins decide only for mallory's namespace")
}
