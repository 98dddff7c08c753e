package shardconfig_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

// TestCorpus holds the parser to the corpus that the chart's admission
// policy and the UI are tested on too: the corpus is the parser's own
// verdicts, so a change of rule here shows as the other languages' failure
// until they follow.
func TestCorpus(t *testing.T) {
	corpus := testfixture.ReadCorpus(t, filepath.Join("..", "..", testfixture.CorpusPath))
	require.NotEmpty(t, corpus.Configs)
	for _, c := range corpus.Configs {
		t.Run(c.Name, func(t *testing.T) {
			cfg, err := shardconfig.Parse(c.ConfigMap())
			if c.Error != "" {
				require.EqualError(t, err, c.Error)
				return
			}
			require.NoError(t, err)
			ids := make([]string, 0, len(cfg.Shards))
			for _, s := range cfg.Shards {
				ids = append(ids, s.ID)
			}
			if c.Auto {
				assert.True(t, cfg.Auto, "auto")
			} else {
				assert.Equal(t, c.IDs, ids)
			}
			assert.Equal(t, c.ForceAll, cfg.Force.All, "force all")
			assert.ElementsMatch(t, c.Forced, cfg.Force.IDs, "forced")
		})
	}
}
