package shardconfig

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func ids(shards []Shard) []string {
	out := make([]string, len(shards))
	for i, s := range shards {
		out[i] = s.ID
	}
	return out
}

func TestParseShardsAccepts(t *testing.T) {
	tests := []struct {
		name, value string
		want        []string
	}{
		{"comma list", "shard0,shard1", []string{"shard0", "shard1"}},
		{"spaces and newlines", " shard0  shard1\nshard2\r\n", []string{"shard0", "shard1", "shard2"}},
		{"trailing comma", "a,b,", []string{"a", "b"}},
		{"yaml ids", "- a\n- b\n", []string{"a", "b"}},
		{"yaml flow", "[a, b]", []string{"a", "b"}},
		{"explicit empty list", "[]", []string{}},
		{"yaml objects and ids mixed", "- a\n- id: b\n  replicas: 2\n  nodeSelector: {pool: fleet}\n", []string{"a", "b"}},
		{"numeric-looking id", "- \"0\"\n", []string{"0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseShards(tt.value)
			require.NoError(t, err)
			assert.Equal(t, tt.want, ids(got))
		})
	}
}

func TestParseShardsPlacement(t *testing.T) {
	got, err := ParseShards(`
- id: big
  replicas: 3
  nodeSelector: {pool: fleet}
  tolerations: [{key: dedicated, operator: Equal, value: fleet, effect: NoSchedule}]
  resources: {requests: {cpu: 100m, memory: 64Mi}, limits: {memory: 128Mi}}
`)
	require.NoError(t, err)
	require.Len(t, got, 1)
	s := got[0]
	assert.Equal(t, int32(3), *s.Replicas)
	assert.Equal(t, map[string]string{"pool": "fleet"}, s.NodeSelector)
	assert.Equal(t, "dedicated", s.Tolerations[0].Key)
	assert.Equal(t, "64Mi", s.Resources.Requests.Memory().String())
}

func TestParseShardsRejects(t *testing.T) {
	tests := []struct {
		name, value, want string
	}{
		{"empty", "", "empty"},
		{"whitespace", "  \n ", "empty"},
		{"separators only", ",, ,", "no shard ID"},
		{"yaml document marker", "---", "null"},
		{"yaml null list", "- \n", "empty"},
		{"uppercase", "Shard0", "invalid"},
		{"underscore", "shard_0", "invalid"},
		{"leading dash in list", "a,-b", "invalid"},
		{"too long", strings.Repeat("a", maxIDLength+1), "characters long"},
		{"duplicate", "a,b,a", "listed twice"},
		{"duplicate yaml", "- a\n- id: a\n", "listed twice"},
		{"bad yaml", "- [a\n", "not a valid YAML"},
		{"unknown field", "- id: a\n  colour: red\n", "unknown field"},
		{"forbidden image", "- id: a\n  image: evil:latest\n", "unknown field"},
		{"forbidden command", "- id: a\n  command: [sh]\n", "unknown field"},
		{"forbidden env", "- id: a\n  env: [{name: X}]\n", "unknown field"},
		{"forbidden serviceAccount", "- id: a\n  serviceAccountName: admin\n", "unknown field"},
		{"forbidden hostNetwork", "- id: a\n  hostNetwork: true\n", "unknown field"},
		{"wrong type replicas", "- id: a\n  replicas: many\n", "not a valid YAML"},
		{"negative replicas", "- id: a\n  replicas: -1\n", "replicas"},
		{"too many replicas", "- id: a\n  replicas: 1000\n", "replicas"},
		{"bad node selector key", "- id: a\n  nodeSelector: {\"bad key\": x}\n", "nodeSelector key"},
		{"bad toleration operator", "- id: a\n  tolerations: [{key: k, operator: Near}]\n", "operator"},
		{"resource claims", "- id: a\n  resources: {claims: [{name: gpu}]}\n", "claims"},
		{"gpu resource", "- id: a\n  resources: {limits: {nvidia.com/gpu: 1}}\n", "not allowed"},
		{"request above limit", "- id: a\n  resources: {requests: {memory: 2Gi}, limits: {memory: 1Gi}}\n", "above its limit"},
		{"object without id", "- replicas: 1\n", "empty"},
		{"map not list", "[{a: b}]", "unknown field"},
		{"too many", strings.Repeat("s,", maxShards+1), "at most"},
		{"too big", strings.Repeat("a", maxValueBytes+1), "bytes"},
		{"alias bomb", "- &a [x,x,x,x,x,x,x,x,x]\n- &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n- &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n- &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n- &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n- &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n- &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n", "YAML"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseShards(tt.value)
			require.Error(t, err)
			assert.Nil(t, got)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestParse(t *testing.T) {
	_, err := Parse(map[string]string{}, nil, nil)
	assert.ErrorIs(t, err, errMissingShards)

	_, err = Parse(map[string]string{ShardsKey: "a"}, map[string][]byte{ShardsKey: []byte("a")}, nil)
	assert.ErrorContains(t, err, "binaryData")

	_, err = Parse(map[string]string{ShardsKey: "a"}, nil, map[string]string{ForceDeleteAnnotation: "Bad_ID"})
	assert.ErrorContains(t, err, ForceDeleteAnnotation)

	cfg, err := Parse(map[string]string{ShardsKey: "a,b"}, nil, map[string]string{ForceDeleteAnnotation: "c, b,c"})
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, ids(cfg.Shards))
	assert.Equal(t, []string{"b", "c"}, cfg.Force.IDs)
	assert.True(t, cfg.Force.Allows("c"))
	assert.False(t, cfg.Force.Allows("a"))
}

func TestForce(t *testing.T) {
	f, err := parseForce("*,x")
	require.NoError(t, err)
	assert.True(t, f.All)
	assert.True(t, f.Allows("anything"))
	assert.Equal(t, "*,x", f.String())

	g := f.Without([]string{"x"}, false)
	assert.Equal(t, "*", g.String())
	h := f.Without(nil, true)
	assert.Equal(t, "x", h.String())
	assert.True(t, f.Without([]string{"x"}, true).Empty())

	empty, err := parseForce("")
	require.NoError(t, err)
	assert.True(t, empty.Empty())
}

// FuzzParseShards checks that no input panics, and that an accepted one is
// a valid, duplicate-free list within the bounds.
func FuzzParseShards(f *testing.F) {
	for _, seed := range []string{
		"shard0,shard1", "- a\n- id: b\n  replicas: 2\n", "[a, b]", "[]", "- id: a\n  image: x\n",
		"- &a [x]\n- [*a,*a]\n", "a,,b", "- id: a\n  resources: {limits: {cpu: 1}}\n", ",,", "[ ]",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		shards, err := ParseShards(value)
		if err != nil {
			return
		}
		if len(shards) > maxShards {
			t.Fatalf("accepted %d shards", len(shards))
		}
		if len(shards) == 0 && !strings.HasPrefix(strings.TrimSpace(value), "[") {
			t.Fatalf("%q read as no shards: only an explicit [] may remove them all", value)
		}
		seen := map[string]bool{}
		for _, s := range shards {
			if ValidateID(s.ID) != nil || seen[s.ID] {
				t.Fatalf("accepted invalid or duplicate ID %q", s.ID)
			}
			seen[s.ID] = true
		}
	})
}
