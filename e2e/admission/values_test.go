package admission

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

// TestChartShardsValue holds the chart's own check of .Values.shards
// (shardkeeper.shardIDs in _helpers.tpl, which runs at install, before
// any policy exists) to the daemon's verdicts: every value of the corpus
// that is data.shards alone is given to `helm template` as the shards
// value. The chart refuses what the daemon refuses, but for the values
// the corpus says the chart reads as no shards; what it renders, the
// daemon parses to the corpus's IDs.
func TestChartShardsValue(t *testing.T) {
	helm := testfixture.Helm(t)
	chart := filepath.Join(root, "charts", "shardkeeper")
	dir := t.TempDir()
	for i, c := range readCorpus(t).Configs {
		v, ok := c.ShardsValue()
		if !ok || c.Placement != nil || len(c.BinaryData) > 0 || c.Force != "" || c.Drain != "" {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			values, err := json.Marshal(map[string]string{"shards": v})
			require.NoError(t, err)
			file := filepath.Join(dir, fmt.Sprintf("values-%d.json", i))
			require.NoError(t, os.WriteFile(file, values, 0o600))
			out, err := testfixture.TryHelmTemplate(t, helm, release, chart, namespace,
				"-f", file, "--show-only", "templates/configmap.yaml")
			daemonRefuses := c.Error != "" || c.IDLimitError != ""
			if c.Chart == "refuses" || (daemonRefuses && c.Chart != "none") {
				require.Error(t, err, "the chart renders a value that the daemon refuses (%q) or the corpus says the chart refuses", c.Error+c.IDLimitError)
				// The schema's refusal or the template's, not another's.
				assert.Regexp(t, `at '/shards'|\): shards`, err.Error())
				return
			}
			require.NoError(t, err)
			var cm corev1.ConfigMap
			require.NoError(t, yaml.Unmarshal([]byte(out), &cm))
			cfg, err := shardconfig.Parse(cm.Data, cm.BinaryData, cm.Annotations)
			require.NoError(t, err, "the daemon refuses the chart's data.shards %q", cm.Data[shardconfig.ShardsKey])
			ids := []string{}
			for _, s := range cfg.Shards {
				ids = append(ids, s.ID)
			}
			want := c.IDs
			if c.Chart == "none" || want == nil {
				want = []string{}
			}
			assert.Equal(t, want, ids)
		})
	}
}

// TestChartSeedsAutoWithPlacement: "auto" needs a "placement" key beside
// it, so with placement.enabled the chart seeds an empty one, which the
// daemon reads as placement on, failover off.
func TestChartSeedsAutoWithPlacement(t *testing.T) {
	cm := render[corev1.ConfigMap](t, "ConfigMap", "--set", "shards=auto", "--set", "placement.enabled=true",
		"--show-only", "templates/configmap.yaml")[0]
	assert.Equal(t, map[string]string{shardconfig.ShardsKey: "auto", shardconfig.PlacementKey: ""}, cm.Data)
	cfg, err := shardconfig.Parse(cm.Data, cm.BinaryData, cm.Annotations)
	require.NoError(t, err)
	assert.True(t, cfg.Auto, "auto")
}
