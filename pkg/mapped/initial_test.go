package mapped

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	validation "k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/shardkeeper/shardkeeper/pkg/wire"
)

// fakeAPI answers a list-watch as an API server would: a watch with
// sendInitialEvents gets the next of streams, a plain watch the next of
// watches, and a list the next of pages. It records every request.
type fakeAPI struct {
	mu       sync.Mutex
	streams  []func() (watch.Interface, error)
	watches  []*watch.FakeWatcher
	pages    []*metav1.PartialObjectMetadataList
	requests []metav1.ListOptions
	lists    int
}

func (f *fakeAPI) lw() *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.requests = append(f.requests, o)
			f.lists++
			if len(f.pages) == 0 {
				return nil, apierrors.NewServiceUnavailable("no page left")
			}
			p := f.pages[0]
			f.pages = f.pages[1:]
			return p, nil
		},
		WatchFuncWithContext: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.requests = append(f.requests, o)
			if o.SendInitialEvents != nil && *o.SendInitialEvents {
				if len(f.streams) == 0 {
					return nil, apierrors.NewServiceUnavailable("no stream left")
				}
				s := f.streams[0]
				f.streams = f.streams[1:]
				return s()
			}
			if len(f.watches) == 0 {
				return nil, apierrors.NewServiceUnavailable("no watch left")
			}
			w := f.watches[0]
			f.watches = f.watches[1:]
			return w, nil
		},
	}
}

// stream is a watch that sends events and then stays open.
func stream(events ...watch.Event) func() (watch.Interface, error) {
	return func() (watch.Interface, error) {
		w := watch.NewFakeWithChanSize(len(events), false)
		for _, e := range events {
			w.Action(e.Type, e.Object)
		}
		return w, nil
	}
}

func refused(err error) func() (watch.Interface, error) {
	return func() (watch.Interface, error) { return nil, err }
}

func bookmark(rv string, end bool) watch.Event {
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv}}
	if end {
		m.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: "true"}
	}
	return watch.Event{Type: watch.Bookmark, Object: m}
}

func added(name, shard string) watch.Event {
	return watch.Event{Type: watch.Added, Object: obj("a", name, shard, false)}
}

// page is a page of a list of objects on shard s1.
func page(rv, cont string, names ...string) *metav1.PartialObjectMetadataList {
	p := &metav1.PartialObjectMetadataList{ListMeta: metav1.ListMeta{ResourceVersion: rv, Continue: cont}}
	for _, n := range names {
		p.Items = append(p.Items, *obj("a", n, "s1", false))
	}
	return p
}

func listRV(t *testing.T, got runtime.Object) string {
	t.Helper()
	list, ok := got.(*metav1.PartialObjectMetadataList)
	require.True(t, ok, "a %T", got)
	assert.Empty(t, list.Items, "the objects went to the store")
	return list.ResourceVersion
}

func TestInitialSyncStreams(t *testing.T) {
	api := &fakeAPI{streams: []func() (watch.Interface, error){stream(
		added("r1", "s1"), added("r2", "s1"), bookmark("7", false), added("r3", "s2"), bookmark("9", true), added("late", "s3"))}}
	changes := 0
	s := newShardIndex("gitrepos", label, false, func() { changes++ })
	require.NoError(t, s.Replace([]any{obj("a", "old", "s9", false)}, "1"))
	l := wire.InitialSync(api.lw(), s, wire.Reading{PageSize: 2})

	got, err := l.ListWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "0", Limit: 500})
	require.NoError(t, err)
	assert.Equal(t, "9", listRV(t, got), "the state's resourceVersion is the bookmark's that ends it")
	require.Len(t, api.requests, 1)
	o := api.requests[0]
	assert.Empty(t, o.ResourceVersion, "\"0\" (any state) streams the most recent")
	assert.Equal(t, metav1.ResourceVersionMatchNotOlderThan, o.ResourceVersionMatch)
	assert.True(t, o.AllowWatchBookmarks)
	require.NotNil(t, o.TimeoutSeconds)
	assert.Equal(t, 1, s.count("s9"), "the old content stays until the state is complete")
	assert.Equal(t, 1, changes)

	require.NoError(t, s.Replace(nil, "9"))
	assert.Equal(t, 2, s.count("s1"))
	assert.Equal(t, 1, s.count("s2"))
	assert.Equal(t, 0, s.count("s9"))
	assert.Equal(t, 0, s.count("s3"), "an event after the bookmark belongs to the watch that follows")
	assert.Equal(t, 2, changes)
	assert.Nil(t, s.pending)
}

