package shardconfig

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"
)

func TestParsePlacementDefaults(t *testing.T) {
	for _, v := range []string{"", "  \n", "{}", "~"} {
		p, err := ParsePlacement(v)
		require.NoError(t, err, "%q", v)
		assert.True(t, p.Enabled)
		assert.Equal(t, defaultMaxMoves, p.MaxMoves)
		assert.Equal(t, defaultInterval, p.Interval)
		assert.Equal(t, defaultCooldown, p.Cooldown)
		assert.Equal(t, 10, p.ThresholdFor(100), "10%% of a mean load of 100")
		assert.Equal(t, 1, p.ThresholdFor(3), "never below 1")
		assert.True(t, p.InScope("any", nil))
	}
}

func TestParsePlacementSettings(t *testing.T) {
	p, err := ParsePlacement(`
namespaces: [fleet-default, apps]
selector: "team in (a,b),!legacy"
threshold: 5
maxMoves: 7
interval: 10s
cooldown: 1m
objectsPerShard: 50
minShards: 2
maxShards: 8
`)
	require.NoError(t, err)
	assert.Equal(t, 5, p.ThresholdFor(1000))
	assert.Equal(t, 7, p.MaxMoves)
	assert.Equal(t, 10*time.Second, p.Interval)
	assert.Equal(t, time.Minute, p.Cooldown)
	assert.Equal(t, []int{50, 2, 8}, []int{p.ObjectsPerShard, p.MinShards, p.MaxShards})
	assert.True(t, p.InScope("apps", labels.Set{"team": "a"}))
	assert.False(t, p.InScope("apps", labels.Set{"team": "a", "legacy": "yes"}))
	assert.False(t, p.InScope("other", labels.Set{"team": "a"}))
	assert.False(t, p.InScope("apps", nil))
	assert.False(t, Placement{}.InScope("apps", labels.Set{"team": "a"}), "placement off: nothing is in scope")
}

func TestParsePlacementRejects(t *testing.T) {
	for _, tt := range []struct{ name, value string }{
		{"not an object", "- a\n- b"},
		{"unknown field", "shards: 3"},
		{"bad selector", "selector: 'team in ('"},
		{"bad namespace", "namespaces: [Apps]"},
		{"zero threshold", "threshold: 0"},
		{"bad percentage", "threshold: ten%"},
		{"no percent sign", "threshold: '10'"},
		{"negative moves", "maxMoves: -1"},
		{"short interval", "interval: 10ms"},
		{"bad duration", "cooldown: soon"},
		{"min above max", "minShards: 5\nmaxShards: 2"},
		{"too many shards", "maxShards: 100000"},
		{"wrong type", "maxMoves: many"},
		{"zero per shard", "objectsPerShard: 0"},
		{"huge value", "namespaces: [" + string(make([]byte, maxValueBytesPlacement)) + "]"},
		{"failover too soon", "failoverAfter: 1s"},
		{"failover after a day", "failoverAfter: 25h"},
		{"failover not a duration", "failoverAfter: later"},
		{"no shard may fail over", "failoverMaxDown: 0"},
		{"above 100%", "failoverMaxDown: 150%"},
		{"not a percentage", "failoverMaxDown: half"},
		{"unknown grouping", "groupBy: tenant"},
		{"label grouping without a label", "groupBy: label"},
		{"a label without label grouping", "groupBy: namespace\ngroupLabel: tenant"},
		{"a group label alone", "groupLabel: tenant"},
		{"bad group label", "groupBy: label\ngroupLabel: 'not a label'"},
	} {
		_, err := ParsePlacement(tt.value)
		assert.Error(t, err, tt.name)
	}
}

