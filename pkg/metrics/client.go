package metrics

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	clientmetrics "k8s.io/client-go/tools/metrics"
)

// restRequests counts every request client-go sends, reads and watches
// included, by the HTTP status code of its answer. Unlike apiWriteErrors it
// sees a list or a watch refused with 403, which an informer retries for
// ever: a Role that lacks a verb shows here and nowhere else but the log.
// Its name and labels are those the Kubernetes components export, so the
// queries written for them read it too.
var restRequests = counterVec("rest_client_requests_total",
	"HTTP requests to the Kubernetes API server, by status code (<error>: no answer), method and host.",
	"code", "method", "host")

// requestResult is restRequests as client-go's hook for the result of a
// request.
type requestResult struct{ counts *prometheus.CounterVec }

// Increment counts one request's result.
func (r requestResult) Increment(_ context.Context, code, method, host string) {
	r.counts.WithLabelValues(code, method, host).Inc()
}

// client-go takes its metrics once per process, before its first request:
// registering them here means any binary that serves this Registry counts
// every request of every client it builds.
func init() {
	Registry.MustRegister(restRequests)
	clientmetrics.Register(clientmetrics.RegisterOpts{RequestResult: requestResult{counts: restRequests}})
}
