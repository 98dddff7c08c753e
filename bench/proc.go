package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shardkeeper/shardkeeper/e2e/cluster"
)

// proc is a process the benchmark started: the daemon or the reference.
type proc struct {
	name    string
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{}
	log     string

	// lines receives the process's stdout lines (the reference's "synced").
	mu    sync.Mutex
	lines []string
}

// startProc starts bin with args and logs its stderr and stdout to
// logPath; its stdout lines are kept for waitLine and gcCount too.
func startProc(name, logPath string, bin string, args ...string) (*proc, error) {
	return startProcEnv(name, logPath, nil, bin, args...)
}

// startProcEnv is startProc with the environment environ (nil: the
// benchmark's own).
func startProcEnv(name, logPath string, environ []string, bin string, args ...string) (*proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	p := &proc{name: name, log: logPath, done: make(chan struct{})}
	// The process's lifetime is not a context's: stop ends it with SIGTERM
	// and a grace period, so that a daemon shuts down as it would in a
	// cluster, and Pdeathsig ends it with the benchmark.
	// The binary, its arguments and its environment are the benchmark's own.
	p.cmd = exec.Command(bin, args...) //nolint:noctx,gosec // ended by stop, with a grace period, not by a context
	p.cmd.Env = environ
	p.cmd.Stderr = f
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, errors.Join(err, f.Close())
	}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		return nil, errors.Join(fmt.Errorf("starting %s: %w", name, err), f.Close())
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(f, line)
			p.mu.Lock()
			p.lines = append(p.lines, line)
			p.mu.Unlock()
		}
		_ = p.cmd.Wait()
		_ = f.Close() // the process has ended: nothing is left to log
		close(p.done)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool { return cluster.Exited(p.done) }

// stop ends the process with SIGTERM, then SIGKILL after 15 s.
func (p *proc) stop() {
	if p == nil || p.exited() {
		return
	}
	cluster.Terminate(p.cmd.Process, p.done, 15*time.Second)
}

// waitLine waits for a stdout line starting with prefix.
func (p *proc) waitLine(prefix string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		p.mu.Lock()
		found := slices.ContainsFunc(p.lines, func(l string) bool { return strings.HasPrefix(l, prefix) })
		p.mu.Unlock()
		if found {
			return nil
		}
		if p.exited() {
			return fmt.Errorf("%s exited; see %s", p.name, p.log)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: no line %q after %s", p.name, prefix, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// gcCount returns the last "gc N" line's N (the reference prints them).
func (p *proc) gcCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range slices.Backward(p.lines) {
		if v, ok := strings.CutPrefix(l, "gc "); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

// memory is what /proc/PID/status says about a process's memory.
type memory struct {
	RSS, HWM int64 // bytes
}

func readMemory(pid int) (memory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memory{}, err
	}
	var m memory
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			m.RSS = n * 1024
		case "VmHWM":
			m.HWM = n * 1024
		}
	}
	if m.RSS == 0 {
		return m, fmt.Errorf("no VmRSS for pid %d", pid)
	}
	return m, nil
}

// daemon is a shardkeeper process.
type daemon struct {
	*proc
	probe, metrics string
}

var daemonSeq int

func (e *env) startDaemon(ctx context.Context, bin string, extra []string) (*daemon, error) {
	return e.startDaemonEnv(ctx, bin, extra, nil)
}

// startDaemonEnv is startDaemon with the environment environ (nil: the
// benchmark's own).
func (e *env) startDaemonEnv(ctx context.Context, bin string, extra, environ []string) (*daemon, error) {
	pp, err := freePort(ctx)
	if err != nil {
		return nil, err
	}
	mp, err := freePort(ctx)
	if err != nil {
		return nil, err
	}
	daemonSeq++
	args := append([]string{
		"--kubeconfig", e.daemonKubeconfig,
		"--namespace", fleetNS, "--configmap", cmName,
		"--preset", "fleet,flux", "--fleet-namespace", fleetNS, "--flux-namespace", fluxNS,
		"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", mp),
		"--health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", pp),
	}, extra...)
	p, err := startProcEnv("shardkeeper", filepath.Join(e.workDir, fmt.Sprintf("shardkeeper-%02d.log", daemonSeq)), environ, bin, args...)
	if err != nil {
		return nil, err
	}
	return &daemon{proc: p, probe: fmt.Sprintf("http://127.0.0.1:%d", pp), metrics: fmt.Sprintf("http://127.0.0.1:%d/metrics", mp)}, nil
}