func TestInitialSyncPagesWhereTheServerDoesNotStream(t *testing.T) {
	for name, err := range map[string]error{
		"invalid": apierrors.NewInvalid(schema.GroupKind{Group: "meta.k8s.io", Kind: "ListOptions"}, "",
			validation.ErrorList{validation.Forbidden(validation.NewPath("sendInitialEvents"), "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled")}),
		"bad request": apierrors.NewBadRequest("sendInitialEvents is not supported"),
	} {
		t.Run(name, func(t *testing.T) {
			api := &fakeAPI{streams: []func() (watch.Interface, error){refused(err)},
				pages: []*metav1.PartialObjectMetadataList{page("5", "next", "r1", "r2"), page("6", "", "r3")}}
			s := newShardIndex("gitrepos", label, false, func() {})
			l := wire.InitialSync(api.lw(), s, wire.Reading{PageSize: 2})

			got, err := l.ListWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "0"})
			require.NoError(t, err)
			assert.Equal(t, "5", listRV(t, got), "every page is of the first page's snapshot")
			require.Len(t, api.requests, 3)
			assert.Equal(t, metav1.ListOptions{Limit: 2}, api.requests[1], "the first page from the most recent state")
			assert.Equal(t, metav1.ListOptions{Limit: 2, Continue: "next"}, api.requests[2])
			require.NoError(t, s.Replace(nil, "5"))
			assert.Equal(t, 3, s.count("s1"))
		})
	}
}

func TestInitialSyncFailureKeepsTheContent(t *testing.T) {
	expired := &metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old"}
	closed := func() (watch.Interface, error) {
		w := watch.NewFakeWithChanSize(1, false)
		w.Add(obj("a", "r1", "s1", false))
		w.Stop()
		return w, nil
	}
	for name, c := range map[string]struct {
		stream func() (watch.Interface, error)
		err    string
	}{
		"error event": {stream(added("r1", "s1"), watch.Event{Type: watch.Error, Object: expired}), "too old"},
		"deletion":    {stream(added("r1", "s1"), watch.Event{Type: watch.Deleted, Object: obj("a", "r1", "s1", false)}), "deletion"},
		"closed":      {closed, "ended before"},
		"refused":     {refused(apierrors.NewForbidden(schema.GroupResource{Resource: "gitrepos"}, "", nil)), "forbidden"},
		"wrong kind":  {stream(watch.Event{Type: watch.Added, Object: &metav1.Status{}}), "unexpected object"},
	} {
		t.Run(name, func(t *testing.T) {
			api := &fakeAPI{streams: []func() (watch.Interface, error){c.stream}}
			s := newShardIndex("gitrepos", label, false, func() {})
			require.NoError(t, s.Replace([]any{obj("a", "old", "s9", false)}, "1"))
			l := wire.InitialSync(api.lw(), s, wire.Reading{PageSize: 2})

			_, err := l.ListWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "3"})
			require.ErrorContains(t, err, c.err)
			assert.Nil(t, s.pending, "a failed state is dropped")
			assert.Equal(t, 1, s.count("s9"))
			assert.Equal(t, 0, s.count("s1"))
			assert.Equal(t, 0, api.lists, "only a server that refuses the stream as such is listed")
		})
	}
}

func TestInitialSyncStartsAfreshOnEachList(t *testing.T) {
	api := &fakeAPI{streams: []func() (watch.Interface, error){
		stream(added("r1", "s1"), watch.Event{Type: watch.Error, Object: &metav1.Status{Status: metav1.StatusFailure, Code: 500, Message: "etcd"}}),
		stream(added("r2", "s2"), bookmark("4", true)),
	}}
	s := newShardIndex("gitrepos", label, false, func() {})
	l := wire.InitialSync(api.lw(), s, wire.Reading{PageSize: 2})
	_, err := l.ListWithContext(context.Background(), metav1.ListOptions{})
	require.Error(t, err)
	got, err := l.ListWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "3"})
	require.NoError(t, err)
	assert.Equal(t, "4", listRV(t, got))
	assert.Equal(t, "3", api.requests[1].ResourceVersion, "a relist streams from the version it knows")
	require.NoError(t, s.Replace(nil, "4"))
	assert.Equal(t, 0, s.count("s1"), "nothing of the failed stream")
	assert.Equal(t, 1, s.count("s2"))

	_, err = l.ListWithContext(context.Background(), metav1.ListOptions{Continue: "x"})
	assert.Error(t, err, "the state is never paged through the reflector")
}

func TestInitialSyncOfSpecs(t *testing.T) {
	api := &fakeAPI{streams: []func() (watch.Interface, error){stream(
		watch.Event{Type: watch.Added, Object: decode(t, helmRelease("ok", "s1", "s1"))},
		watch.Event{Type: watch.Added, Object: decode(t, `{"kind":"HelmRelease","metadata":{"name":"none","namespace":"apps"},"spec":{}}`)},
		bookmark("8", true))}}
	s := newSpecIndex(releases, newShardIndex("helmreleases", fluxKey, false, func() {}))
	l := wire.InitialSync(api.lw(), s, wire.Reading{PageSize: 2})
	_, err := l.ListWithContext(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, s.objects(nil), "an initial state shows only once it is complete")
	require.NoError(t, s.Replace(nil, "8"))
	assert.Equal(t, 1, s.count("s1"))
	objs := s.objects(nil)
	require.Len(t, objs, 1, "an object that derives nothing and refers to nothing has no spec entry")
	assert.Equal(t, "ok", objs[0].Name)
	assert.Len(t, s.byKey, 2)
	assert.Nil(t, s.specPending)
	assert.Nil(t, s.pending)
}

