package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The burst timeline: where the time of one convergence change goes, from
// the patch of the ConfigMap to the watch event of the last Deployment, for
// the daemon and for the ideal controller. Each controller logs a line
// "reconcile timeline" per reconcile (the daemon at debug level, the ideal
// controller always): its start and the steps it reached. The API server's
// audit log adds when it received each controller's first write and
// answered its last, and when the daemon's Events and status reached it.
// Every point is an offset from just before the patch, on the machine's one
// clock.

// timelineRun is the points of one change, each an offset from the patch.
type timelineRun map[string]time.Duration

// burstTimeline is the timelines of one shard count, up and down.
type burstTimeline struct {
	Shards               int
	DaemonUp, DaemonDown []timelineRun
	IdealUp, IdealDown   []timelineRun
	DaemonReconciles     []int // reconciles the daemon started before the last watch event, each run up and down
	DaemonArgs           []string
}

// The points, in the order a change passes them. The controllers' own
// steps are those of their log lines; see pkg/shardset/timeline.go.
var timelinePoints = []struct{ key, what string }{
	{"reconcile", "reconcile started (the ConfigMap's watch event handled)"},
	{"parsed", "ConfigMap parsed"},
	{"decided", "decided (the plan made)"},
	{"confirmed", "removals confirmed by the API server (a LIST per mapped kind, before a delete)"},
	{"first-write", "first write sent"},
	{"audit-first", "API server received the first write"},
	{"last-answer", "last write answered"},
	{"audit-last", "API server answered the last write"},
	{"watch-last", "watch event of the last Deployment (the figure)"},
	{"done", "reconcile returned"},
	{"events", "Events handed to the broadcaster (a later reconcile)"},
	{"audit-events", "API server received the first Event"},
	{"audit-status", "API server received the status write"},
}

// Points lists the points with what they mean, for the report.
func (t *burstTimeline) Points() []struct{ Key, What string } {
	out := make([]struct{ Key, What string }, len(timelinePoints))
	for i, p := range timelinePoints {
		out[i].Key, out[i].What = p.key, p.what
	}
	return out
}

// At is the point key of every run of runs, skipping the runs without it.
func at(runs []timelineRun, key string) []time.Duration {
	var out []time.Duration
	for _, r := range runs {
		if d, ok := r[key]; ok {
			out = append(out, d)
		}
	}
	return out
}

// timelineLine is a "reconcile timeline" log line, daemon's or ideal's.
type timelineLine struct {
	Msg   string `json:"msg"`
	Start string `json:"start"`
	Steps string `json:"steps"`
}

// reconcileTimeline is a parsed timelineLine.
type reconcileTimeline struct {
	start time.Time
	steps map[string]time.Time
	order []string
}

// readTimelines reads the "reconcile timeline" lines of the log at path
// whose start is in [from, to].
func readTimelines(path string, from, to time.Time) ([]reconcileTimeline, error) {
	var out []reconcileTimeline
	err := eachLine(path, func(line []byte) error {
		l, ok := timelineLineOf(line)
		if !ok {
			return nil
		}
		t, err := parseTimeline(l)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if !t.start.Before(from) && !t.start.After(to) {
			out = append(out, t)
		}
		return nil
	})
	return out, err
}

// timelineLineOf reads line as a "reconcile timeline" line; any other line,
// one that merely mentions the message included, is not one. The line is
// read from its first brace: a traced process's log (gctrace.go) holds the
// runtime's collection lines, written in pieces, and a timeline line
// written between two pieces follows one on the same line.
func timelineLineOf(line []byte) (timelineLine, bool) {
	var l timelineLine
	if i := bytes.IndexByte(line, '{'); i > 0 {
		line = line[i:]
	}
	if !bytes.Contains(line, []byte(`"reconcile timeline"`)) || json.Unmarshal(line, &l) != nil {
		return l, false
	}
	return l, l.Msg == "reconcile timeline"
}

// parseTimeline reads the steps "step=+ms step=+ms" of l.
func parseTimeline(l timelineLine) (reconcileTimeline, error) {
	start, err := time.Parse(time.RFC3339Nano, l.Start)
	if err != nil {
		return reconcileTimeline{}, fmt.Errorf("timeline start %q: %w", l.Start, err)
	}
	t := reconcileTimeline{start: start, steps: map[string]time.Time{}}
	for f := range strings.FieldsSeq(l.Steps) {
		step, ms, ok := strings.Cut(f, "=+")
		if !ok {
			return t, fmt.Errorf("timeline step %q: want step=+milliseconds", f)
		}
		v, err := strconv.ParseFloat(ms, 64)
		if err != nil {
			return t, fmt.Errorf("timeline step %q: %w", f, err)
		}
		if _, seen := t.steps[step]; !seen {
			t.order = append(t.order, step)
		}
		t.steps[step] = start.Add(time.Duration(math.Round(v * float64(time.Millisecond))))
	}
	return t, nil
}