// The ConfigMaps the ideal controller and the informer reference watch,
// beside the daemon's.
const (
	idealCM    = "ideal"
	informerCM = "informer"
)

// startIdeal starts the ideal controller (bench/ideal) on the sources, with
// its ConfigMap created empty and the environment environ (nil: the
// benchmark's own), and waits until its watch runs.
func (e *env) startIdeal(ctx context.Context, bin string, environ []string) (*proc, error) {
	return e.startReference(ctx, "ideal", idealCM, e.idealKubeconfig, bin, environ)
}

// startInformer starts the informer reference (bench/ideal --informer) as
// startIdeal starts the ideal controller; it is watching once its
// informers have synced.
func (e *env) startInformer(ctx context.Context, bin string, environ []string) (*proc, error) {
	return e.startReference(ctx, "informer", informerCM, e.informerKubeconfig, bin, environ, "--informer")
}

func (e *env) startReference(ctx context.Context, name, cm, kubeconfig, bin string, environ []string, extra ...string) (*proc, error) {
	_, err := e.kube.CoreV1().ConfigMaps(fleetNS).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: cm}, Data: map[string]string{"shards": "[]"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("the ConfigMap of the %s reference: %w", name, err)
	}
	args := append([]string{"--kubeconfig", kubeconfig, "--configmap", fleetNS + "/" + cm}, extra...)
	for _, s := range sources() {
		args = append(args, "--source", s.Namespace+"/"+s.Name)
	}
	p, err := startProcEnv(name, filepath.Join(e.workDir, name+".log"), environ, bin, args...)
	if err != nil {
		return nil, err
	}
	if err := p.waitLine("watching", time.Minute); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// cpuTime is the CPU time the process pid has used: the sum over its
// threads of the time the scheduler ran them (/proc/PID/task/TID/schedstat,
// in nanoseconds). /proc/PID/stat's utime and stime count in clock ticks
// of 10 ms, too coarse for a change that costs a few of them. A Go process
// keeps its threads, so none of its time leaves with an exited one.
func cpuTime(pid int) (time.Duration, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil {
		return 0, err
	}
	if len(tasks) == 0 {
		return 0, fmt.Errorf("no threads of pid %d in /proc", pid)
	}
	var total time.Duration
	for _, path := range tasks {
		b, err := os.ReadFile(path)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // the thread has just exited
			}
			return 0, err
		}
		f := strings.Fields(string(b))
		if len(f) < 1 {
			return 0, fmt.Errorf("%s: empty", path)
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", path, err)
		}
		total += time.Duration(ns)
	}
	return total, nil
}

// waitStableRSS samples the RSS every second until it has moved less than
// 1 MiB over five seconds (the Go runtime returns freed memory to the OS
// gradually), or timeout passes, and returns the last sample.
func waitStableRSS(pid int, timeout time.Duration) (memory, error) {
	deadline := time.Now().Add(timeout)
	var window []memory
	for {
		m, err := readMemory(pid)
		if err != nil {
			return memory{}, err
		}
		window = append(window, m)
		if len(window) > 6 {
			window = window[1:]
		}
		if len(window) == 6 {
			lo, hi := window[0].RSS, window[0].RSS
			for _, w := range window {
				lo, hi = min(lo, w.RSS), max(hi, w.RSS)
			}
			if hi-lo < 1<<20 {
				return m, nil
			}
		}
		if time.Now().After(deadline) {
			return m, nil
		}
		time.Sleep(time.Second)
	}
}

var localHTTP = &http.Client{Timeout: 10 * time.Second}