// The reflector lists through initialSync rather than streaming itself,
// hands the store the empty list, and watches on from the state's version.
func TestReflectorSyncsThroughInitialSync(t *testing.T) {
	live := watch.NewFake()
	api := &fakeAPI{streams: []func() (watch.Interface, error){stream(added("r1", "s1"), bookmark("9", true))},
		watches: []*watch.FakeWatcher{live}}
	changes := make(chan struct{}, 10)
	s := newShardIndex("gitrepos", label, false, func() { changes <- struct{}{} })
	r := cache.NewReflectorWithOptions(wire.InitialSync(api.lw(), s, wire.Reading{}),
		&metav1.PartialObjectMetadata{}, s, cache.ReflectorOptions{Name: "test"})
	go r.RunWithContext(t.Context())

	require.Eventually(t, s.hasSynced, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, 1, s.count("s1"))
	live.Add(obj("a", "r2", "s1", false))
	require.Eventually(t, func() bool { return s.count("s1") == 2 }, 10*time.Second, 10*time.Millisecond)
	api.mu.Lock()
	defer api.mu.Unlock()
	require.Len(t, api.requests, 2)
	assert.Equal(t, "9", api.requests[1].ResourceVersion, "the watch goes on from the state's version")
	assert.Nil(t, api.requests[1].SendInitialEvents)
	assert.Equal(t, 0, api.lists)
}

// With pagesFirst the initial state is a paged list from the start: no
// watch is asked for, and every page is of the first page's snapshot.
func TestInitialSyncPagesFirst(t *testing.T) {
	api := &fakeAPI{streams: []func() (watch.Interface, error){stream(added("never", "s2"), bookmark("9", true))},
		pages: []*metav1.PartialObjectMetadataList{page("5", "next", "r1", "r2"), page("6", "", "r3")}}
	s := newShardIndex("gitrepos", label, false, func() {})
	require.NoError(t, s.Replace([]any{obj("a", "old", "s9", false)}, "1"))
	l := wire.InitialSync(api.lw(), s, wire.Reading{Pages: true, PageSize: 2})

	got, err := l.ListWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "0"})
	require.NoError(t, err)
	assert.Equal(t, "5", listRV(t, got))
	assert.Equal(t, []metav1.ListOptions{{Limit: 2}, {Limit: 2, Continue: "next"}}, api.requests, "two pages and no watch")
	assert.Equal(t, 1, s.count("s9"), "the old content stays until the reflector replaces it")
	require.NoError(t, s.Replace(nil, "5"))
	assert.Equal(t, 3, s.count("s1"))
	assert.Equal(t, 0, s.count("s2"))
	assert.Equal(t, 0, s.count("s9"))
}

// A kind whose first page says that more than streamAbove objects remain
// is streamed instead, from a fresh start: the page taken is dropped.
func TestInitialSyncStreamsAManyObjectKind(t *testing.T) {
	for _, tc := range []struct {
		name      string
		remaining *int64
		streamed  bool
	}{
		{"more than streamAbove", new(int64(11)), true},
		{"exactly streamAbove", new(int64(10)), false},
		{"no count (a selector)", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := page("5", "next", "paged")
			first.RemainingItemCount = tc.remaining
			last := page("6", "")
			api := &fakeAPI{streams: []func() (watch.Interface, error){stream(added("r1", "s2"), added("r2", "s2"), bookmark("9", true))},
				pages: []*metav1.PartialObjectMetadataList{first, last}}
			s := newShardIndex("gitrepos", label, false, func() {})
			l := wire.InitialSync(api.lw(), s, wire.Reading{Pages: true, StreamAbove: 10, PageSize: 1})

			got, err := l.ListWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "0"})
			require.NoError(t, err)
			require.NoError(t, s.Replace(nil, listRV(t, got)))
			if tc.streamed {
				assert.Equal(t, "9", listRV(t, got))
				require.Len(t, api.requests, 2, "one page, then the stream")
				assert.True(t, *api.requests[1].SendInitialEvents)
				assert.Equal(t, 0, s.count("s1"), "the page taken before is dropped")
				assert.Equal(t, 2, s.count("s2"))
				return
			}
			assert.Equal(t, "5", listRV(t, got))
			require.Len(t, api.requests, 2, "both pages, no stream")
			assert.Nil(t, api.requests[1].SendInitialEvents)
			assert.Equal(t, 1, s.count("s1"))
			assert.Equal(t, 0, s.count("s2"))
		})
	}
}
