package status_test

import (
	"bytes"
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/shardkeeper/shardkeeper/pkg/metrics"
	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
	"github.com/shardkeeper/shardkeeper/pkg/status"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture/golden"
)

// The clusters of the golden statuses run Fleet's three controllers and
// Flux's helm-controller, so a shard has four Deployments.
const desired = 4

// goldenStatuses are statuses as the daemon reports them in typical
// situations, with its messages.
func goldenStatuses(t *testing.T) []struct {
	name   string
	status status.Status
} {
	t.Helper()
	active := func(id string, mapped map[string]int) status.ShardStatus {
		return status.ShardStatus{ID: id, State: status.StateActive, Ready: desired, Desired: desired, Mapped: mapped}
	}
	shard0 := active("shard0", map[string]int{"gitrepos": 12, "helmops": 3, "bundles": 15, "bundledeployments": 45, "helmreleases": 7})
	shard1 := active("shard1", map[string]int{"gitrepos": 11, "bundles": 11, "bundledeployments": 33, "helmreleases": 8})

	// A rejected list leaves the shards as they were; the error is
	// shardconfig's own.
	_, err := shardconfig.Parse(map[string]string{shardconfig.ShardsKey: "shard0,shard1,Shard_2"}, nil, nil)
	require.Error(t, err)

	// The daemon names the unknown IDs with the most objects and counts
	// the others, however many there are.
	var unknown status.Warnings
	for i := range metrics.MaxUnknownShards {
		u := status.UnknownShard{ID: "shard" + strconv.Itoa(10+i), Count: 12 - i}
		for j := range min(u.Count, 5) {
			u.Objects = append(u.Objects, fmt.Sprintf("gitrepos fleet-default/%s-app%d", u.ID, j))
		}
		unknown.UnknownShards = append(unknown.UnknownShards, u)
	}
	unknown.MoreUnknownShards, unknown.MoreUnknownObjects = 31, 40

	return []struct {
		name   string
		status status.Status
	}{
		{"all-active", status.Status{Shards: []status.ShardStatus{shard0, shard1, active("shard2", nil)}}},
		{"blocked", status.Status{Shards: []status.ShardStatus{shard0, {
			ID: "shard1", State: status.StateBlocked, Ready: desired, Desired: desired,
			Mapped: map[string]int{"gitrepos": 2, "bundles": 2, "bundledeployments": 6},
			Message: "shard shard1 was removed from the list but 6 bundledeployments, 2 bundles, 2 gitrepos are still mapped to it " +
				"(bundledeployments cluster-fleet-default-c1/app1, bundles fleet-default/app1, bundles fleet-default/app2, " +
				"gitrepos fleet-default/app1, gitrepos fleet-default/app2); its Deployments are kept. Relabel or delete those objects " +
				"and the shard is deleted by itself, or force it with: kubectl -n cattle-fleet-system annotate configmap shardkeeper " +
				"shardkeeper.io/force-delete=shard1. Bundles take a GitRepo's shard label only when it is applied again: " +
				"after relabelling a GitRepo by hand, add one to its spec.forceSyncGeneration (kubectl -n NAMESPACE patch gitrepo NAME " +
				`--type merge -p '{"spec":{"forceSyncGeneration":N}}'). A HelmOp's Bundle takes the shard label of the HelmOp's ` +
				"spec.labels, not of its own labels",
		}}}},
		{"rejected", status.Status{Shards: []status.ShardStatus{shard0, shard1}, Error: err.Error()}},
		{"write-failing", status.Status{Shards: []status.ShardStatus{shard0, shard1, {
			ID: "shard2", State: status.StateWriteFailing, Ready: desired - 1, Desired: desired,
			Message: `writes to shard shard2 fail and are retried with backoff: create Deployment cattle-fleet-system/gitjob-shard-shard2: ` +
				`deployments.apps "gitjob-shard-shard2" is forbidden: exceeded quota: deployments, requested: count/deployments.apps=1, ` +
				`used: count/deployments.apps=11, limited: count/deployments.apps=11`,
		}}}},
		{"unknown-bounded", status.Status{Shards: []status.ShardStatus{shard0, shard1}, Warnings: unknown}},
		{"cross-shard", status.Status{Shards: []status.ShardStatus{shard0, shard1}, Warnings: status.Warnings{CrossShard: &status.CrossShard{
			Count: 2,
			Objects: []string{
				`helmops fleet-default/podinfo: it is on shard "shard0", but spec.labels puts the object derived from it on the main controllers ` +
					`(no shard label): set fleet.cattle.io/shard-ref: shard0 there`,
				`helmreleases apps/podinfo: it is on shard "shard1", but spec.chart.metadata.labels puts the object derived from it on the main ` +
					`controllers (no shard label): set sharding.fluxcd.io/key: shard1 there; spec.chart.spec.sourceRef HelmRepository apps/podinfo ` +
					`is on shard "shard1", but is resolved on the main controllers (no shard label), and Flux resolves references within one shard`,
			},
		}}}},
	}
}

// TestGolden compares every way a status is written, the status
// ConfigMap's data and `shardkeeper status -o table|wide|yaml|json`, with
// testdata/golden/<case>.<form>.
func TestGolden(t *testing.T) {
	forms := []struct{ format, file string }{
		{"table", "table.txt"}, {"wide", "wide.txt"}, {"yaml", "print.yaml"}, {"json", "print.json"},
	}
	for _, c := range goldenStatuses(t) {
		t.Run(c.name, func(t *testing.T) {
			data, err := status.Encode(c.status)
			require.NoError(t, err)
			b, err := yaml.Marshal(map[string]any{"data": data})
			require.NoError(t, err)
			golden.Assert(t, c.name+".configmap.yaml", b)
			assert.Equal(t, c.status, status.Decode(data), "the status ConfigMap must read back as it was written")

			for _, f := range forms {
				var out bytes.Buffer
				require.NoError(t, status.Print(&out, c.status, f.format))
				golden.Assert(t, c.name+"."+f.file, out.Bytes())
			}
		})
	}
}
