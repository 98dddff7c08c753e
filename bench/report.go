package main

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
)

func medianDur(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func medianF(fs []float64) float64 {
	if len(fs) == 0 {
		return 0
	}
	s := append([]float64(nil), fs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func medianRSS(ms []memory) float64 {
	var fs []float64
	for _, m := range ms {
		fs = append(fs, float64(m.RSS))
	}
	return medianF(fs)
}

func medianHWM(ms []memory) float64 {
	var fs []float64
	for _, m := range ms {
		fs = append(fs, float64(m.HWM))
	}
	return medianF(fs)
}

func medianInt(ns []int) float64 {
	var fs []float64
	for _, n := range ns {
		fs = append(fs, float64(n))
	}
	return medianF(fs)
}

func secs(d time.Duration) string { return fmt.Sprintf("%.3f s", d.Seconds()) }
func ms(d time.Duration) string   { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }
func mibF(b float64) string       { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }

func durs(ds []time.Duration, f func(time.Duration) string) string {
	var s []string
	for _, d := range ds {
		s = append(s, f(d))
	}
	return strings.Join(s, ", ")
}

// steps lists the times of steps, each with its CPU.
func steps(ss []step) string {
	var s []string
	for _, st := range ss {
		s = append(s, fmt.Sprintf("%s (%s)", secs(st.took), ms(st.cpu)))
	}
	return strings.Join(s, ", ")
}

func ratio(a, b float64) string {
	if b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

func yesNo(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

func count(n int) string {
	s := fmt.Sprint(n)
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

type row struct{ figure, value, ref, ratio, target, result string }

// medianOf names, after a figure, how many runs its median is of.
func medianOf(runs int) string {
	if runs == 1 {
		return " (1 run)"
	}
	return fmt.Sprintf(" (median of %d)", runs)
}

// convergenceRows compare the daemon with the ideal controller, the
// primary reference, and show the floor beside it; and count the daemon's
// writes against what the changes needed.
func (b *bench) convergenceRows() []row {
	var rows []row
	for _, c := range b.res.convergence {
		if len(c.daemonUp) == 0 || len(c.idealUp) == 0 {
			continue
		}
		n := medianOf(len(c.daemonUp))
		deps := c.shards * len(sources())
		for _, dir := range []struct {
			name          string
			daemon, ideal []step
			floor         []time.Duration
		}{
			{fmt.Sprintf("convergence 0→%d shards: %d Deployments created", c.shards, deps), c.daemonUp, c.idealUp, c.floorUp},
			{fmt.Sprintf("convergence %d→0 shards: %d Deployments deleted", c.shards, deps), c.daemonDown, c.idealDown, c.floorDown},
		} {
			if len(dir.daemon) == 0 || len(dir.ideal) == 0 {
				continue
			}
			d, i := medianDur(took(dir.daemon)), medianDur(took(dir.ideal))
			rows = append(rows, row{dir.name + n, secs(d), fmt.Sprintf("%s (ideal controller); floor %s", secs(i), secs(medianDur(dir.floor))),
				ratio(d.Seconds(), i.Seconds()), "≤ 1.1x the ideal controller", yesNo(d.Seconds() <= 1.1*i.Seconds())})
			dc, ic := medianDur(cpu(dir.daemon)), medianDur(cpu(dir.ideal))
			rows = append(rows, row{"CPU of that change" + n, ms(dc), ms(ic) + " (ideal controller)", ratio(dc.Seconds(), ic.Seconds()), "(recorded)", "—"})
		}
		if len(c.daemonWrites) > 0 {
			sent, exact := writesEach(c.daemonWrites)
			ref := fmt.Sprintf("%d/%d/0 needed", deps, deps)
			if len(c.idealWrites) > 0 {
				ideal, _ := writesEach(c.idealWrites)
				ref += " (ideal controller: " + ideal + ")"
			}
			rows = append(rows, row{fmt.Sprintf("writes at %d shards: Deployment creates/deletes/failed writes, each run", c.shards),
				sent, ref, "—", "exactly as needed in every run", yesNo(exact)})
		}
	}
	return rows
}

// writesEach lists the creates, deletes and failed writes of each run, and
// whether every run wrote exactly what it needed.
func writesEach(ws []runWrites) (string, bool) {
	exact := true
	var sent []string
	for _, w := range ws {
		exact = exact && w.exact()
		sent = append(sent, fmt.Sprintf("%d/%d/%d", w.created, w.deleted, w.failed))
	}
	return strings.Join(sent, ", "), exact
}

func took(steps []step) []time.Duration {
	out := make([]time.Duration, len(steps))
	for i, s := range steps {
		out[i] = s.took
	}
	return out
}

func cpu(steps []step) []time.Duration {
	out := make([]time.Duration, len(steps))
	for i, s := range steps {
		out[i] = s.cpu
	}
	return out
}

func (b *bench) rows() []row {
	// Every median names the runs it is of, not --runs: a part that
	// stopped early made fewer.
	var rows []row
	rows = append(rows, b.convergenceRows()...)
	rows = append(rows, b.placementRows()...)
	levels := b.res.levels
	if len(levels) > 0 {
		var zero, top *level
		for _, lv := range levels {
			if lv.objects == 0 && len(lv.mem) > 0 {
				zero = lv
			}
			if len(lv.mem) > 0 && len(lv.refMem) > 0 {
				top = lv
			}
		}
		for _, lv := range levels {
			if len(lv.mem) == 0 || len(lv.refMem) == 0 {
				continue
			}
			d, r := medianRSS(lv.mem), medianRSS(lv.refMem)
			rw := row{fmt.Sprintf("RSS with %s mapped objects%s", count(lv.objects), medianOf(len(lv.mem))), mibF(d), mibF(r) + " (full dynamic informer)", ratio(d, r), "—", ""}
			if lv == top && lv.objects > 0 {
				rw.target, rw.result = "< 0.1x the reference", yesNo(d < r/10)
			}
			rows = append(rows, rw)
		}
		if zero != nil && top != nil && top != zero {
			dg := medianRSS(top.mem) - medianRSS(zero.mem)
			rg := medianRSS(top.refMem) - medianRSS(zero.refMem)
			rows = append(rows, row{fmt.Sprintf("RSS growth, 0 → %s objects", count(top.objects)), mibF(dg), mibF(rg) + " (full dynamic informer)", ratio(dg, rg),
				"≤ 64 MiB", yesNo(dg <= 64<<20)})
			if zero.memSteady.RSS > 0 && top.memSteady.RSS > 0 && zero.refSteady.RSS > 0 && top.refSteady.RSS > 0 {
				for _, lv := range []*level{zero, top} {
					d, r := float64(lv.memSteady.RSS), float64(lv.refSteady.RSS)
					rw := row{fmt.Sprintf("steady RSS with %s mapped objects (after a GC, 1 run)", count(lv.objects)), mibF(d), mibF(r) + " (full dynamic informer)", ratio(d, r), "—", ""}
					if lv == top {
						rw.target, rw.result = "< 0.1x the reference", yesNo(d < r/10)
					}
					rows = append(rows, rw)
				}
				dg := float64(top.memSteady.RSS - zero.memSteady.RSS)
				rg := float64(top.refSteady.RSS - zero.refSteady.RSS)
				rows = append(rows, row{fmt.Sprintf("steady RSS growth, 0 → %s objects", count(top.objects)), mibF(dg), mibF(rg) + " (full dynamic informer)", ratio(dg, rg),
					"≤ 64 MiB", yesNo(dg <= 64<<20)})
			}
		}
		var small, big *level
		for _, lv := range levels {
			if len(lv.addMean) == 0 || lv.objects == 0 {
				continue
			}
			if small == nil {
				small = lv
			}
			big = lv
		}
		if small != nil {
			s := medianDur(small.addMean)
			rows = append(rows, row{fmt.Sprintf("mean reconcile across a patch adding a shard, %s objects%s", count(small.objects), medianOf(len(small.addMean))), ms(s), "—", "—", "—", ""})
			if big != small {
				g := medianDur(big.addMean)
				rows = append(rows, row{fmt.Sprintf("mean reconcile across a patch adding a shard, %s objects%s", count(big.objects), medianOf(len(big.addMean))), ms(g),
					ms(s) + fmt.Sprintf(" (at %s objects)", count(small.objects)), ratio(g.Seconds(), s.Seconds()), "≤ 1.5x", yesNo(g.Seconds() <= 1.5*s.Seconds())})
			}
		}
	}
	if id := b.res.idle; id != nil {
		rows = append(rows,
			row{fmt.Sprintf("API writes by shardkeeper in %s idle (%s objects, %d shards)", id.window.Round(time.Second), count(id.objects), id.shards),
				fmt.Sprint(id.audit.writes()), "—", "—", "0", yesNo(id.audit.writes() == 0)},
			row{fmt.Sprintf("LISTs by shardkeeper in %s idle (%s objects, %d shards)", id.window.Round(time.Second), count(id.objects), id.shards),
				fmt.Sprint(id.audit.lists()), "—", "—", "0", yesNo(id.audit.lists() == 0)})
	}
	for i := len(levels) - 1; i >= 0; i-- {
		lv := levels[i]
		if len(lv.ready) == 0 {
			continue
		}
		r := medianDur(lv.refSynced)
		refS := "—"
		if len(lv.refSynced) > 0 {
			refS = secs(r) + " (full dynamic informer synced)"
		}
		rows = append(rows,
			row{fmt.Sprintf("start-up to /readyz 200, %s objects%s", count(lv.objects), medianOf(len(lv.ready))), secs(medianDur(lv.ready)), refS, ratio(medianDur(lv.ready).Seconds(), r.Seconds()), "—", ""},
			row{fmt.Sprintf("start-up to every object counted, %s objects%s", count(lv.objects), medianOf(len(lv.counted))), secs(medianDur(lv.counted)), refS, ratio(medianDur(lv.counted).Seconds(), r.Seconds()), "—", ""})
		break
	}
	return rows
}

func (b *bench) summaryTable() string {
	var sb strings.Builder
	sb.WriteString("| figure | shardkeeper | reference, same run | ratio | target | result |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, r := range b.rows() {
		fmt.Fprintf(&sb, "| %s | %s | %s | %s | %s | %s |\n", r.figure, r.value, r.ref, r.ratio, r.target, r.result)
	}
	return sb.String()
}

func (b *bench) report() string {
	var sb strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&sb, format, args...) }
	p("# shardkeeper benchmark\n\n")
	p("Reproduce with `make bench` (this run: `go run ./bench %s`). The run took %s.\n",
		strings.Join(b.res.args, " "), b.res.ended.Sub(b.res.began).Round(time.Second))
	p("Every figure is beside a reference measured in the same run on the same control plane; ratios are what count, absolute times vary from run to run.\n\n")

	p("## Machine\n\n| | |\n| --- | --- |\n")
	for _, kv := range b.res.machine {
		p("| %s | %s |\n", kv[0], kv[1])
	}
	p("\n## Summary\n\n%s\n", b.summaryTable())
	if len(b.res.failures) > 0 || len(b.res.skipped) > 0 {
		p("### Not measured\n\n")
		for _, f := range b.res.failures {
			p("- failed: %s\n", f)
		}
		for _, s := range b.res.skipped {
			p("- skipped: %s\n", s)
		}
		p("\n")
	}
	if note := b.memoryNote(); note != "" {
		p("%s\n\n", note)
	}
	if missed := b.missed(); len(missed) > 0 {
		p("**Targets missed:** %s.\n\n", strings.Join(missed, "; "))
	} else if len(b.rows()) > 0 {
		p("Every target measured in this run was met.\n\n")
	}

	p("## How it is measured\n\n")
	p("- The control plane is the e2e one (`e2e/cluster`: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok on loopback, one fake Node), started with an audit policy (its `AuditPolicy` option) that logs, at the Metadata level, the requests of three users and of nobody else: the daemon's, the ideal controller's and the floor's, each a static token of its own (its `Users` option), so that the controllers compared pay the API server's audit logging alike. The daemon, the floor, the reference, the object writers, kube-controller-manager, kube-scheduler and kwok all use its one API server. `apiserver_request_total` has no label naming the client (its labels here: %s), hence the audit log.\n", b.apiLabels())
	p("- The daemon is `bin/shardkeeper` run as a subprocess with `--preset fleet,flux` and its default client limits (QPS %d, burst %d)%s. It authenticates as a member of `system:masters`. The sources are the fixture's fleet-controller, gitjob, helmops and helm-controller (1 replica each), so every shard is 4 Deployments, and kwok makes their Pods Ready.\n", daemonQPS, daemonBurst, b.extraArgs())
	p("- **Convergence**: a watch on the Deployments of both namespaces is started (from their current resourceVersion) before the ConfigMap patch (`kubectl patch --type merge`); the figure is the time from just before the patch to the arrival of the ADDED (DELETED) event of the last of the shard's Deployments. The primary reference is the **ideal controller** (`bench/ideal`): a separate process that watches a ConfigMap of its own and, on the same patch, creates (deletes) the same number of Deployments, cloned from the same sources, all at once, one goroutine each, with a client whose rate limiter never waits; it keeps no cache, no status and no Events, and remembers what it wrote. The **floor** is the bare parallel client with no ConfigMap at all: the same writes released at once, timed from its first request to the last watch event. The floor, the ideal controller and the daemon alternate, and between steps the namespaces are left to settle (every Deployment rolled out, its Pods Ready; or every ReplicaSet and Pod of the deleted ones gone). The CPU of a change is the process's user and system time (`/proc/PID/stat`) from just before the patch to the last watch event. The writes of each run (up and down) of the daemon and of the ideal controller are read from the audit log: a write that failed is one the API server answered with 400 or more (an AlreadyExists, a NotFound, a conflict).\n")
	p("- **Memory**: the mapped objects (`fixture.Object`: one shard label and a 2 KB last-applied annotation; a quarter each of GitRepos, HelmReleases, Bundles and BundleDeployments, the last two guarded by the Fleet preset since they hold the shard's finalizers; in %d namespaces) are spread over %d shards, which the ConfigMap lists (so %d shard Deployments run throughout). At each object count the daemon is started afresh; once `/readyz` is 200 and its metrics count every object (it reports counts only once every mapped cache has synced), the benchmark waits %s and reads VmRSS (and VmHWM, the peak) from `/proc/PID/status`. The reference (`bench/ref`) caches the same objects with client-go dynamic (unstructured) informers for the same four kinds, prints a line when all have synced, and is read the same way, %s after that line. An idle Go process does not collect garbage until its heap reaches the next goal or two minutes have passed, so what the start-up left behind is still in that reading; the **steady** figures (at 0 objects and the largest count, the last run of each) are read once the process has completed a garbage collection after that reading and its RSS has stopped moving (less than 1 MiB over 5 s). The benchmark makes neither process collect (the daemon, by its own design, collects once and returns the garbage to the operating system after storing an initial list of 1,000 objects or more, the streamed objects it stripped): the daemon's collections are read from its `go_gc_duration_seconds_count`, the reference's from `runtime/metrics`.\n",
		objNSs, b.scaleShards, b.scaleShards*len(sources()), b.settle, b.settle)
	p("- **Decision latency**: with the daemon running, the change of `shardkeeper_reconcile_duration_seconds` _sum/_count across one ConfigMap patch that adds one shard (and one that removes it again), from just before the patch until the shard's Deployments are rolled out and no reconcile has run for 3 s. The window holds the patch's reconcile, whose 4 creates are part of its duration, and the reconciles that the rollout's Deployment status changes bring. The daemon of the last memory run at each object count is measured over %d such pairs of windows (`--latency-runs`), as a window's mean moves by tens of percent from one to the next.\n", b.latencyRuns)
	p("- **Quiet when idle**: at the largest object count, once everything has settled and the daemon has not reconciled for 10 s, the benchmark sends the API server nothing but two scrapes of its metrics for the window (the control plane's own components go on as usual); the daemon's requests received in the window are read from the audit log. A LIST is a `list` request or a `watch` with `sendInitialEvents=true` (a list by streaming).\n")
	p("- **Start-up**: from the daemon's process start to the first 200 of `/readyz` (polled every 10 ms), and to its metrics counting every mapped object (polled every 50 ms). The reference's figure is from its process start to its caches synced.\n")
	b.placementMethod(p)
	p("\n")

	if len(b.res.convergence) > 0 {
		p("## Convergence, every run\n\n| shards | Deployments | direction | floor (its last response) | ideal controller (CPU) | shardkeeper (CPU) |\n| --- | --- | --- | --- | --- | --- |\n")
		for _, c := range b.res.convergence {
			deps := c.shards * len(sources())
			p("| %d | %d | up | %s (%s) | %s | %s |\n", c.shards, deps, durs(c.floorUp, secs), durs(c.floorUpResp, secs), steps(c.idealUp), steps(c.daemonUp))
			p("| %d | %d | down | %s (%s) | %s | %s |\n", c.shards, deps, durs(c.floorDown, secs), durs(c.floorDownResp, secs), steps(c.idealDown), steps(c.daemonDown))
		}
		p("\nThe writes of each run, up and down (audit log):\n\n")
		for _, c := range b.res.convergence {
			for i, w := range c.daemonWrites {
				p("- %d shards, run %d: shardkeeper: %s", c.shards, i+1, w.all)
				if i < len(c.idealWrites) {
					p("; ideal controller: %s", c.idealWrites[i].all)
				}
				p("\n")
			}
		}
		p("\n")
		if pr := b.res.profile; pr != nil {
			p("### The daemon's CPU across bursts of %d shards\n\n", pr.shards)
			p("After the measured runs, a CPU profile of the daemon (`--profiling`, its `/debug/pprof/profile`) over %d s in which it added and removed the %d shards %d times, a second apart (`--profile-seconds`); `go tool pprof -top` of it, whose file stays in the work directory (`--keep`):\n\n```\n%s\n```\n\n",
				pr.seconds, pr.shards, pr.bursts, pr.top)
		}
		if b.env != nil && b.env.rewatches > 0 {
			p("The API server closed %d of the measurement watches (a watch whose client falls behind is closed); each was resumed from the last resourceVersion seen, so an event that arrived during the gap was timed when the resumed watch delivered it.\n\n", b.env.rewatches)
		}
	}
	b.placementRunsTable(p)
	if len(b.res.levels) > 0 {
		p("## Memory and start-up, every run\n\n")
		p("| objects | shardkeeper RSS | peak (VmHWM) | Go heap in use | steady RSS / heap in use (when) | ready | counted | reference RSS | reference peak | reference steady RSS (when) | reference synced |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
		for _, lv := range b.res.levels {
			var rss, hwm, heap, rrss, rhwm []string
			for _, m := range lv.mem {
				rss, hwm = append(rss, mib(m.RSS)), append(hwm, mib(m.HWM))
			}
			for _, h := range lv.heap {
				heap = append(heap, mibF(h))
			}
			for _, m := range lv.refMem {
				rrss, rhwm = append(rrss, mib(m.RSS)), append(rhwm, mib(m.HWM))
			}
			steady, refSteady := "—", "—"
			if lv.memSteady.RSS > 0 {
				steady = fmt.Sprintf("%s / %s (%s after counted)", mib(lv.memSteady.RSS), mibF(lv.heapSteady), lv.steadyAfter.Round(time.Second))
			}
			if lv.refSteady.RSS > 0 {
				refSteady = fmt.Sprintf("%s (%s after synced)", mib(lv.refSteady.RSS), lv.refSteadyAfter.Round(time.Second))
			}
			p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", count(lv.objects), strings.Join(rss, ", "), strings.Join(hwm, ", "), strings.Join(heap, ", "), steady,
				durs(lv.ready, secs), durs(lv.counted, secs), strings.Join(rrss, ", "), strings.Join(rhwm, ", "), refSteady, durs(lv.refSynced, secs))
		}
		var zero *level
		for _, lv := range b.res.levels {
			if lv.objects == 0 && len(lv.heap) > 0 {
				zero = lv
			}
		}
		if zero != nil {
			p("\nPer mapped object, over the daemon at 0 objects (medians):\n\n| objects | RSS per object | Go heap in use per object | reference RSS per object |\n| --- | --- | --- | --- |\n")
			for _, lv := range b.res.levels {
				if lv.objects == 0 || len(lv.heap) == 0 {
					continue
				}
				o := float64(lv.objects)
				refPer := "—"
				if len(lv.refMem) > 0 && len(zero.refMem) > 0 {
					refPer = fmt.Sprintf("%.0f B", (medianRSS(lv.refMem)-medianRSS(zero.refMem))/o)
				}
				p("| %s | %.0f B | %.0f B | %s |\n", count(lv.objects), (medianRSS(lv.mem)-medianRSS(zero.mem))/o, (medianF(lv.heap)-medianF(zero.heap))/o, refPer)
			}
		}
		p("\n")
		for _, lv := range b.res.levels {
			if lv.startCalls != nil && lv == b.res.levels[len(b.res.levels)-1] {
				p("The daemon's requests from its start to every object counted, %s objects (first run, audit log): %s.\n\n", count(lv.objects), lv.startCalls)
				if lists := wholeLists(lv); len(lists) > 0 {
					for _, l := range lists {
						p("- %s\n", l)
					}
					p("\n")
				}
			}
		}
		for _, lv := range b.res.levels {
			if len(lv.ready) > 0 && len(lv.counted) > 0 {
				gap := medianDur(lv.counted) - medianDur(lv.ready)
				if lv.objects > 0 && gap > 100*time.Millisecond {
					p("- %s objects: `/readyz` turned 200 %s before the daemon had counted every mapped object.\n", count(lv.objects), secs(gap))
				}
			}
		}
		p("\n## Decision latency, every window\n\n| objects | mean reconcile, adding a shard | reconciles | mean reconcile, removing it | reconciles |\n| --- | --- | --- | --- | --- |\n")
		for _, lv := range b.res.levels {
			if len(lv.addMean) == 0 {
				continue
			}
			p("| %s | %s | %s | %s | %s |\n", count(lv.objects), durs(lv.addMean, ms), ints(lv.addN), durs(lv.removeMean, ms), ints(lv.removeN))
		}
		p("\n")
	}
	if len(b.res.writeRates) > 0 {
		p("Mapped objects were created with %d writers and a client QPS of %d:", b.writers, b.writeQPS)
		for _, w := range b.res.writeRates {
			p(" %s→%s at %.0f/s;", count(w.from), count(w.to), w.rate)
		}
		p("\n\n")
	}
	if id := b.res.idle; id != nil {
		p("## Idle window\n\n")
		p("%s with %s mapped objects and %d shards (%d shard Deployments).\n\n", id.window.Round(time.Second), count(id.objects), id.shards, id.shards*len(sources()))
		p("- The daemon's requests in the audit log: %s.\n", id.audit)
		p("- `shardkeeper_api_writes_total` grew by %v; `shardkeeper_reconcile_duration_seconds_count` by %v.\n", id.daemonWrites, id.reconciles)
		p("- `apiserver_request_total`, every client (the daemon, kube-controller-manager, kube-scheduler, kwok, the API server's own loopback client, the benchmark's two scrapes), grew by %v writes and %v LISTs on the resources the daemon uses (deployments, configmaps, events, gitrepos, helmops, helmreleases, customresourcedefinitions). All its changes: %s.\n\n",
			id.apiWritesDaemonRes, id.apiListsDaemonRes, byResource(id.apiByResource))
	}
	if len(b.res.notes) > 0 {
		p("## Notes from the run\n\n")
		for _, n := range b.res.notes {
			p("- %s\n", n)
		}
		p("\n")
	}
	return sb.String()
}

func (b *bench) missed() []string {
	var out []string
	for _, r := range b.rows() {
		if r.result == yesNo(false) {
			out = append(out, fmt.Sprintf("%s: %s against %s %s", r.figure, r.value, r.target, ratioNote(r)))
		}
	}
	return out
}

func ratioNote(r row) string {
	if r.ratio == "—" {
		return ""
	}
	return "(" + r.ratio + ")"
}

func ints(ns []int) string {
	var s []string
	for _, n := range ns {
		s = append(s, fmt.Sprint(n))
	}
	return strings.Join(s, ", ")
}

func byResource(m map[string]float64) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var s []string
	for _, k := range ks {
		s = append(s, fmt.Sprintf("%s: %v", k, m[k]))
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func (b *bench) apiLabels() string {
	if b.res.idle == nil || len(b.res.idle.apiLabels) == 0 {
		return "not read in this run"
	}
	l := append([]string(nil), b.res.idle.apiLabels...)
	sort.Strings(l)
	return "`" + strings.Join(l, "`, `") + "`"
}

func (b *bench) extraArgs() string {
	if len(b.daemonArgs) == 0 {
		return ""
	}
	return ", plus `" + strings.Join(b.daemonArgs, " ") + "`"
}

// memoryNote says how to read the two kinds of memory figures, with the
// peaks of the largest count.
func (b *bench) memoryNote() string {
	var top *level
	for _, lv := range b.res.levels {
		if lv.objects > 0 && len(lv.mem) > 0 && lv.memSteady.RSS > 0 {
			top = lv
		}
	}
	if top == nil {
		return ""
	}
	peak, refPeak := int64(0), int64(0)
	for _, m := range top.mem {
		peak = max(peak, m.HWM)
	}
	for _, m := range top.refMem {
		refPeak = max(refPeak, m.HWM)
	}
	return fmt.Sprintf("The RSS read %s after start-up, and the peak (VmHWM), hold what the start-up left for the garbage collector; the steady figures hold what stays. A memory limit has to allow the peak: at %s objects shardkeeper's highest VmHWM was %s, the reference's %s.",
		b.settle, count(top.objects), mib(peak), mib(refPeak))
}

// wholeLists finds the mapped kinds that were listed in a single request
// although the request asked for pages smaller than the kind.
func wholeLists(lv *level) []string {
	var out []string
	perKind := lv.objects / 2
	for k, n := range lv.startCalls {
		if k.verb != "list" || n != 1 {
			continue
		}
		res, q, ok := strings.Cut(k.resource, " ?")
		if !ok || (res != "gitrepos" && res != "helmreleases") {
			continue
		}
		limit := 0
		for _, kv := range strings.Split(q, "&") {
			if v, ok := strings.CutPrefix(kv, "limit="); ok {
				fmt.Sscan(v, &limit)
			}
		}
		if limit > 0 && perKind > limit {
			out = append(out, fmt.Sprintf("The %s %s were listed in one request (`?%s`), which asks for pages of %d: with `resourceVersion=0` the API server answers from its watch cache and ignores `limit`, so the whole kind arrives as one response.", count(perKind), res, q, limit))
		}
	}
	sort.Strings(out)
	return out
}

// placementRows are the summary rows of the placement part.
func (b *bench) placementRows() []row {
	pl := b.res.placement
	if pl == nil || len(pl.runs) == 0 {
		return nil
	}
	n := medianOf(len(pl.runs))
	every := fmt.Sprintf(" (every one of %d runs)", len(pl.runs))
	if len(pl.runs) == 1 {
		every = " (1 run)"
	}
	ids := placementIDs(pl.shards)
	var d, r []time.Duration
	least, most, refMost := -1, 0, 0
	worst, refWorst := 0.0, 0.0
	for _, run := range pl.runs {
		d, r = append(d, run.labelled), append(r, run.refLabelled)
		w := run.mappedWrites.writes()
		if least < 0 || w < least {
			least = w
		}
		most, refMost = max(most, w), max(refMost, run.refPatches)
		worst, refWorst = max(worst, balance(run.loads, ids)), max(refWorst, balance(run.refLoads, ids))
	}
	writes := count(most)
	if least != most {
		writes = count(least) + "–" + count(most)
	}
	dm, rm := medianDur(d), medianDur(r)
	return []row{
		{fmt.Sprintf("placement: %s new objects labelled over %d shards%s", count(pl.objects), pl.shards, n), secs(dm),
			secs(rm) + " (client-go labeller, same client limits)", ratio(dm.Seconds(), rm.Seconds()), "≤ 1.5x the reference", yesNo(dm.Seconds() <= 1.5*rm.Seconds())},
		{fmt.Sprintf("placement: API writes to the mapped kinds for %s objects%s", count(pl.objects), every), writes,
			count(refMost) + " (the reference's patches)", ratio(float64(most), float64(pl.objects)) + " the objects", "= objects (one patch each)", yesNo(least == pl.objects && most == pl.objects)},
		{fmt.Sprintf("placement balance: most objects on a shard over the mean%s", every), fmt.Sprintf("%.3f", worst),
			fmt.Sprintf("%.3f (round robin)", refWorst), "—", "≤ 1.05", yesNo(worst <= 1.05)},
	}
}

// placementMethod writes the "How it is measured" bullet of the placement
// part.
func (b *bench) placementMethod(p func(string, ...any)) {
	pl := b.res.placement
	if pl == nil {
		return
	}
	ids := placementIDs(pl.shards)
	p("- **Placement**: a daemon started as above, plus `--allow-placement`, is given %d shards (`%s` to `%s`) and `placement: \"namespaces: [%s]\"` in its ConfigMap, every other setting its default. Once its status ConfigMap reports every shard Active with all its Deployments ready (placement puts objects on ready shards only) and it has not reconciled for 3 s, %s objects (`fixture.Object` without its shard label: half GitRepos, half HelmReleases) are created in `%s` as the memory part's are (%d writers, client QPS %d), while a metadata watch on both kinds, started before the first create, timestamps each event. The figure is from just before the first create to the arrival of the event that brought the last object a shard label; objects are labelled as they arrive, so creating and labelling overlap. The writes are the daemon's requests to gitrepos, helmreleases and helmops in the audit log from the first create until placement has moved nothing (`shardkeeper_placement_moves_total`) for %s after the last label; the target is one patch per object and no more, and a patch that met a conflict counts. The balance is the most objects on one shard over the mean (objects / shards), from the labels the watch delivered. The reference is a labeller in the benchmark process (client-go, no informer): the daemon's client limits (QPS %v, burst %d), %d writers (the mover's bound on relabels in flight), its own metadata watch on both kinds of `%s`, and for each object that arrives without a label a JSON merge patch with the next shard in turn, placement's two annotations and the object's resourceVersion as precondition, as the daemon sends; as many objects are created there the same way, and it is timed the same way. The daemon keeps running meanwhile (its scope leaves that namespace out), so both labellers run beside the same watchers. Both are bounded by the client's rate limiter: %s patches at %v per second after a burst of %d take at least %s (%s/QPS = %s). After each step the objects are deleted (a DELETE of the collection, per kind) and the daemon left to count them gone; at the end the ConfigMap is set back to no shards and no placement, and the namespaces are deleted, before the memory part, whose counts therefore hold no placement object. The part runs `--placement-runs` times (default 1, as a run takes about 8 minutes at 10,000 objects, mostly the two rate-limited labellings), not `--runs`.\n",
		len(ids), ids[0], ids[len(ids)-1], placeNS, count(pl.objects), placeNS, b.writers, b.writeQPS, pl.quiet,
		pl.qps, pl.burst, refWriters, placeRefNS, count(pl.objects), pl.qps, pl.burst, secs(rateBound(pl.objects, pl.qps, pl.burst)),
		count(pl.objects), secs(time.Duration(float64(pl.objects)/float64(pl.qps)*float64(time.Second))))
}

// rateBound is the least time a client limited to qps requests per second
// after a burst of burst needs for n requests.
func rateBound(n int, qps float32, burst int) time.Duration {
	return time.Duration(float64(max(n-burst, 0)) / float64(qps) * float64(time.Second))
}

// placementRunsTable writes the placement part's runs.
func (b *bench) placementRunsTable(p func(string, ...any)) {
	pl := b.res.placement
	if pl == nil || len(pl.runs) == 0 {
		return
	}
	ids := placementIDs(pl.shards)
	p("## Placement, every run\n\n%s objects over %d shards; rate-limit bound %s.\n\n", count(pl.objects), pl.shards, secs(rateBound(pl.objects, pl.qps, pl.burst)))
	p("| run | created (rate) | shardkeeper labelled | its writes to the mapped kinds (audit) | their response codes | `shardkeeper_placement_moves_total` (reason/result) | objects per shard, fewest–most (most/mean) | reference: created (rate) | labelled | patches (conflicts) | fewest–most (most/mean) |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	spread := func(loads map[string]int) string {
		lo, hi := -1, 0
		for _, id := range ids {
			if lo < 0 || loads[id] < lo {
				lo = loads[id]
			}
			hi = max(hi, loads[id])
		}
		return fmt.Sprintf("%s–%s (%.3f)", count(lo), count(hi), balance(loads, ids))
	}
	for i, r := range pl.runs {
		var codes []string
		for _, c := range slices.Sorted(maps.Keys(r.codes)) {
			codes = append(codes, fmt.Sprintf("%d: %s", c, count(r.codes[c])))
		}
		var moves []string
		for _, k := range slices.Sorted(maps.Keys(r.moves)) {
			moves = append(moves, fmt.Sprintf("%s: %v", k, r.moves[k]))
		}
		p("| %d | %s (%.0f/s) | %s | %s | %s | %s | %s | %s (%.0f/s) | %s | %s (%d) | %s |\n", i+1, secs(r.created), r.createRate, secs(r.labelled), r.mappedWrites,
			strings.Join(codes, ", "), strings.Join(moves, ", "), spread(r.loads), secs(r.refCreated), r.refCreateRate, secs(r.refLabelled), count(r.refPatches), r.refConflict, spread(r.refLoads))
	}
	p("\n")
	for i, r := range pl.runs {
		if other := r.writes.filter(func(k callKey) bool { return !isMappedKind(k.resource) }); len(other) > 0 {
			p("- Run %d: shardkeeper's other writes in the same window: %s.\n", i+1, other)
		}
	}
	p("\n")
}
