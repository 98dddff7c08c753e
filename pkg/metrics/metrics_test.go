package metrics

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestResource(t *testing.T) {
	for path, want := range map[string]string{
		"/apis/apps/v1/namespaces/ns/deployments":              "deployments",
		"/apis/apps/v1/namespaces/ns/deployments/x":            "deployments",
		"/apis/apps/v1/namespaces/ns/deployments/x/status":     "deployments/status",
		"/api/v1/namespaces/ns/events":                         "events",
		"/api/v1/namespaces/ns":                                "namespaces",
		"/apis/coordination.k8s.io/v1/namespaces/ns/leases/sk": "leases",
		"/api/v1/nodes/n1":                                     "nodes",
		"/healthz":                                             "other",
	} {
		assert.Equal(t, want, resource(path), path)
	}
}

func TestCountWrites(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			w.WriteHeader(http.StatusConflict)
		}
	}))
	defer srv.Close()
	client := &http.Client{Transport: CountWrites(http.DefaultTransport)}
	created := apiWrites.WithLabelValues("create", "configmaps")
	updated := apiWrites.WithLabelValues("update", "configmaps")
	conflicts := apiWriteErrors.WithLabelValues("update", "configmaps", "409")
	failedCreates := apiWriteErrors.WithLabelValues("create", "configmaps", "200")
	before := []int{count(created), count(updated), count(conflicts)}
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut} {
		req, err := http.NewRequestWithContext(t.Context(), m, srv.URL+"/api/v1/namespaces/ns/configmaps", nil)
		require.NoError(t, err)
		resp, err := client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
	}
	assert.Equal(t, before[0]+1, count(created), "only the POST and the PUT count")
	assert.Equal(t, before[1]+1, count(updated))
	assert.Equal(t, before[2]+1, count(conflicts), "the refused PUT counts as an error, by its code")
	assert.Zero(t, count(failedCreates), "a write that succeeded is no error")

	// A write that gets no answer.
	srv.Close()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/api/v1/namespaces/ns/configmaps", nil)
	require.NoError(t, err)
	resp, err := client.Do(req)
	if err == nil {
		resp.Body.Close()
	}
	require.Error(t, err)
	assert.Equal(t, 1, count(apiWriteErrors.WithLabelValues("create", "configmaps", "none")))
}

// count is a counter's value: a whole number, compared exactly.
func count(c prometheus.Counter) int { return int(testutil.ToFloat64(c)) }
