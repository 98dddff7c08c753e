package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// elect runs run while this process holds the Lease "shardkeeper". Losing
// the Lease ends the process (it may have writes in flight that a new
// leader must not race); on shutdown the Lease is released so that a
// standby takes over at once. A start that fails releases the Lease too,
// at once: client-go goes on renewing it after OnStartedLeading returns,
// and a leader that runs nothing would hold off every standby. client-go's
// elector is used rather than wrangler's, which exits with logrus.Fatalf
// and has a 45 s lease.
func elect(ctx context.Context, kube kubernetes.Interface, o *Options, run func(context.Context) error) error {
	id, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("leader election identity: %w", err)
	}
	id += "_" + string(uuid.NewUUID())
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: o.leaderNamespace, Name: "shardkeeper"},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	// Cancelling leading ends the renewals and, with ReleaseOnCancel,
	// releases the Lease.
	leading, release := context.WithCancel(ctx)
	defer release()
	// runErr is written on the elector's goroutine and read on this one.
	runErr := make(chan error, 1)
	lost := false
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   o.leaseDuration,
		RenewDeadline:   o.renewDeadline,
		RetryPeriod:     o.retryPeriod,
		ReleaseOnCancel: true,
		Name:            "shardkeeper",
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				logrus.WithField("identity", id).Info("became leader")
				if err := run(ctx); err != nil {
					runErr <- err
					release()
					return
				}
				<-ctx.Done()
			},
			OnStoppedLeading: func() {
				if ctx.Err() == nil {
					lost = true
				}
			},
			OnNewLeader: func(leader string) {
				if leader != id {
					logrus.WithField("leader", leader).Info("standing by")
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	le.Run(leading)
	select {
	case err := <-runErr:
		return err
	default:
	}
	if lost {
		return errors.New("lost the leader Lease")
	}
	logrus.Info("shutting down")
	return nil
}
