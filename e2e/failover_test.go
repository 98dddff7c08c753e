//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFailover runs two replicas with leader election: the standby writes
// nothing while the leader lives, and finishes a pending change once the
// leader is killed.
func TestFailover(t *testing.T) {
	s := newScenario(t, "failover", true)
	s.createConfigMap("f1")
	election := []string{"--leader-elect", "--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", "3s", "--leader-elect-retry-period", "500ms"}
	a := startDaemon(t, s.args(election...)...)
	// The Lease holder's identity is the daemon's own (host and a UUID):
	// what the Lease says once a leads is a's.
	var holderA string
	eventually(t, time.Minute, "a leads", func() error {
		if leads, err := a.leads(); err != nil || !leads {
			return notYet("not yet", err)
		}
		h, err := s.leaseHolder()
		if err != nil || h == "" {
			return notYet("the Lease has no holder yet", err)
		}
		holderA = h
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
		// a's gauge is read too, so that a renamed metric fails here
		// rather than reading as a standby's 0.
		for name, d := range map[string]*daemon{"a": a, "b": b} {
			leads, err := d.leads()
			if err != nil {
				return err
			}
			if want := d == a; leads != want {
				return fmt.Errorf("%s leads: %v, want %v", name, leads, want)
			}
		}
		if h, err := s.leaseHolder(); err != nil || h != holderA {
			return notYet(fmt.Sprintf("the Lease is held by %q, not a", h), err)
		}
		return nil
	})

	a.kill()
	s.setShards("f1,f2") // pending until the standby takes over
	s.waitShards("f1", "f2")
	// Only a leader creates, so b leads: the check is that it says so and
	// holds the Lease. A leader that lost the Lease would have exited, so
	// b took it over once.
	leads, err := b.leads()
	require.NoError(t, err)
	assert.True(t, leads, "the standby leads")
	holderB, err := s.leaseHolder()
	require.NoError(t, err)
	assert.NotEmpty(t, holderB)
	assert.NotEqual(t, holderA, holderB, "the Lease passed from a to the standby")
	created, err := b.metric(`shardkeeper_api_writes_total{resource="deployments",verb="create"}`)
	require.NoError(t, err)
	assert.InDelta(t, 4, created, 0, "the new leader created f2's Deployments once each, and nothing of f1")

	// SIGTERM releases the Lease at once, so a standby need not wait for
	// it to expire.
	b.stop()
	holder, err := s.leaseHolder()
	require.NoError(t, err)
	assert.Empty(t, holder, "the Lease is released on shutdown")
}
