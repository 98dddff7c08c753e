package main

import (
	"context"
	"fmt"
	"time"
)

// What a quiet control plane is: the API server and etcd together spend
// less than quietShare of one core over quietWindow. A start-up, and the
// LIST it is measured against, each begin from one; the wait ends after
// quietTimeout regardless, and the share then is logged.
const (
	quietShare   = 0.05
	quietWindow  = time.Second
	quietTimeout = 30 * time.Second
)

// waitQuiet waits until the processes pids have together spent less than
// share of a core over a window, or timeout passes, and returns their
// share over the last window; an error only if a process cannot be read.
//
// A measurement that began while the API server still worked off the one
// before (a LIST of 100,000 objects, a daemon's exit) would pay for it;
// waiting makes each begin from the same state, and the log shows what
// that state was.
func waitQuiet(ctx context.Context, pids []int, share float64, window, timeout time.Duration) (float64, error) {
	deadline := time.Now().Add(timeout)
	last, err := cpuOf(pids)
	if err != nil {
		return 0, err
	}
	for {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(window):
		}
		now, err := cpuOf(pids)
		if err != nil {
			return 0, err
		}
		got := (now - last).Seconds() / window.Seconds()
		if got < share || !time.Now().Before(deadline) {
			return got, nil
		}
		last = now
	}
}

// cpuOf is the CPU time the processes pids have spent, together.
func cpuOf(pids []int) (time.Duration, error) {
	var total time.Duration
	for _, pid := range pids {
		t, err := cpuTime(pid)
		if err != nil {
			return 0, err
		}
		total += t
	}
	return total, nil
}

// quiet waits for a quiet control plane (waitQuiet) before the
// measurement what, then makes the API server collect its garbage, and
// logs both.
//
// The API server's heap, some 2 GiB at 100,000 objects, is otherwise
// collected wherever its trigger falls, and its handlers are slower while
// it marks: the same daemon's start-up measured 0.84x its LIST in a run
// where the LISTs took the collections, and 2.48x in one where the
// start-ups paid more. The collection comes last, just before the
// measurement, so that nothing the API server does while the benchmark
// waits is left on its heap; it is over (swept, too) when its answer
// arrives, and a start-up or a LIST allocates less than the heap it
// leaves holds, so that neither crosses the next trigger.
func (b *bench) quiet(ctx context.Context, what string) error {
	var pids []int
	for _, name := range []string{"kube-apiserver", "etcd"} {
		pid, err := b.env.cluster.PID(name)
		if err != nil {
			return fmt.Errorf("before %s: %w", what, err)
		}
		pids = append(pids, pid)
	}
	began := time.Now()
	share, err := waitQuiet(ctx, pids, quietShare, quietWindow, quietTimeout)
	if err != nil {
		return fmt.Errorf("before %s: %w", what, err)
	}
	waited := time.Since(began)
	if err := b.env.cluster.CollectAPIServerGarbage(ctx); err != nil {
		return fmt.Errorf("before %s: %w", what, err)
	}
	b.logf("before %s: the API server and etcd at %.0f %% of a core, after %s; then the API server collected its garbage in %s",
		what, 100*share, waited.Round(100*time.Millisecond), (time.Since(began) - waited).Round(time.Millisecond))
	return nil
}
