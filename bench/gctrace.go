package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The convergence part runs the daemon, the ideal controller and the
// informer reference with the Go runtime's collection trace on
// (GODEBUG=gctrace=1), so that the garbage collections which started during
// a change are counted beside its CPU: every controller collects in most
// changes, and a ratio of their CPU says nothing of why without it. The time the trace gives a collection is not
// CPU time, so it is never subtracted from the process's: the runtime
// counts a stop-the-world phase as its wall time times the Ps it stopped,
// and mark work as the wall time a worker or an assist held a P, whether
// the kernel ran its thread or not. The trace changes no decision of the
// collector; it writes one line to standard error at the end of each
// collection.

// gcTraceEnv returns environ with gctrace=1 added to GODEBUG, keeping the
// settings GODEBUG already holds. Of several GODEBUG entries a process
// sees the last (os/exec), so that one is the one extended.
func gcTraceEnv(environ []string) []string {
	out := slices.Clone(environ)
	for i, kv := range slices.Backward(out) {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			if v != "" {
				v += ","
			}
			out[i] = "GODEBUG=" + v + "gctrace=1"
			return out
		}
	}
	return append(out, "GODEBUG=gctrace=1")
}

// gcCycle is one collection of a traced process: its number, when it
// started and the time the runtime counts for it (its stop-the-world
// phases, and the mark work of assists, dedicated and idle workers).
type gcCycle struct {
	n     int
	start time.Time
	cpu   time.Duration
}

// gcLine is the runtime's trace line of one collection (runtime/mgc.go):
// "gc 12 @3.456s 1%: 0.02+1.2+0.01 ms clock, 0.05+0.3/1.1/2.0+0.02 ms
// cpu, ...": @ is the time since the process started.
var gcLine = regexp.MustCompile(`^gc (\d+) @([0-9.]+)s \d+%: [^,]*, ([0-9.+/]+) ms cpu,`)

// parseGCTrace reads the collections in a traced process's output, whose
// runtime started at started; other lines are skipped.
func parseGCTrace(r io.Reader, started time.Time) ([]gcCycle, error) {
	var cycles []gcCycle
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		m := gcLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		n, err := strconv.Atoi(m[1])
		if err != nil {
			return nil, fmt.Errorf("gctrace line %q: %w", sc.Text(), err)
		}
		at, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			return nil, fmt.Errorf("gctrace line %q: %w", sc.Text(), err)
		}
		var cpu float64
		for part := range strings.FieldsFuncSeq(m[3], func(r rune) bool { return r == '+' || r == '/' }) {
			ms, err := strconv.ParseFloat(part, 64)
			if err != nil {
				return nil, fmt.Errorf("gctrace line %q: %w", sc.Text(), err)
			}
			cpu += ms
		}
		cycles = append(cycles, gcCycle{
			n:     n,
			start: started.Add(time.Duration(at * float64(time.Second))),
			cpu:   time.Duration(cpu * float64(time.Millisecond)),
		})
	}
	return cycles, sc.Err()
}

// gcShare is what the collections which started within a measured change
// cost: how many, and their time as the runtime counts it (CPU keeps the
// name that results.json has always given it). A collection that runs
// past the end of the change counts whole.
type gcShare struct {
	Count int
	CPU   time.Duration
}

// errTraceLineLost is a collection near a change whose trace line did not
// parse: the runtime writes a line in many small writes, and a line of
// the process's own output, or of the benchmark's copy of its standard
// output into the same file, can land among them.
var errTraceLineLost = errors.New("a collection's trace line near the change is unreadable")

// collectionsIn sums the cycles that started between start and end, both
// included. The runtime numbers its collections one after the other, so a
// number missing between the last collection before start and the first
// after end is one that may have started within, whose line was lost; a
// line lost after the last collection logged cannot be told.
func collectionsIn(cycles []gcCycle, start, end time.Time) (gcShare, error) {
	var s gcShare
	before, after := 0, 0
	for _, c := range cycles {
		switch {
		case c.start.Before(start):
			before = max(before, c.n)
		case c.start.After(end):
			if after == 0 || c.n < after {
				after = c.n
			}
		default:
			s.Count++
			s.CPU += c.cpu
		}
	}
	if after > 0 && after-before-1 != s.Count {
		return gcShare{}, errTraceLineLost
	}
	return s, nil
}

// collections reads p's log for the collections that started between
// start and end; p must have been started with gcTraceEnv. The runtime's
// clock starts a little after p.started (the exec), so a collection is
// placed a few milliseconds early at most.
func (p *proc) collections(start, end time.Time) (gcShare, error) {
	f, err := os.Open(p.log)
	if err != nil {
		return gcShare{}, err
	}
	cycles, err := parseGCTrace(f, p.started)
	err = errors.Join(err, f.Close())
	if err != nil {
		return gcShare{}, fmt.Errorf("%s's collections: %w", p.name, err)
	}
	gc, err := collectionsIn(cycles, start, end)
	if err != nil {
		return gcShare{}, fmt.Errorf("%s: %w", p.log, err)
	}
	return gc, nil
}
