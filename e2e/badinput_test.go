//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
	"github.com/shardkeeper/shardkeeper/pkg/status"
)

// badInput is one malformed edit of the shard ConfigMap and the words its
// rejection must contain.
type badInput struct {
	name        string
	shards      *string // nil: no "shards" key
	binary      bool    // shards in binaryData
	placement   *string // nil: no "placement" key
	annotations map[string]string
	want        string
}

func str(s string) *string { return &s }

func badInputs() []badInput {
	ids := make([]string, 10000)
	for i := range ids {
		ids[i] = fmt.Sprintf("s%d", i)
	}
	bomb := "- &a [x,x,x,x,x,x,x,x,x]\n- &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n- &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n" +
		"- &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n- &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n- &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
	return []badInput{
		{name: "uppercase", shards: str("good,Shard0"), want: `"Shard0" is invalid`},
		{name: "underscore", shards: str("good,shard_0"), want: `"shard_0" is invalid`},
		{name: "dot", shards: str("good,a.b"), want: `"a.b" is invalid`},
		{name: "leading dash", shards: str("good,-x"), want: `"-x" is invalid`},
		{name: "trailing dash", shards: str("good,x-"), want: `"x-" is invalid`},
		{name: "non-ascii", shards: str("good,shärd"), want: `"shärd" is invalid`},
		{name: "control character", shards: str("good,a\x07b"), want: "is invalid"},
		{name: "41 characters", shards: str("good," + strings.Repeat("a", 41)), want: "41 characters long"},
		{name: "64 characters", shards: str("good," + strings.Repeat("b", 64)), want: "64 characters long"},
		{name: "too long for Fleet's names", shards: str("good," + strings.Repeat("c", 30)),
			want: "at most 29 are allowed with the enabled sources (Service monitoring-fleet-controller-shard-<id> must fit in 63 characters)"},
		{name: "duplicate", shards: str("good,dup,dup"), want: `"dup" is listed twice`},
		{name: "duplicate in yaml", shards: str("- good\n- id: good\n"), want: `"good" is listed twice`},
		{name: "empty", shards: str(""), want: "the list is empty"},
		{name: "whitespace only", shards: str(" \n\t "), want: "the list is empty"},
		{name: "separators only", shards: str(",,\n,"), want: "no shard ID"},
		{name: "yaml null", shards: str("---"), want: "null, not a list"},
		{name: "1 MiB value", shards: str(strings.Repeat("a", 1<<20-64)), want: "bytes, more than"},
		{name: "10,000 IDs", shards: str(strings.Join(ids, ",")), want: "10000 shards listed, at most 500"},
		{name: "alias bomb", shards: str(bomb), want: "not a valid YAML list"},
		{name: "bad yaml", shards: str("- [good\n"), want: "not a valid YAML list"},
		{name: "map not list", shards: str("[{shard: a}]"), want: `unknown field "shard"`},
		{name: "nested list", shards: str("[good, [a]]"), want: "not a valid YAML list"},
		{name: "id of wrong type", shards: str("- id: [a]\n"), want: "not a valid YAML list"},
		{name: "replicas of wrong type", shards: str("- id: good\n  replicas: two\n"), want: "not a valid YAML list"},
		{name: "object without id", shards: str("- replicas: 1\n"), want: "shard ID is empty"},
		{name: "unknown field", shards: str("- id: good\n  colour: red\n"), want: `unknown field "colour"`},
		{name: "forbidden image", shards: str("- id: good\n  image: evil:latest\n"), want: `unknown field "image"`},
		{name: "forbidden command", shards: str("- id: good\n  command: [sh]\n"), want: `unknown field "command"`},
		{name: "forbidden args", shards: str("- id: good\n  args: [--all]\n"), want: `unknown field "args"`},
		{name: "forbidden env", shards: str("- id: good\n  env: [{name: X, value: y}]\n"), want: `unknown field "env"`},
		{name: "forbidden volumes", shards: str("- id: good\n  volumes: [{name: host, hostPath: {path: /}}]\n"), want: `unknown field "volumes"`},
		{name: "forbidden service account", shards: str("- id: good\n  serviceAccountName: admin\n"), want: `unknown field "serviceAccountName"`},
		{name: "forbidden security context", shards: str("- id: good\n  securityContext: {privileged: true}\n"), want: `unknown field "securityContext"`},
		{name: "forbidden host network", shards: str("- id: good\n  hostNetwork: true\n"), want: `unknown field "hostNetwork"`},
		{name: "negative replicas", shards: str("- id: good\n  replicas: -1\n"), want: "replicas -1"},
		{name: "too many replicas", shards: str("- id: good\n  replicas: 1000\n"), want: "replicas 1000"},
		{name: "bad node selector key", shards: str("- id: good\n  nodeSelector: {\"a b\": x}\n"), want: "nodeSelector key"},
		{name: "bad node selector value", shards: str("- id: good\n  nodeSelector: {pool: \"" + strings.Repeat("v", 64) + "\"}\n"), want: "nodeSelector value"},
		{name: "bad toleration operator", shards: str("- id: good\n  tolerations: [{key: k, operator: Near}]\n"), want: "operator"},
		{name: "bad toleration effect", shards: str("- id: good\n  tolerations: [{key: k, effect: Sometimes}]\n"), want: "effect"},
		{name: "resource claims", shards: str("- id: good\n  resources: {claims: [{name: gpu}]}\n"), want: "claims"},
		{name: "gpu resource", shards: str("- id: good\n  resources: {limits: {nvidia.com/gpu: 1}}\n"), want: "not allowed"},
		{name: "request above limit", shards: str("- id: good\n  resources: {requests: {memory: 2Gi}, limits: {memory: 1Gi}}\n"), want: "above its limit"},
		{name: "force names an unknown shard", shards: str("good"), annotations: map[string]string{"shardkeeper.io/force-delete": "nosuch"}, want: `"nosuch", which is neither listed nor running`},
		{name: "force names an invalid ID", shards: str("good"), annotations: map[string]string{"shardkeeper.io/force-delete": "Bad!"}, want: "shardkeeper.io/force-delete"},
		{name: "binaryData", shards: str("good"), binary: true, want: "binaryData"},
		{name: "missing shards key", shards: nil, want: `no "shards" key`},
		// Placement: this daemon runs without --allow-placement, but a bad
		// placement value is reported as such first.
		{name: "placement not allowed", shards: str("good"), placement: str(""), want: "runs without --allow-placement"},
		{name: "placement unknown field", shards: str("good"), placement: str("moves: 3"), want: `unknown field "moves"`},
		{name: "placement of wrong type", shards: str("good"), placement: str("maxMoves: many"), want: "not a valid YAML object"},
		{name: "placement bad selector", shards: str("good"), placement: str("selector: 'team in ('"), want: "placement.selector"},
		{name: "placement bad threshold", shards: str("good"), placement: str("threshold: lots"), want: "placement.threshold"},
		{name: "placement min above max", shards: str("good"), placement: str("minShards: 9\nmaxShards: 3"), want: "minShards 9 is above maxShards 3"},
		{name: "auto without placement", shards: str("auto"), want: `"auto" sizes the shard list`},
		{name: "drain without placement", shards: str("good"), annotations: map[string]string{"shardkeeper.io/drain": "good"}, want: "only placement does"},
		{name: "drain names an invalid ID", shards: str("good"), placement: str(""), annotations: map[string]string{"shardkeeper.io/drain": "Bad!"}, want: "shardkeeper.io/drain"},
	}
}

