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
	type input struct{ name, value string }
	// The inputs are grouped by the part of the error message each must
	// produce.
	tests := []struct {
		want   string
		inputs []input
	}{
		{"empty", []input{
			{"empty", ""},
			{"whitespace", "  \n "},
			{"yaml null list", "- \n"},
			{"object without id", "- replicas: 1\n"},
		}},
		{"no shard ID", []input{{"separators only", ",, ,"}}},
		{"null", []input{{"yaml document marker", "---"}}},
		{"invalid", []input{
			{"uppercase", "Shard0"},
			{"underscore", "shard_0"},
			{"leading dash in list", "a,-b"},
		}},
		{"characters long", []input{{"too long", strings.Repeat("a", maxIDLength+1)}}},
		{"listed twice", []input{
			{"duplicate", "a,b,a"},
			{"duplicate yaml", "- a\n- id: a\n"},
		}},
		{"not a valid YAML", []input{
			{"bad yaml", "- [a\n"},
			{"wrong type replicas", "- id: a\n  replicas: many\n"},
		}},
		// YAML 1.1 reads these as a number or a boolean, which the plain
		// list, the chart and the UI read as the text written.
		{"write IDs as strings", []input{
			{"number", "- 1\n"},
			{"octal", "- 010\n"},
			{"boolean", "- yes\n"},
			{"flow numbers", "[1, 2]"},
		}},
		{"id 1 is not a string", []input{{"number as id", "- id: 1\n"}}},
		{"unknown field", []input{
			{"unknown field", "- id: a\n  colour: red\n"},
			{"forbidden image", "- id: a\n  image: evil:latest\n"},
			{"forbidden command", "- id: a\n  command: [sh]\n"},
			{"forbidden env", "- id: a\n  env: [{name: X}]\n"},
			{"forbidden serviceAccount", "- id: a\n  serviceAccountName: admin\n"},
			{"forbidden hostNetwork", "- id: a\n  hostNetwork: true\n"},
			{"map not list", "[{a: b}]"},
		}},
		{"replicas", []input{
			{"negative replicas", "- id: a\n  replicas: -1\n"},
			{"too many replicas", "- id: a\n  replicas: 1000\n"},
		}},
		{"nodeSelector key", []input{{"bad node selector key", "- id: a\n  nodeSelector: {\"bad key\": x}\n"}}},
		{"operator", []input{{"bad toleration operator", "- id: a\n  tolerations: [{key: k, operator: Near}]\n"}}},
		{"claims", []input{{"resource claims", "- id: a\n  resources: {claims: [{name: gpu}]}\n"}}},
		{"not allowed", []input{{"gpu resource", "- id: a\n  resources: {limits: {nvidia.com/gpu: 1}}\n"}}},
		{"above its limit", []input{{"request above limit", "- id: a\n  resources: {requests: {memory: 2Gi}, limits: {memory: 1Gi}}\n"}}},
		{"at most", []input{{"too many", strings.Repeat("s,", maxShards+1)}}},
		{"bytes", []input{{"too big", strings.Repeat("a", maxValueBytes+1)}}},
		{"YAML", []input{{"alias bomb", "- &a [x,x,x,x,x,x,x,x,x]\n- &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n- &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n- &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n- &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n- &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n- &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n"}}},
	}
	for _, tt := range tests {
		for _, in := range tt.inputs {
			t.Run(in.name, func(t *testing.T) {
				got, err := ParseShards(in.value)
				require.Error(t, err)
				assert.Nil(t, got)
				assert.Contains(t, err.Error(), tt.want)
			})
		}
	}
}

func TestParse(t *testing.T) {
	_, err := Parse(map[string]string{}, nil, nil)
	require.ErrorIs(t, err, errMissingShards)

	_, err = Parse(map[string]string{ShardsKey: "a"}, map[string][]byte{ShardsKey: []byte("a")}, nil)
	require.ErrorContains(t, err, "binaryData")

	_, err = Parse(map[string]string{ShardsKey: "a"}, nil, map[string]string{ForceDeleteAnnotation: "Bad_ID"})
	require.ErrorContains(t, err, ForceDeleteAnnotation)

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
