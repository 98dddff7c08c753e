package stamp_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/shardkeeper/shardkeeper/pkg/placement"
	"github.com/shardkeeper/shardkeeper/pkg/stamp"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

// shardLabels are the presets' shard labels: an object that carries one
// is placed where it says, never stamped.
var shardLabels = []string{"fleet.cattle.io/shard-ref", "sharding.fluxcd.io/key"}

// TestCorpus holds the records to the corpus's stamps, which the chart's
// stamping policy is held to as well: a new object of a group with a
// record takes it (none when it waits), one outside placement's scope or
// already labelled none, and any other an entry of the sequence, the one
// that the policy's hash picks (the daemon has no say in which).
func TestCorpus(t *testing.T) {
	corpus := testfixture.ReadCorpus(t, filepath.Join("..", "..", testfixture.CorpusPath))
	require.NotEmpty(t, corpus.Stamps)
	for _, c := range corpus.Stamps {
		t.Run(c.Name, func(t *testing.T) {
			p, err := c.Setting()
			require.NoError(t, err)
			records := stamp.Params(p, c.Round(), nil, c.GroupedKinds)
			o := placement.Object{Namespace: c.New.Namespace, Labels: c.New.Labels,
				Grouped: slices.Contains(c.GroupedKinds, c.New.Resource+"."+c.New.Group)}
			group := o.Group(p)
			record, recorded := records[group]
			switch {
			case slices.ContainsFunc(shardLabels, func(k string) bool { return c.New.Labels[k] != "" }),
				!p.InScope(c.New.Namespace, labels.Set(c.New.Labels)):
				assert.Empty(t, c.Stamp, "not stamped")
			case group != "" && recorded:
				if record == stamp.Wait {
					record = ""
				}
				assert.Equal(t, record, c.Stamp, "the record of group %s", group)
			case records[stamp.KeySequence] != "":
				assert.Contains(t, strings.Split(records[stamp.KeySequence], ","), c.Stamp, "an entry of the sequence")
			default:
				assert.Equal(t, records[stamp.KeyNext], c.Stamp, "next, or nothing published")
			}
		})
	}
}