// TestBadInputChangesNothing feeds the daemon malformed ConfigMaps: each is
// rejected with a reason a person can act on, and not one Deployment changes.
func TestBadInputChangesNothing(t *testing.T) {
	s := newScenario(t, "badinput", true)
	s.createConfigMap("good")
	s.start()
	s.waitShards("good")
	s.waitQuiet()
	before := s.deployments()

	cases := badInputs()
	require.GreaterOrEqual(t, len(cases), 40)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := kube.CoreV1().ConfigMaps(s.fleetNS).Update(s.ctx, s.configMapWith(t, c), metav1.UpdateOptions{})
			require.NoError(t, err)
			eventually(t, 30*time.Second, "rejected with the reason", func() error {
				if e := s.status().Error; !strings.Contains(e, c.want) {
					return fmt.Errorf("status error %q", e)
				}
				return nil
			})
			s.waitEvent(status.ReasonInvalidShardConfig, c.want)
		})
	}

	// The last edit is a rejected one, and the metrics say so.
	v, err := s.daemon.metric("shardkeeper_config_accepted")
	require.NoError(t, err)
	assert.Zero(t, v, "shardkeeper_config_accepted while a rejected ConfigMap stands")

	after := s.deployments()
	require.Len(t, after, len(before), "no Deployment created or deleted")
	for name, d := range before {
		if assert.Contains(t, after, name) {
			assert.Equal(t, d.UID, after[name].UID, name)
			assert.Equal(t, d.ResourceVersion, after[name].ResourceVersion, "%s was written", name)
		}
	}

	// A good edit is taken again.
	s.patch(`{"data":{"shards":"good,again","placement":null},"binaryData":null,"metadata":{"annotations":null}}`)
	s.waitShards("good", "again")
	eventually(t, 30*time.Second, "error cleared", func() error {
		if e := s.status().Error; e != "" {
			return fmt.Errorf("%s", e)
		}
		return nil
	})
	for sample, want := range map[string]float64{"shardkeeper_config_accepted": 1, "shardkeeper_leader": 1} {
		v, err := s.daemon.metric(sample)
		require.NoError(t, err)
		assert.InDelta(t, want, v, 0, sample)
	}
}

// configMapWith is the scenario's ConfigMap with the data, binaryData and
// annotations of c in place of its own.
func (s *scenario) configMapWith(t *testing.T, c badInput) *corev1.ConfigMap {
	t.Helper()
	cm, err := kube.CoreV1().ConfigMaps(s.fleetNS).Get(s.ctx, s.cmName, metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data, cm.BinaryData, cm.Annotations = map[string]string{}, nil, c.annotations
	switch {
	case c.binary:
		cm.BinaryData = map[string][]byte{shardconfig.ShardsKey: []byte(*c.shards)}
	case c.shards != nil:
		cm.Data[shardconfig.ShardsKey] = *c.shards
	}
	if c.placement != nil {
		cm.Data[shardconfig.PlacementKey] = *c.placement
	}
	return cm
}