// timelineOf gathers the points of one change patched at t0 whose last
// watch event came at last: from the controller's log at logPath, and from
// the audit log's requests of user up to end.
func timelineOf(logPath, auditLog, user string, t0, last, end time.Time) (timelineRun, int, error) {
	run := timelineRun{"watch-last": last.Sub(t0)}
	tls, err := readTimelines(logPath, t0, end)
	if err != nil {
		return nil, 0, err
	}
	reconciles := 0
	for i, t := range tls {
		if t.start.Before(last) {
			reconciles++
		}
		if i == 0 {
			// The change's own reconcile: the first after the patch.
			run["reconcile"] = t.start.Sub(t0)
			for _, step := range t.order {
				run[step] = t.steps[step].Sub(t0)
			}
			delete(run, "events") // Events of an earlier change
			continue
		}
		if e, ok := t.steps["events"]; ok {
			if _, seen := run["events"]; !seen {
				run["events"] = e.Sub(t0)
			}
		}
	}
	reqs, err := readRequests(auditLog, user, t0, end)
	if err != nil {
		return nil, 0, err
	}
	for _, r := range reqs {
		switch {
		case r.resource == "deployments" && (r.verb == "create" || r.verb == "delete"):
			if _, ok := run["audit-first"]; !ok {
				run["audit-first"] = r.received.Sub(t0)
			}
			run["audit-last"] = max(run["audit-last"], r.answered.Sub(t0))
		case r.resource == "events" && (r.verb == "create" || r.verb == "patch"):
			if _, ok := run["audit-events"]; !ok {
				run["audit-events"] = r.received.Sub(t0)
			}
		case r.resource == "configmaps" && r.verb == "update":
			if _, ok := run["audit-status"]; !ok {
				run["audit-status"] = r.received.Sub(t0)
			}
		}
	}
	return run, reconciles, nil
}

// request is one audited request: what and when.
type request struct {
	verb, resource     string
	received, answered time.Time
}

// readRequests reads the requests of user received in [from, to] from the
// audit log, in the order received.
func readRequests(path, user string, from, to time.Time) ([]request, error) {
	var out []request
	err := eachAuditEvent(path, func(ev auditEvent) {
		if ev.User.Username != user || ev.ObjectRef == nil || ev.Stage != "ResponseComplete" {
			return
		}
		if ev.RequestReceivedTimestamp.Before(from) || ev.RequestReceivedTimestamp.After(to) {
			return
		}
		out = append(out, request{verb: ev.Verb, resource: ev.ObjectRef.Resource, received: ev.RequestReceivedTimestamp, answered: ev.StageTimestamp})
	})
	slices.SortFunc(out, func(a, b request) int { return a.received.Compare(b.received) })
	return out, err
}

// timelineTail is how long after the last watch event a change's timeline
// is read: the daemon's Events and status follow the burst, the status
// paced to one write a second.
const timelineTail = 2500 * time.Millisecond

// runTimelines measures b.timelineRuns changes up and down of every shard
// count, alternating the ideal controller and a daemon that logs at debug
// level (its timeline lines), after the measured runs: debug logging costs
// none of those.
func (b *bench) runTimelines(ctx context.Context, ideal *proc, settle func(string)) error {
	args := append(slices.Clone(b.daemonArgs), "--log-level", "debug", "--log-format", "json")
	d, err := b.env.startCountedDaemon(ctx, b.daemonBin, args, nil)
	if err != nil {
		return err
	}
	defer d.stop()
	settle("the debug daemon's start")
	for _, n := range b.shards {
		ids := shardIDs(n)
		bt := &burstTimeline{Shards: n, DaemonArgs: args}
		b.res.Timelines = append(b.res.Timelines, bt)
		for r := range b.timelineRuns {
			for _, ctl := range []struct {
				name, cm, user, log string
				pid                 int
				names               func([]string) map[string]bool
				up, down            *[]timelineRun
				daemon              bool
			}{
				{"the ideal controller", idealCM, IdealUser, ideal.log, ideal.pid(), idealNames, &bt.IdealUp, &bt.IdealDown, false},
				{"shardkeeper", cmName, DaemonUser, d.log, d.pid(), clones, &bt.DaemonUp, &bt.DaemonDown, true},
			} {
				for _, st := range []struct {
					dir      string
					from, to []string
					out      *[]timelineRun
				}{{"up", nil, ids, ctl.up}, {"down", ids, nil, ctl.down}} {
					res, err := b.env.controllerStep(ctx, ctl.cm, ctl.pid, ctl.names, st.from, st.to, 0)
					if err != nil {
						return fmt.Errorf("timeline, %s, %d shards %s: %w", ctl.name, n, st.dir, err)
					}
					last := res.at.Add(res.Took)
					time.Sleep(timelineTail)
					run, reconciles, err := timelineOf(ctl.log, b.env.auditLog, ctl.user, res.at, last, last.Add(timelineTail))
					if err != nil {
						return err
					}
					*st.out = append(*st.out, run)
					if ctl.daemon {
						bt.DaemonReconciles = append(bt.DaemonReconciles, reconciles)
					}
					b.logf("timeline %d shards run %d: %s %s: %s", n, r+1, ctl.name, st.dir, run)
					settle(ctl.name + " " + st.dir)
				}
			}
		}
	}
	return nil
}

// String lists the points in the order of timelinePoints, in ms.
func (r timelineRun) String() string {
	var out []string
	for _, p := range timelinePoints {
		if d, ok := r[p.key]; ok {
			out = append(out, fmt.Sprintf("%s %.1f ms", p.key, float64(d)/1e6))
		}
	}
	return strings.Join(out, ", ")
}
