package metrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// A request refused by RBAC counts under its code, whether it is a read,
// a watch or a write: the informers' lists and watches are the requests
// that a missing verb refuses first.
func TestRESTRequestsCountRefusals(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Query().Get("watch") != "true" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm","namespace":"ns"}}`))
			return
		}
		w.WriteHeader(http.StatusForbidden)
	}))
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	ctx := context.Background()
	// Counts are whole numbers; as ints they compare exactly.
	count := func(code, method string) int {
		return int(testutil.ToFloat64(restRequests.WithLabelValues(code, method, u.Host)))
	}

	_, err = kube.CoreV1().ConfigMaps("ns").Get(ctx, "cm", metav1.GetOptions{})
	require.NoError(t, err)
	_, err = kube.CoreV1().ConfigMaps("ns").Watch(ctx, metav1.ListOptions{})
	require.Error(t, err)
	err = kube.CoreV1().ConfigMaps("ns").Delete(ctx, "cm", metav1.DeleteOptions{})
	require.Error(t, err)

	assert.Equal(t, 1, count("200", http.MethodGet), "the read that was answered")
	assert.Equal(t, 1, count("403", http.MethodGet), "the refused watch")
	assert.Equal(t, 1, count("403", http.MethodDelete), "the refused write")
}
