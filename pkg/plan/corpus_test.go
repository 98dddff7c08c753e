package plan

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
	"github.com/shardkeeper/shardkeeper/pkg/status"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

func readCorpus(t *testing.T) testfixture.Corpus {
	t.Helper()
	return testfixture.ReadCorpus(t, filepath.Join("..", "..", testfixture.CorpusPath))
}

// TestCorpusIDLimit holds the daemon to the corpus's ID limit: a list that
// parses is refused, with the corpus's sentence, when an ID is too long for
// the names of Fleet's preset (the chart's default sources), and only
// then. The chart's admission policy is held to the same sentences.
func TestCorpusIDLimit(t *testing.T) {
	for _, c := range readCorpus(t).Configs {
		if c.Error != "" {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			cfg, err := shardconfig.Parse(c.ConfigMap())
			require.NoError(t, err)
			_, err = newWorld(t).decideConfig(cfg)
			if c.IDLimitError != "" {
				require.EqualError(t, err, c.IDLimitError)
				return
			}
			require.NoError(t, err)
		})
	}
}

// TestCorpusRemovals holds the removal guard to the corpus: after each
// edit, the shards kept for their objects are the corpus's, which the
// chart's removal warning is held to as well.
func TestCorpusRemovals(t *testing.T) {
	for _, c := range readCorpus(t).Removals {
		t.Run(c.Name, func(t *testing.T) {
			w := newWorld(t)
			oldData, newData, annotations := c.ConfigMaps()
			old, err := shardconfig.Parse(oldData, nil, nil)
			require.NoError(t, err)
			p, err := w.decideConfig(old)
			require.NoError(t, err)
			w.converge(p)
			w.mapped.Placed = map[string]bool{}
			for id, kinds := range c.Mapped {
				w.mapped.Objects[id] = map[string][]string{}
				for kind, n := range kinds {
					for i := range n {
						key := fmt.Sprintf("team/%s-%s-%d", id, kind, i)
						w.mapped.Objects[id][kind] = append(w.mapped.Objects[id][kind], key)
						w.mapped.Placed[key] = c.Placed
					}
				}
			}
			kept := []string{}
			cfg, err := shardconfig.Parse(newData, nil, annotations)
			if err == nil {
				p, err = w.decideConfig(cfg)
			}
			if err == nil {
				for _, st := range p.Shards {
					if !cfg.IDs()[st.ID] && len(st.Mapped) > 0 {
						kept = append(kept, st.ID)
						assert.Contains(t, []string{status.StateBlocked, status.StateDraining}, st.State, st.ID)
						assert.Equal(t, c.KeptState(), st.State, st.ID)
					}
				}
			}
			assert.Equal(t, append([]string{}, c.Kept...), kept, "the shards kept for their objects")
		})
	}
}
