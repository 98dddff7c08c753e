// Package metrics holds shardkeeper's Prometheus metrics and the registry
// that /metrics serves.
//
// The metric names and labels are the daemon's interface to its dashboards
// and alerts; the Go package is the daemon's own: not a supported API, and
// it may change in any release.
package metrics

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

const (
	// MaxUnknownShards bounds the shard IDs that UnknownShardObjects names.
	MaxUnknownShards = 10
	// OtherShards is the shard label of the unknown IDs beyond the largest
	// MaxUnknownShards; it is no valid shard ID, so it names none.
	OtherShards = "_other"
)

// Registry holds every shardkeeper metric plus the Go and process collectors.
var Registry = prometheus.NewRegistry()

var (
	// Shards counts the shards by state: one of the status.State* values.
	Shards = gaugeVec("shardkeeper_shards", "Number of shards, by state.", "state")
	// MappedObjects counts the objects mapped to each shard, by kind.
	MappedObjects = gaugeVec("shardkeeper_mapped_objects", "Number of objects mapped to a shard, by shard and kind.", "shard", "kind")
	// ReconcileDuration is the time one reconcile of the shard set takes.
	ReconcileDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "shardkeeper_reconcile_duration_seconds",
		Help:    "Time to reconcile the shard set once, writes included.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
	})
	// ReconcileErrors counts reconciles that ended in an error (and a retry).
	ReconcileErrors = counter("shardkeeper_reconcile_errors_total", "Reconciles of the shard set that failed and were retried.")
	// ReconcileCacheWaits counts reconciles put off because the caches did
	// not yet show this process's own writes: how often a decision would
	// otherwise have been taken on a stale cache.
	ReconcileCacheWaits = counter("shardkeeper_reconcile_cache_waits_total",
		"Reconciles of the shard set put off until the caches show this process's own writes.")
	// RemovalCacheWaits counts, per shard and reconcile, the removals put
	// off because the API server showed an object mapped to the shard that
	// the caches did not yet: each one a shard that the caches alone would
	// have deleted under an object.
	RemovalCacheWaits = counter("shardkeeper_removal_cache_waits_total",
		"Shard removals put off because the API server showed an object mapped to the shard that the caches did not show yet, counted per reconcile.")
	// BlockedDeletions counts shards whose deletion was refused because
	// objects were still mapped to them.
	BlockedDeletions = counter("shardkeeper_blocked_deletions_total",
		"Shard deletions refused because objects were still mapped to the shard.")
	// ForcedDeletions counts shards deleted by force with objects mapped.
	ForcedDeletions = counter("shardkeeper_forced_deletions_total",
		"Shards deleted by force while objects were still mapped to them.")
	// apiWrites counts the write requests sent to the API server.
	apiWrites = counterVec("shardkeeper_api_writes_total",
		"Write requests sent to the Kubernetes API server, by verb and resource.", "verb", "resource")
	// apiWriteErrors counts the write requests that failed: refused by the
	// API server (code is its HTTP status: 409 for a conflict or an
	// AlreadyExists, 404 for a NotFound) or never answered ("none").
	apiWriteErrors = counterVec("shardkeeper_api_write_errors_total",
		"Write requests to the Kubernetes API server that failed, by verb, resource and HTTP status code (none: no answer).",
		"verb", "resource", "code")
	// UnknownShardObjects counts the objects whose shard label names a
	// shard that is neither listed nor running: nothing reconciles them.
	// The shard label holds at most MaxUnknownShards IDs, the rest are
	// summed under OtherShards, so that a flood of typos cannot flood the
	// series.
	UnknownShardObjects = gaugeVec("shardkeeper_unknown_shard_objects",
		"Objects labelled with a shard that is neither listed nor running, by shard (the largest "+
			strconv.Itoa(MaxUnknownShards)+" IDs; the rest as "+OtherShards+") and kind.", "shard", "kind")
	// ShardDeployments counts each shard's controller Deployments, desired
	// and ready.
	ShardDeployments = gaugeVec("shardkeeper_shard_deployments",
		"Controller Deployments of a shard, by shard and state (desired, ready).", "shard", "state")
	// ConfigAccepted is 1 while the shard ConfigMap as it stands is
	// accepted, 0 while it is rejected (or missing) and nothing changes.
	ConfigAccepted = gauge("shardkeeper_config_accepted",
		"1 if the current shard ConfigMap is accepted, 0 if it is rejected or missing.")
	// Leader is 1 in the replica that runs the controllers.
	Leader = gauge("shardkeeper_leader", "1 if this replica holds the leader Lease and runs the controllers, else 0.")
	// LastReconcileSuccess is when a reconcile last completed without error.
	LastReconcileSuccess = gauge("shardkeeper_last_reconcile_success_timestamp_seconds",
		"Unix time of the last reconcile of the shard set that completed without error.")
	// PlacementMoves counts the objects placement relabelled.
	PlacementMoves = counterVec("shardkeeper_placement_moves_total",
		"Objects relabelled by placement, by reason (Assign, Drain, Failover, Rebalance) and result (moved, conflict, error).", "reason", "result")
)

// The constructors below keep each metric's declaration to its name, help
// and labels.

func counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

func gauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

func gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
}

func init() {
	Registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		Shards, MappedObjects, ReconcileDuration, ReconcileErrors, ReconcileCacheWaits, RemovalCacheWaits, BlockedDeletions, ForcedDeletions, apiWrites, apiWriteErrors,
		PlacementMoves, UnknownShardObjects, ShardDeployments, ConfigAccepted, Leader, LastReconcileSuccess,
	)
}

// CountWrites wraps a client transport so that every write request is
// counted, whoever makes it (controllers, Events, the Lease), and every
// failed one again by its status code.
func CountWrites(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		verb := writeVerb(req.Method)
		if verb == "" {
			return rt.RoundTrip(req)
		}
		res := resource(req.URL.Path)
		apiWrites.WithLabelValues(verb, res).Inc()
		resp, err := rt.RoundTrip(req)
		switch {
		case err != nil:
			apiWriteErrors.WithLabelValues(verb, res, "none").Inc()
		case resp.StatusCode >= http.StatusBadRequest:
			apiWriteErrors.WithLabelValues(verb, res, strconv.Itoa(resp.StatusCode)).Inc()
		}
		return resp, err
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func writeVerb(method string) string {
	switch method {
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return ""
}

// resource returns the resource (with subresource) named by an API path
// such as /apis/apps/v1/namespaces/ns/deployments/name/status.
func resource(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	// Skip "api/v1" or "apis/group/version", then an optional "namespaces/ns".
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return "other"
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	switch len(parts) {
	case 0:
		return "namespaces"
	case 1, 2:
		return parts[0]
	default:
		return parts[0] + "/" + parts[2]
	}
}