func TestParseGrouping(t *testing.T) {
	p, err := ParsePlacement("")
	require.NoError(t, err)
	assert.Empty(t, p.GroupBy, "without the setting, each kind keeps its own unit")
	p, err = ParsePlacement("groupBy: namespace")
	require.NoError(t, err)
	assert.Equal(t, GroupByNamespace, p.GroupBy)
	p, err = ParsePlacement("groupBy: label\ngroupLabel: example.com/tenant")
	require.NoError(t, err)
	assert.Equal(t, [2]string{GroupByLabel, "example.com/tenant"}, [2]string{p.GroupBy, p.GroupLabel})
}

func TestParseFailover(t *testing.T) {
	p, err := ParsePlacement("")
	require.NoError(t, err)
	assert.Zero(t, p.FailoverAfter, "off unless set")
	assert.Equal(t, 2, p.MaxDown(4), "half the listed shards by default")
	assert.Equal(t, 1, p.MaxDown(3), "rounded down")
	assert.Equal(t, 0, p.MaxDown(1), "a lone shard has nowhere to fail over to")

	p, err = ParsePlacement("failoverAfter: 5m\nfailoverMaxDown: 3")
	require.NoError(t, err)
	assert.Equal(t, 5*time.Minute, p.FailoverAfter)
	assert.Equal(t, 3, p.MaxDown(100))

	p, err = ParsePlacement("failoverAfter: ''\nfailoverMaxDown: 25%")
	require.NoError(t, err)
	assert.Zero(t, p.FailoverAfter, "empty is off")
	assert.Equal(t, 2, p.MaxDown(10))
}

func TestParseAutoAndDrain(t *testing.T) {
	cfg, err := Parse(map[string]string{"shards": " auto\n", "placement": ""}, nil, map[string]string{DrainAnnotation: "shard-1, shard-1 shard-2"})
	require.NoError(t, err)
	assert.True(t, cfg.Auto)
	assert.Empty(t, cfg.Shards)
	assert.Equal(t, []string{"shard-1", "shard-2"}, cfg.Drain)
	assert.True(t, cfg.Draining("shard-2"))
	assert.False(t, cfg.Draining("shard-0"))

	_, err = Parse(map[string]string{"shards": "auto"}, nil, nil)
	require.ErrorIs(t, err, errAutoNeedsPlacement)
	_, err = Parse(map[string]string{"shards": "a"}, nil, map[string]string{DrainAnnotation: "a"})
	require.ErrorContains(t, err, "only placement")
	_, err = Parse(map[string]string{"shards": "a", "placement": ""}, nil, map[string]string{DrainAnnotation: "A!"})
	require.Error(t, err)
	_, err = Parse(map[string]string{"shards": "a"}, map[string][]byte{"placement": nil}, nil)
	assert.Error(t, err)
}

func TestAutoNames(t *testing.T) {
	assert.Equal(t, []Shard{{ID: "shard-0"}, {ID: "shard-1"}}, AutoNames(2))
	for id, want := range map[string]int{"shard-0": 0, "shard-12": 12, "shard-": -1, "shard-01": -1, "shard-x": -1, "other-1": -1, "shard--1": -1} {
		assert.Equal(t, want, AutoIndex(id), id)
	}
}

// FuzzParsePlacement: any value either parses into settings within their
// bounds or is refused with an error; it never panics.
func FuzzParsePlacement(f *testing.F) {
	for _, seed := range []string{"", "{}", "namespaces: [a]\nselector: 'x in (a,b)'\nthreshold: 10%", "threshold: 3\nmaxMoves: 0",
		"interval: 1h\ncooldown: 0s", "minShards: 3\nmaxShards: 3", "- a", "threshold: 1000%", "&a [*a]"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		p, err := ParsePlacement(value)
		if err != nil {
			return
		}
		if !p.Enabled || p.MaxMoves < 0 || p.Interval < time.Second || p.Cooldown < 0 ||
			p.ObjectsPerShard < 1 || p.MinShards < 1 || p.MinShards > p.MaxShards || p.MaxShards > maxShards {
			t.Fatalf("out of bounds: %+v", p)
		}
		if th := p.ThresholdFor(1e6); th < 1 {
			t.Fatalf("threshold %d", th)
		}
	})
}
