package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// burstProfile is a CPU profile of the daemon taken across bursts of one
// shard count, up and down.
type burstProfile struct {
	Shards, Bursts int
	Seconds        int
	Path           string // the profile, in the work directory
	Top            string // `go tool pprof -top` of it
}

// profileBursts takes a CPU profile of the daemon (its --profiling
// endpoint) for b.profileSeconds while it adds and removes the shards ids
// again and again, a second apart. It runs after the measured runs, so that
// profiling costs none of them.
func (b *bench) profileBursts(ctx context.Context, d *daemon, ids []string) error {
	prof := &burstProfile{Shards: len(ids), Seconds: b.profileSeconds,
		Path: filepath.Join(b.env.workDir, fmt.Sprintf("shardkeeper-cpu-%d-shards.pprof", len(ids)))}
	done := make(chan error, 1)
	go func() { done <- d.cpuProfile(ctx, prof.Seconds, prof.Path) }()
	// The profile starts once its request has arrived.
	time.Sleep(500 * time.Millisecond)
	up := false // whether the shards are there
	for {
		select {
		case err := <-done:
			if err != nil {
				return err
			}
			if up {
				if _, err := b.env.controllerStep(ctx, cmName, d.pid(), clones, ids, nil, 0); err != nil {
					return err
				}
			}
			top, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=25", prof.Path).CombinedOutput() //nolint:gosec // the profile the benchmark has just written to its work directory
			if err != nil {
				return fmt.Errorf("go tool pprof: %w: %s", err, top)
			}
			prof.Top = strings.TrimSpace(string(top))
			b.res.Profile = prof
			b.logf("profile of %d bursts of %d shards: %s", prof.Bursts, len(ids), prof.Path)
			return nil
		default:
		}
		from, to := ids, []string(nil)
		if !up {
			from, to = nil, ids
		}
		if _, err := b.env.controllerStep(ctx, cmName, d.pid(), clones, from, to, 0); err != nil {
			return err
		}
		up = !up
		prof.Bursts++
		time.Sleep(time.Second)
	}
}

// cpuProfile writes the daemon's CPU profile over seconds to path.
func (d *daemon) cpuProfile(ctx context.Context, seconds int, path string) error {
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", strings.TrimSuffix(d.metrics, "/metrics"), seconds)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("CPU profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("CPU profile: %s: %s", resp.Status, body)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		return errors.Join(fmt.Errorf("CPU profile: %w", err), f.Close())
	}
	return f.Close()
}