// waitReady polls /readyz every 10 ms and returns when it first answers 200.
func (d *daemon) waitReady(ctx context.Context, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		if getOK(ctx, d.probe+"/readyz") {
			return time.Now(), nil
		}
		if err := d.interrupted(ctx); err != nil {
			return time.Time{}, err
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("shardkeeper not ready after %s; see %s", timeout, d.log)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// interrupted returns why a wait for the daemon cannot go on: it exited,
// or ctx ended.
func (d *daemon) interrupted(ctx context.Context) error {
	if d.exited() {
		return fmt.Errorf("shardkeeper exited; see %s", d.log)
	}
	return ctx.Err()
}

// getOK reports whether a GET of url answers 200.
func getOK(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := localHTTP.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close() // the body is read: a failed close loses nothing
	return resp.StatusCode == http.StatusOK
}

// waitCounted polls /metrics every 50 ms until the daemon reports shards
// (it does so only once every mapped kind's cache has synced) and counts
// objects mapped objects in all.
func (d *daemon) waitCounted(ctx context.Context, objects int, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		m, err := scrape(ctx, d.metrics)
		if err == nil && m.has("shardkeeper_shards") && int(m.sum("shardkeeper_mapped_objects", nil)) == objects {
			return time.Now(), nil
		}
		if err := d.interrupted(ctx); err != nil {
			return time.Time{}, err
		}
		if time.Now().After(deadline) {
			if err != nil {
				return time.Time{}, fmt.Errorf("shardkeeper: no count of the %d mapped objects after %s: %w; see %s", objects, timeout, err, d.log)
			}
			return time.Time{}, fmt.Errorf("shardkeeper counted %v of %d mapped objects after %s; see %s", m.sum("shardkeeper_mapped_objects", nil), objects, timeout, d.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sample is one line of a Prometheus text exposition.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

type samples []sample

// scrape reads the metrics the daemon serves at url.
func scrape(ctx context.Context, url string) (samples, error) {
	return scrapeWith(ctx, localHTTP, url, "")
}

// scrapeWith reads the metrics at url with the client c and, if not
// empty, the bearer token.
func scrapeWith(ctx context.Context, c *http.Client, url, token string) (samples, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return parseMetrics(resp.Body)
}

// parseMetrics reads the Prometheus text format, enough of it for the
// metrics read here (no escaped quotes or commas inside label values).
func parseMetrics(r io.Reader) (samples, error) {
	var out samples
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s := sample{labels: map[string]string{}}
		var rest string
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			if j < i {
				return nil, fmt.Errorf("bad metrics line %q", line)
			}
			s.name = line[:i]
			for _, kv := range splitLabels(line[i+1 : j]) {
				k, v, ok := strings.Cut(kv, "=")
				if ok {
					s.labels[k] = strings.Trim(v, `"`)
				}
			}
			rest = strings.TrimSpace(line[j+1:])
		} else {
			f := strings.Fields(line)
			s.name, rest = f[0], strings.Join(f[1:], " ")
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		s.value = v
		out = append(out, s)
	}
	return out, sc.Err()
}

func splitLabels(s string) []string {
	var out []string
	inQuote := false
	start := 0
	for i := range len(s) {
		switch s[i] {
		case '"':
			inQuote = !inQuote
		case ',':
			if !inQuote {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

func (m samples) has(name string) bool {
	for _, s := range m {
		if s.name == name {
			return true
		}
	}
	return false
}

// sum adds the samples of name whose labels include match.
func (m samples) sum(name string, match map[string]string) float64 {
	t := 0.0
	for _, s := range m {
		if s.name != name {
			continue
		}
		ok := true
		for k, v := range match {
			if s.labels[k] != v {
				ok = false
			}
		}
		if ok {
			t += s.value
		}
	}
	return t
}

// settle waits until the source namespaces are quiet: every Deployment
// rolled out, one ReplicaSet each, one Ready Pod per replica and nothing
// terminating, on two checks two seconds apart. It bounds a wait between
// measurements so that one does not run into the previous one's rollout or
// garbage collection; it measures nothing.
func (e *env) settle(ctx context.Context, timeout time.Duration) error {
	check := func() error {
		for _, ns := range []string{fleetNS, fluxNS} {
			ds, err := e.kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			want := int32(0)
			for _, d := range ds.Items {
				r := int32(1)
				if d.Spec.Replicas != nil {
					r = *d.Spec.Replicas
				}
				want += r
				if d.Status.ObservedGeneration < d.Generation || d.Status.AvailableReplicas < r || d.Status.Replicas != r {
					return fmt.Errorf("deployment %s/%s not rolled out", ns, d.Name)
				}
			}
			rs, err := e.kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			if len(rs.Items) != len(ds.Items) {
				return fmt.Errorf("%s: %d ReplicaSets for %d Deployments", ns, len(rs.Items), len(ds.Items))
			}
			pods, err := e.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			if len(pods.Items) != int(want) {
				return fmt.Errorf("%s: %d Pods, want %d", ns, len(pods.Items), want)
			}
			for _, p := range pods.Items {
				if p.DeletionTimestamp != nil || !podReady(&p) {
					return fmt.Errorf("pod %s/%s not ready", ns, p.Name)
				}
			}
		}
		return nil
	}
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = check(); err == nil {
			time.Sleep(2 * time.Second)
			if err = check(); err == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return errors.Join(fmt.Errorf("the source namespaces did not settle in %s", timeout), err)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
