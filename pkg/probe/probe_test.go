package probe

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
)

func TestHandler(t *testing.T) {
	readyErr := errors.New("caches not synced")
	h := Handler(func() error { return readyErr })
	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, path, nil))
		return rec
	}
	assert.Equal(t, http.StatusOK, get("/healthz").Code)
	rec := get("/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Contains(t, rec.Body.String(), "caches not synced")
	readyErr = nil
	assert.Equal(t, http.StatusOK, get("/readyz").Code)
}

func TestMetricsHandlerProfiling(t *testing.T) {
	reg := prometheus.NewRegistry()
	for _, profiling := range []bool{false, true} {
		h := MetricsHandler(reg, profiling)
		get := func(path string) int {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, path, nil))
			return rec.Code
		}
		assert.Equal(t, http.StatusOK, get("/metrics"))
		want := http.StatusNotFound
		if profiling {
			want = http.StatusOK
		}
		assert.Equal(t, want, get("/debug/pprof/"), "profiling %v", profiling)
		assert.Equal(t, want, get("/debug/pprof/cmdline"), "profiling %v", profiling)
	}
}
