//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestFailover runs two replicas with leader election: the standby writes
// nothing while the leader lives, and finishes a pending change once the
// leader is killed.
func TestFailover(t *testing.T) {
	s := newScenario(t, "failover", true)
	s.createConfigMap("f1")
	election := []string{"--leader-elect", "--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", "3s", "--leader-elect-retry-period", "500ms"}
	a := startDaemon(t, s.args(election...)...)
	eventually(t, time.Minute, "a leads", func() error {
		if a.logCount("became leader") == 0 {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	b := startDaemon(t, s.args(election...)...)
	s.waitShards("f1")
	eventually(t, time.Minute, "both ready", func() error {
		if err := a.ready(); err != nil {
			return err
		}
		return b.ready()
	})
	holds(t, 2*time.Second, "the standby writes nothing", func() error {
		for _, res := range []string{"deployments", "configmaps", "events"} {
			for _, verb := range []string{"create", "update", "patch", "delete"} {
				n, err := b.metric(fmt.Sprintf(`shardkeeper_api_writes_total{resource=%q,verb=%q}`, res, verb))
				if err != nil {
					return err
				}
				if n != 0 {
					return fmt.Errorf("standby made %v %s %s", n, verb, res)
				}
			}
		}
		if b.logCount("became leader") != 0 {
			return fmt.Errorf("standby became leader while the leader lives")
		}
		return nil
	})

	a.kill()
	s.setShards("f1,f2") // pending until the standby takes over
	s.waitShards("f1", "f2")
	assert.Equal(t, 1, b.logCount("became leader"))
	created, err := b.metric(`shardkeeper_api_writes_total{resource="deployments",verb="create"}`)
	require.NoError(t, err)
	assert.Equal(t, 4.0, created, "the new leader created f2's Deployments once each, and nothing of f1")

	// SIGTERM releases the Lease at once, so a standby need not wait for
	// it to expire.
	b.stop()
	lease, err := kube.CoordinationV1().Leases(s.fleetNS).Get(s.ctx, "shardkeeper", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, ptr.Deref(lease.Spec.HolderIdentity, ""), "the Lease is released on shutdown")
}
