package wire

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// listPage is a page of objects named prefix-0, prefix-1, ... as the API
// server lists them for a metadata client.
func listPage(prefix string, n int, cont string) *metav1.PartialObjectMetadataList {
	list := &metav1.PartialObjectMetadataList{
		TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadataList"},
		ListMeta: metav1.ListMeta{ResourceVersion: "555", Continue: cont},
	}
	for i := range n {
		o := fullObject(fmt.Sprintf("%s-%d", prefix, i))
		o.TypeMeta = metav1.TypeMeta{}
		// Both encodings carry whole seconds.
		deleted := metav1.NewTime(o.DeletionTimestamp.Truncate(time.Second))
		o.DeletionTimestamp = &deleted
		list.Items = append(list.Items, *o)
	}
	return list
}

// pagesServer answers a metadata list of GitRepos with pages, in
// protobuf or, with asJSON, in JSON; the continue token names the page.
func pagesServer(t *testing.T, pages map[string]*metav1.PartialObjectMetadataList, asJSON bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		page, ok := pages[r.URL.Query().Get("continue")]
		if !ok {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusGone)
			_ = json.NewEncoder(w).Encode(&metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
				Status: metav1.StatusFailure, Reason: metav1.StatusReasonExpired, Code: http.StatusGone, Message: "the continue token has expired"})
			return
		}
		if asJSON {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(page)
			return
		}
		w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf")
		_, _ = w.Write(encode(t, page))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// Pages read one after the other through the pooled buffers each keep
// what was skimmed of them, whichever type the API server chose, and an
// error status reaches the reflector as the APIStatus it reads.
func TestListPagesThroughPooledBuffers(t *testing.T) {
	// The second page is the smaller, so that its body overwrites the
	// first one's in the buffer they share: anything decoded from the
	// first that still pointed into it would change.
	pages := map[string]*metav1.PartialObjectMetadataList{"": listPage("first", 40, "next"), "next": listPage("second", 3, "")}
	for _, asJSON := range []bool{false, true} {
		t.Run(fmt.Sprintf("json=%v", asJSON), func(t *testing.T) {
			srv := pagesServer(t, pages, asJSON)
			client, err := metaClientFor(&rest.Config{Host: srv.URL})
			require.NoError(t, err)
			lw := metaListWatch(client, schema.GroupVersionResource{Group: "fleet.cattle.io", Version: "v1alpha1", Resource: "gitrepos"})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()

			var got []*metav1.PartialObjectMetadataList
			for _, cont := range []string{"", "next"} {
				obj, err := lw.ListWithContext(ctx, metav1.ListOptions{Limit: 500, Continue: cont})
				require.NoError(t, err)
				got = append(got, obj.(*metav1.PartialObjectMetadataList))
			}
			for i, cont := range []string{"", "next"} {
				want := pages[cont]
				require.Len(t, got[i].Items, len(want.Items), "page %q", cont)
				assert.Equal(t, want.Continue, got[i].Continue)
				assert.Equal(t, want.ResourceVersion, got[i].ResourceVersion)
				for j := range want.Items {
					// JSON is decoded whole, as client-go's decoder did; the
					// index strips it.
					wantMeta := want.Items[j].ObjectMeta
					if !asJSON {
						wantMeta = kept(&want.Items[j]).ObjectMeta
					}
					assert.Equal(t, wantMeta, got[i].Items[j].ObjectMeta, "page %q item %d", cont, j)
				}
			}

			_, err = lw.ListWithContext(ctx, metav1.ListOptions{Limit: 500, Continue: "expired"})
			require.Error(t, err)
			assert.True(t, apierrors.IsResourceExpired(err), "an expired continue is the reflector's ResourceExpired: %v", err)
		})
	}
}

// A HelmRelease list is skimmed from its pooled body as it was from Do's.
func TestSpecListThroughPooledBuffer(t *testing.T) {
	body := `{"apiVersion":"helm.toolkit.fluxcd.io/v2","kind":"HelmReleaseList","metadata":{"resourceVersion":"77","continue":""},"items":[` +
		helmRelease("a", "s1", "s2") + "," + helmRelease("b", "s3", "") + `]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	client, err := specClientFor(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	lw := specListWatch(client, schema.GroupVersionResource{Group: "helm.toolkit.fluxcd.io", Version: "v2", Resource: "helmreleases"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	obj, err := lw.ListWithContext(ctx, metav1.ListOptions{Limit: 500})
	require.NoError(t, err)
	list, ok := obj.(*specList)
	require.True(t, ok, "listed as %T", obj)
	want := &specList{}
	require.NoError(t, skimList([]byte(body), want))
	assert.Equal(t, want, list)
	require.Len(t, list.Items, 2)
	assert.Equal(t, "b", list.Items[1].Name)
}

// A list request answered with a 2xx body that is not a list, such as a
// Status from a proxy on the way, is the request's error, as client-go's
// Do and its clients make it: read as an empty list, it would empty the
// cache of the kind, and the counts would show none of its objects.
func TestAListRequestRefusesABodyThatIsNotAList(t *testing.T) {
	gone := &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
		Status: metav1.StatusFailure, Reason: metav1.StatusReasonGone, Code: http.StatusGone, Message: "gone"}
	ok := &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusSuccess}
	asJSON := func(o any) []byte {
		b, err := json.Marshal(o)
		require.NoError(t, err)
		return b
	}
	beta := listPage("x", 1, "")
	beta.APIVersion = "meta.k8s.io/v1beta1"
	for name, c := range map[string]struct {
		body   []byte
		isGone bool
	}{
		"a failed Status, protobuf": {encode(t, gone), true},
		"a failed Status, JSON":     {asJSON(gone), true},
		"a Success Status, JSON":    {asJSON(ok), false},
		"a v1beta1 list, protobuf":  {encode(t, beta), false},
		"a JSON list with no kind":  {[]byte(`{"metadata":{"resourceVersion":"5"},"items":[]}`), false},
		"a JSON object":             {[]byte(`{"kind":"GitRepo","metadata":{"name":"a"}}`), false},
	} {
		t.Run(name, func(t *testing.T) {
			list := &metav1.PartialObjectMetadataList{}
			err := decodeMetaList(c.body, list)
			require.Error(t, err)
			assert.Equal(t, c.isGone, apierrors.IsGone(err), "the Status's own error: %v", err)
		})
	}

	for name, body := range map[string][]byte{"a failed Status": asJSON(gone), "an object": []byte(helmRelease("a", "s1", ""))} {
		t.Run("HelmReleases, "+name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(body)
			}))
			t.Cleanup(srv.Close)
			client, err := specClientFor(&rest.Config{Host: srv.URL})
			require.NoError(t, err)
			lw := specListWatch(client, schema.GroupVersionResource{Group: "helm.toolkit.fluxcd.io", Version: "v2", Resource: "helmreleases"})
			_, err = lw.ListWithContext(context.Background(), metav1.ListOptions{Limit: 500})
			require.Error(t, err)
		})
	}
}
