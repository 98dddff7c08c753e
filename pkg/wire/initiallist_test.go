package wire

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	apiversion "k8s.io/apimachinery/pkg/version"
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
		r := Decide(tc.mode, disc)
		assert.Equal(t, tc.pages, r.Pages, "%s, failing %v", tc.mode, tc.fail)
		assert.Equal(t, tc.streamAbove, r.StreamAbove, "%s, failing %v", tc.mode, tc.fail)
		assert.Equal(t, tc.asked, len(disc.Actions()) > 0, "%s: asked the server", tc.mode)
	}
}
