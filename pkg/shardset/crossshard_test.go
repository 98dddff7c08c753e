package shardset

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/shardkeeper/shardkeeper/pkg/crossref"
	"github.com/shardkeeper/shardkeeper/pkg/status"
)

// crossed is a fixed answer of the reference check.
type crossed []crossref.Crossed

func (c crossed) CrossShard() []crossref.Crossed { return c }

func TestWarningsNameCrossShardObjects(t *testing.T) {
	var found crossed
	for i := range 7 {
		found = append(found, crossref.Crossed{Object: fmt.Sprintf("helmreleases apps/r%d", i), Reasons: []string{"why"}})
	}
	base := status.Warnings{FailoverWithheld: "x"}

	c := &Controller{opts: Options{References: found}}
	w := c.withCrossShard(base)
	assert.Equal(t, "x", w.FailoverWithheld, "the other warnings stay")
	assert.Equal(t, &status.CrossShard{Count: 7, Objects: []string{
		"helmreleases apps/r0: why", "helmreleases apps/r1: why", "helmreleases apps/r2: why", "helmreleases apps/r3: why", "helmreleases apps/r4: why",
	}}, w.CrossShard, "a sample and the count, as the unknown shards are bounded")

	assert.Nil(t, (&Controller{opts: Options{References: crossed(nil)}}).withCrossShard(base).CrossShard, "nothing found, no warning")
	assert.Equal(t, base, (&Controller{}).withCrossShard(base), "no check configured")
}
