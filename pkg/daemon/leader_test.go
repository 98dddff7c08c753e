package daemon

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func leaseOptions() *Options {
	return &Options{leaderNamespace: "cattle-fleet-system", leaseDuration: 15 * time.Second,
		renewDeadline: 10 * time.Second, retryPeriod: 100 * time.Millisecond}
}

func TestFailedStartReleasesTheLease(t *testing.T) {
	kube := fake.NewClientset()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	started := errors.New("caches did not sync")
	done := make(chan error, 1)
	go func() {
		done <- elect(ctx, kube, leaseOptions(), func(context.Context) error { return started })
	}()

	select {
	case err := <-done:
		require.ErrorIs(t, err, started)
	case <-time.After(5 * time.Second):
		lease, err := kube.CoordinationV1().Leases("cattle-fleet-system").Get(t.Context(), "shardkeeper", metav1.GetOptions{})
		require.NoError(t, err)
		cancel()
		t.Fatalf("5s after a failed start the process still leads, holding the Lease as %q (and returns %v once cancelled)",
			*lease.Spec.HolderIdentity, <-done)
	}
	lease, err := kube.CoordinationV1().Leases("cattle-fleet-system").Get(t.Context(), "shardkeeper", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, *lease.Spec.HolderIdentity, "a standby may take the Lease at once")
}

func TestShutdownReleasesTheLease(t *testing.T) {
	kube := fake.NewClientset()
	ctx, cancel := context.WithCancel(t.Context())
	running := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- elect(ctx, kube, leaseOptions(), func(context.Context) error { close(running); return nil })
	}()
	<-running
	cancel()

	require.NoError(t, <-done)
	lease, err := kube.CoordinationV1().Leases("cattle-fleet-system").Get(t.Context(), "shardkeeper", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, *lease.Spec.HolderIdentity)
}
