package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestIdleCountsTheAPIRequestsOfTheWindow(t *testing.T) {
	before, err := parseMetrics(strings.NewReader(`
apiserver_request_total{code="200",resource="deployments",verb="LIST"} 10
apiserver_request_total{code="201",resource="events",verb="POST"} 4
apiserver_request_total{code="200",resource="leases",verb="PUT"} 100
apiserver_request_total{code="200",resource="pods",subresource="status",verb="PATCH"} 7
`))
	require.NoError(t, err)
	after, err := parseMetrics(strings.NewReader(`
# HELP apiserver_request_total a counter
apiserver_request_total{code="200",resource="deployments",verb="LIST"} 12
apiserver_request_total{code="201",resource="events",verb="POST"} 4
apiserver_request_total{code="200",resource="leases",verb="PUT"} 130
apiserver_request_total{code="200",resource="pods",subresource="status",verb="PATCH"} 9
apiserver_request_total{code="200",resource="configmaps",verb="PATCH"} 1
apiserver_request_total{code="409",resource="configmaps",verb="PATCH"} 2
shardkeeper_api_writes_total{verb="PATCH"} 50
`))
	require.NoError(t, err)

	var w idle
	w.countAPIRequests(before, after)
	assert.Equal(t, map[string]float64{
		"LIST deployments":  2,
		"PUT leases":        30,
		"PATCH pods/status": 2,
		"PATCH configmaps":  3,
	}, w.APIByResource, "requests by verb and resource, every code together, none that did not change")
	assert.InDelta(t, 3, w.APIWritesDaemonRes, 0, "the ConfigMap patches: leases and pods are not the daemon's resources")
	assert.InDelta(t, 2, w.APIListsDaemonRes, 0)
	assert.Equal(t, []string{"code", "resource", "subresource", "verb"}, w.APILabels)
}
