package metrics

import (
	"net/http"
	"net/http/httptest"
	"testing"

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
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	client := &http.Client{Transport: CountWrites(http.DefaultTransport)}
	before := testutil.ToFloat64(apiWrites.WithLabelValues("create", "configmaps"))
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		req, err := http.NewRequest(m, srv.URL+"/api/v1/namespaces/ns/configmaps", nil)
		require.NoError(t, err)
		resp, err := client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
	}
	assert.Equal(t, before+1, testutil.ToFloat64(apiWrites.WithLabelValues("create", "configmaps")), "only the POST counts")
}
