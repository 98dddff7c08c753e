//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/pkg/status"
)

// TestManyShardsAtOnce adds 30 shards in one patch: every Deployment is
// created, and every shard gets its own ShardCreated Event (client-go's
// default Event rate limit would drop most of them).
func TestManyShardsAtOnce(t *testing.T) {
	s := newScenario(t, "many", true)
	s.createConfigMap("[]")
	s.start()
	var ids []string
	for i := range 30 {
		ids = append(ids, fmt.Sprintf("m%d", i))
	}
	s.setShards(strings.Join(ids, ","))
	s.waitShards(ids...)
	eventually(t, time.Minute, "a ShardCreated Event per shard", func() error {
		if n := len(s.events(status.ReasonShardCreated)); n != len(ids) {
			return fmt.Errorf("%d Events", n)
		}
		return nil
	})
	s.setShards("[]")
	s.waitShards()
	eventually(t, time.Minute, "a ShardDeleted Event per shard", func() error {
		if n := len(s.events(status.ReasonShardDeleted)); n != len(ids) {
			return fmt.Errorf("%d Events", n)
		}
		return nil
	})
}
