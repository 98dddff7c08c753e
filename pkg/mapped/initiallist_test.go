package mapped

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	apiversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/apimachinery/pkg/watch"
	fakediscovery "k8s.io/client-go/discovery/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestParseInitialList(t *testing.T) {
	for _, s := range []string{"auto", "pages", "stream"} {
		got, err := ParseInitialList(s)
		require.NoError(t, err)
		assert.Equal(t, InitialList(s), got)
	}
	for _, s := range []string{"", "Pages", "watch"} {
		_, err := ParseInitialList(s)
		assert.ErrorContains(t, err, "want auto, pages or stream", "%q", s)
	}
}

func TestReadsPages(t *testing.T) {
	v := func(git, major, minor string) *apiversion.Info {
		return &apiversion.Info{GitVersion: git, Major: major, Minor: minor}
	}
	for _, tc := range []struct {
		name   string
		mode   InitialList
		server *apiversion.Info
		pages  bool
	}{
		{"1.34 serves every page from its cache", InitialListAuto, v("v1.34.0", "1", "34"), true},
		{"a later release too", InitialListAuto, v("v1.37.2", "1", "37"), true},
		{"a distribution's build", InitialListAuto, v("v1.34.3-gke.1245000", "1", "34"), true},
		{"1.33 reads later pages from etcd", InitialListAuto, v("v1.33.7", "1", "33"), false},
		{"1.31 does not stream, but the stream falls back", InitialListAuto, v("v1.31.0", "1", "31"), false},
		{"an odd gitVersion, major and minor with a plus", InitialListAuto, v("custom", "1", "35+"), true},
		{"an odd gitVersion before 1.34", InitialListAuto, v("custom", "1", "33+"), false},
		{"nothing readable", InitialListAuto, v("custom", "", ""), false},
		{"no version", InitialListAuto, nil, false},
		{"pages whatever the version", InitialListPages, v("v1.31.0", "1", "31"), true},
		{"pages without a version", InitialListPages, nil, true},
		{"stream whatever the version", InitialListStream, v("v1.37.2", "1", "37"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.pages, readsPages(tc.mode, tc.server))
		})
	}
}

func TestDecideInitialListAsksTheServerOnlyForAuto(t *testing.T) {
	for _, tc := range []struct {
		mode        InitialList
		fail        bool
		pages       bool
		streamAbove int64
		asked       bool
	}{
		{InitialListAuto, false, true, autoStreamAbove, true},
		{InitialListAuto, true, false, 0, true},
		{InitialListPages, false, true, 0, false},
		{InitialListStream, false, false, 0, false},
	} {
		disc := &fakediscovery.FakeDiscovery{Fake: &k8stesting.Fake{}, FakedServerVersion: &apiversion.Info{GitVersion: "v1.35.1", Major: "1", Minor: "35"}}
		if tc.fail {
			disc.PrependReactor("get", "version", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, errors.New("connection refused")
			})
		}
		tr := New(nil, disc, nil, func() {})
		tr.SetInitialList(tc.mode)
		tr.decideInitialList()
		assert.Equal(t, tc.pages, tr.pages, "%s, failing %v", tc.mode, tc.fail)
		assert.Equal(t, tc.streamAbove, tr.streamAbove, "%s, failing %v", tc.mode, tc.fail)
		assert.Equal(t, tc.asked, len(disc.Actions()) > 0, "%s: asked the server", tc.mode)
	}
}

// With pagesFirst the initial state is a paged list from the start: no
// watch is asked for, and every page is of the first page's snapshot.
func TestInitialSyncPagesFirst(t *testing.T) {
	api := &fakeAPI{streams: []func() (watch.Interface, error){stream(added("never", "s2"), bookmark("9", true))},
		pages: []*metav1.PartialObjectMetadataList{page("5", "next", "r1", "r2"), page("6", "", "r3")}}
	s := newShardIndex("gitrepos", label, false, func() {})
	require.NoError(t, s.Replace([]any{obj("a", "old", "s9", false)}, "1"))
	l := &initialSync{lw: api.lw(), store: s, pageSize: 2, pagesFirst: true}

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
			l := &initialSync{lw: api.lw(), store: s, pageSize: 1, pagesFirst: true, streamAbove: 10}

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
