package main

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A run's convergence medians land on either side of a target of 1.1x
// with the same daemon (their intervals reach past it), so the target is
// also read from several full runs taken together: --pool reads their
// results.json and the report adds the pooled rows. Each run keeps its
// pairs (the daemon's change and the reference's, which alternated), so
// the pooled ratio and its interval are ratioCI's over every pair of every
// run, as a single run's are over its own.

// pooled is the convergence of several runs of the benchmark, pooled.
type pooled struct {
	// Runs are the results pooled, in the order given.
	Runs []pooledRun
	// Sources is the Deployments per shard, the same in every run.
	Sources    int
	Directions []pooledDirection
}

// pooledRun is one results.json that was pooled.
type pooledRun struct {
	Path, Daemon, Date string
	// Runs is its convergence runs per shard count, as "15 at 20 shards".
	Runs []string
}

// pooledDirection is one change, of one shard count, pooled.
type pooledDirection struct {
	Shards int
	Up     bool
	// Took pairs the daemon with the ideal controller (the convergence
	// target), CPU with the informer reference (the CPU target), and
	// IdealCPU with the ideal controller (recorded, as a single run's page
	// records it).
	Took, CPU, IdealCPU pairedRuns
}

// pairedRuns are the daemon's figures and a reference's, paired by index,
// and how many pairs each pooled run gave.
type pairedRuns struct {
	Daemon, Ref []time.Duration
	PerRun      []int
}

// Pairs is how many pairs there are, and from which runs: "30 (15 + 15)".
func (p pairedRuns) Pairs() string {
	return fmt.Sprintf("%d (%s)", len(p.Daemon), strings.Join(project(p.PerRun, strconv.Itoa), " + "))
}

// add appends the pairs of one run: the first min(len(daemon), len(ref))
// of each, as a part that stopped between two controllers' steps left one
// of them a run longer.
func (p *pairedRuns) add(daemon, ref []step, figure func(step) time.Duration) {
	n := min(len(daemon), len(ref))
	p.Daemon = append(p.Daemon, project(daemon[:n], figure)...)
	p.Ref = append(p.Ref, project(ref[:n], figure)...)
	p.PerRun = append(p.PerRun, n)
}

// pool pools the convergence runs of rs, read from paths. The runs must
// have measured convergence with the same Deployments per shard; a shard
// count that some of them did not measure is pooled from those that did.
func pool(paths []string, rs []*results) (*pooled, error) {
	if len(rs) < 2 || len(paths) != len(rs) {
		return nil, errors.New("pooling needs two results.json or more")
	}
	p := &pooled{Sources: rs[0].Settings.Sources}
	var shards []int
	began := map[int64]string{}
	for i, path := range paths {
		r := rs[i]
		if len(r.Convergence) == 0 {
			return nil, fmt.Errorf("%s: no convergence runs to pool", path)
		}
		if earlier, ok := began[r.Began.UnixNano()]; ok && !r.Began.IsZero() {
			return nil, fmt.Errorf("%s and %s are the same run: pooled twice, its pairs would count twice", earlier, path)
		}
		began[r.Began.UnixNano()] = path
		if r.Settings.Sources != p.Sources {
			return nil, fmt.Errorf("%s: %d Deployments per shard, %s: %d: their changes differ", paths[0], p.Sources, path, r.Settings.Sources)
		}
		if err := cpuRecorded(r.Convergence); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		run := pooledRun{Path: path, Daemon: r.MachineValue("shardkeeper"), Date: r.MachineValue("date")}
		for _, c := range r.Convergence {
			run.Runs = append(run.Runs, fmt.Sprintf("%d at %d shards", min(len(c.DaemonUp), len(c.IdealUp)), c.Shards))
			if !slices.Contains(shards, c.Shards) {
				shards = append(shards, c.Shards)
			}
		}
		p.Runs = append(p.Runs, run)
	}
	slices.Sort(shards)
	for _, n := range shards {
		for _, up := range []bool{true, false} {
			p.Directions = append(p.Directions, poolDirection(rs, n, up))
		}
	}
	return p, nil
}

// cpuRecorded fails if a reference's CPU is missing from a change it
// made: the daemon's CPU would be paired with zero, and the ratio would
// come out infinite instead of unknown.
func cpuRecorded(cs []*convergence) error {
	for _, c := range cs {
		for _, d := range c.Directions() {
			for name, ref := range map[string][]step{"ideal controller": d.Ideal, "informer reference": d.Informer} {
				if slices.ContainsFunc(ref, func(s step) bool { return s.CPU <= 0 }) {
					return fmt.Errorf("the %s's CPU was not recorded in a change of %d shards, so its CPU ratios cannot be pooled", name, c.Shards)
				}
			}
		}
	}
	return nil
}

// poolDirection pools one change of n shards, up or down, over rs; a run
// that did not measure n shards gives no pairs.
func poolDirection(rs []*results, n int, up bool) pooledDirection {
	took := func(s step) time.Duration { return s.Took }
	cpu := func(s step) time.Duration { return s.CPU }
	d := pooledDirection{Shards: n, Up: up}
	for _, r := range rs {
		var dir direction // a run that did not measure n shards adds no pairs
		if i := slices.IndexFunc(r.Convergence, func(c *convergence) bool { return c.Shards == n }); i >= 0 {
			dir = r.Convergence[i].Directions()[0]
			if !up {
				dir = r.Convergence[i].Directions()[1]
			}
		}
		d.Took.add(dir.Daemon, dir.Ideal, took)
		d.CPU.add(dir.Daemon, dir.Informer, cpu)
		d.IdealCPU.add(dir.Daemon, dir.Ideal, cpu)
	}
	return d
}

// poolFiles reads the results.json of paths and pools them; the report is
// rendered from the last of them, with the pooled rows.
func poolFiles(paths []string) (*results, error) {
	rs := make([]*results, len(paths))
	for i, path := range paths {
		r, err := readResults(path)
		if err != nil {
			return nil, fmt.Errorf("pooling: %w", err)
		}
		rs[i] = r
	}
	p, err := pool(paths, rs)
	if err != nil {
		return nil, err
	}
	last := *rs[len(rs)-1]
	last.Pool = p
	return &last, nil
}
