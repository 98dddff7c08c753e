//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shardkeeper/shardkeeper/e2e/cluster"
)

// fluxControllers are the Flux controllers the stand-in can run: each is a
// binary of that name in the bin directory (`make flux-controllers`).
var fluxControllers = []string{"source-controller", "kustomize-controller", "helm-controller"}

// fluxContainer is the container of a Flux controller's pod.
const fluxContainer = "manager"

// The stand-in for the kubelet: for every Deployment of a Flux controller
// in a namespace, it runs the controller's real binary as a local process,
// with the arguments and environment of the Deployment's container. kwok
// marks the Deployment's pods Ready; these processes are what would run in
// them.
//
// Processes on one host share what pods each have their own of: the network
// namespace (ports, Services, cluster DNS) and the filesystem. The stand-in
// changes only that, as this table says (<loopback> is the 127.0.0.x that
// stands for the advertised host):
//
//	in the pod                             here                           why
//	--metrics-addr (default :8080)         127.0.0.1:<free port>          one port per process
//	--health-addr (default :9440)          127.0.0.1:<free port>          one port per process
//	--storage-addr (default :9090)         <loopback>:<free port>         one port per process
//	--storage-adv-addr=<svc>.<ns>.svc...   the same <loopback>:<port>     no Service here: each
//	                                                                      advertised host has a
//	                                                                      127.0.0.x of its own
//	--events-addr=http://notification-...  http://<event sink>/           no cluster DNS; the sink
//	                                                                      answers 202 as notification-
//	                                                                      controller does (unanswered,
//	                                                                      each Event holds a reconcile
//	                                                                      15 s)
//	--storage-path (default /data)         a directory of the instance    one filesystem (an emptyDir in
//	                                                                      the pod)
//	--enable-leader-election               dropped                        out of a cluster it needs a
//	                                                                      namespace flag the controllers
//	                                                                      lack
//	TMPDIR (/tmp, an emptyDir)             a directory of the instance    kustomize-controller empties
//	                                                                      its temp dir at start
//	HOME (the image's)                     a directory of the instance    one filesystem
//	the ServiceAccount's token             KUBECONFIG=<admin kubeconfig>  no in-cluster config out of a
//	                                                                      pod
//
// Everything else is as rendered: the other arguments (the shard's
// --watch-label-selector above all), with $(VAR) expanded from the
// container's environment as the kubelet does, and that environment. The
// container's command, which Flux's images leave to the image, is not run:
// the binary of the controller is. One process stands for a Deployment,
// whatever its replicas (Flux runs one); it is restarted when the pod
// template changes or the process exits, and stopped
// (SIGTERM, then SIGKILL) when the Deployment goes, is scaled to zero or is
// held.
type fluxKubelet struct {
	t          *testing.T
	ns         string
	binDir     string
	root       string
	kubeconfig string
	// events is the address of the sink that stands for
	// notification-controller's event receiver.
	events string

	mu      sync.Mutex
	running map[string]*fluxInstance
	held    map[string]bool
	// storage maps an advertised storage host, as rendered and expanded
	// (source-controller-a.<ns>.svc.cluster.local.), to the loopback
	// address and port that stand for it.
	storage map[string]string
	// logs are the log files of every instance a Deployment has had.
	logs map[string][]string
	// exits counts the processes of a Deployment that ended by themselves.
	exits map[string]int
	seq   int

	stop    chan struct{}
	stopped chan struct{}
}

// fluxInstance is the process that runs one Deployment's controller.
type fluxInstance struct {
	deployment string
	// template is the hash of the pod template the process was started
	// from: the kubelet replaces a pod when the template changes, and only
	// then.
	template   string
	cmd        *exec.Cmd
	done       chan struct{}
	exitedAt   time.Time
	healthAddr string
}

// restartDelay is how long the stand-in waits before it starts a process
// that exited by itself again, as the kubelet backs off a crashing
// container (a controller exits at start while its CRDs are missing).
const restartDelay = 2 * time.Second

// startFluxKubelet runs the Flux controllers of the Deployments in ns
// until the test ends.
func startFluxKubelet(t *testing.T, ns string) *fluxKubelet {
	t.Helper()
	binDir := os.Getenv(cluster.BinDirEnv)
	for _, c := range fluxControllers {
		if _, err := os.Stat(filepath.Join(binDir, c)); err != nil {
			t.Fatalf("%s: %v; build it with `make flux-controllers`, or run the e2e tests with `make test-e2e`", c, err)
		}
	}
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(sink.Close)
	k := &fluxKubelet{
		t: t, ns: ns, binDir: binDir, root: t.TempDir(), kubeconfig: env.KubeconfigPath(), events: sink.URL + "/",
		running: map[string]*fluxInstance{}, held: map[string]bool{}, storage: map[string]string{},
		logs: map[string][]string{}, exits: map[string]int{},
		stop: make(chan struct{}), stopped: make(chan struct{}),
	}
	go k.loop()
	t.Cleanup(func() {
		close(k.stop)
		<-k.stopped
		k.stopAll()
		if t.Failed() {
			k.printLogs()
		}
	})
	return k
}

// loop syncs the processes with the Deployments twice a second until stop.
func (k *fluxKubelet) loop() {
	defer close(k.stopped)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-k.stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		list, err := kube.AppsV1().Deployments(k.ns).List(ctx, metav1.ListOptions{})
		cancel()
		if err != nil {
			continue // the API server restarts, or the namespace goes
		}
		k.sync(list.Items)
	}
}

// sync starts, restarts and stops processes so that each Deployment of a
// Flux controller that should run has one.
func (k *fluxKubelet) sync(deps []appsv1.Deployment) {
	want := map[string]*appsv1.Deployment{}
	for i := range deps {
		d := &deps[i]
		if _, ok := fluxController(d); ok && d.DeletionTimestamp == nil && (d.Spec.Replicas == nil || *d.Spec.Replicas > 0) {
			want[d.Name] = d
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for name, inst := range k.running {
		d, ok := want[name]
		exited := cluster.Exited(inst.done)
		switch {
		case !ok || k.held[name] || templateHash(d) != inst.template:
			k.stopInstance(inst, "the Deployment is gone, scaled to zero or held, or its pod template changed")
		case exited && time.Since(inst.exitedAt) >= restartDelay:
			k.exits[name]++
			k.t.Logf("flux stand-in: %s exited (%v); starting it again", name, inst.cmd.ProcessState)
		default:
			continue
		}
		delete(k.running, name)
	}
	for name, d := range want {
		if k.running[name] != nil || k.held[name] {
			continue
		}
		inst, err := k.start(d)
		if err != nil {
			k.t.Logf("flux stand-in: cannot start %s: %v", name, err)
			continue
		}
		k.running[name] = inst
	}
}

// fluxController returns the controller of a Deployment named after it, or
// after it and a shard (<controller>-<shard>), whose container "manager"
// runs it.
func fluxController(d *appsv1.Deployment) (string, bool) {
	if !slices.ContainsFunc(d.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == fluxContainer }) {
		return "", false
	}
	for _, c := range fluxControllers {
		if d.Name == c || strings.HasPrefix(d.Name, c+"-") {
			return c, true
		}
	}
	return "", false
}

// start runs the controller of d as a new process.
func (k *fluxKubelet) start(d *appsv1.Deployment) (*fluxInstance, error) {
	controller, _ := fluxController(d)
	i := slices.IndexFunc(d.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == fluxContainer })
	c := d.Spec.Template.Spec.Containers[i]
	k.seq++
	dir := filepath.Join(k.root, fmt.Sprintf("%s-%d", d.Name, k.seq))
	for _, sub := range []string{"data", "tmp", "home"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, fmt.Errorf("instance directory: %w", err)
		}
	}
	containerEnv, err := resolveEnv(&c, &d.Spec.Template.Spec, k.ns, d.Name)
	if err != nil {
		return nil, err
	}
	args := expandArgs(c.Args, containerEnv)
	local, err := k.localFlags(controller, args, dir)
	if err != nil {
		return nil, err
	}
	args = localArgs(args, local)

	logPath := filepath.Join(dir, "log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("log file: %w", err)
	}
	fmt.Fprintf(f, "# %s (generation %d): %s %s\n", d.Name, d.Generation, controller, strings.Join(args, " "))
	// No context ends it: it runs until stopped, and Pdeathsig ends it
	// with the test binary.
	cmd := exec.CommandContext(context.Background(), filepath.Join(k.binDir, controller), args...)
	cmd.Env = append(envList(containerEnv),
		"KUBECONFIG="+k.kubeconfig, "TMPDIR="+filepath.Join(dir, "tmp"), "HOME="+filepath.Join(dir, "home"))
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", controller, err)
	}
	inst := &fluxInstance{deployment: d.Name, template: templateHash(d), cmd: cmd, done: make(chan struct{}), healthAddr: local.healthAddr}
	go func() {
		_ = cmd.Wait()
		f.Close()
		k.mu.Lock()
		inst.exitedAt = time.Now()
		k.mu.Unlock()
		close(inst.done)
	}()
	k.logs[d.Name] = append(k.logs[d.Name], logPath)
	k.t.Logf("flux stand-in: started %s (generation %d, pid %d)", d.Name, d.Generation, cmd.Process.Pid)
	return inst, nil
}

// templateHash identifies the Deployment's pod template.
func templateHash(d *appsv1.Deployment) string {
	b, err := json.Marshal(d.Spec.Template)
	if err != nil {
		return "" // a template always marshals; "" restarts nothing
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// localAddrs are what the stand-in gives a process in place of what
// processes on one host cannot share.
type localAddrs struct {
	metricsAddr, healthAddr string
	// eventsAddr replaces a rendered --events-addr.
	eventsAddr string
	// storagePath and storageAddr are set for source-controller only.
	storagePath, storageAddr string
}

// localFlags picks an instance's addresses: free ports, and for
// source-controller the loopback address that stands for the host it
// advertises.
func (k *fluxKubelet) localFlags(controller string, args []string, dir string) (localAddrs, error) {
	metrics, err := freeAddr("127.0.0.1")
	if err != nil {
		return localAddrs{}, err
	}
	health, err := freeAddr("127.0.0.1")
	if err != nil {
		return localAddrs{}, err
	}
	local := localAddrs{metricsAddr: metrics, healthAddr: health, eventsAddr: k.events}
	if controller != "source-controller" {
		return local, nil
	}
	local.storagePath = filepath.Join(dir, "data")
	host := advertisedHost(args)
	addr, ok := k.storage[host]
	if !ok {
		// 127.0.0.1 is left to the servers of the test; every address of
		// 127.0.0.0/8 is the loopback interface on Linux.
		if addr, err = freeAddr(fmt.Sprintf("127.0.0.%d", len(k.storage)+2)); err != nil {
			return localAddrs{}, err
		}
		k.storage[host] = addr
	}
	local.storageAddr = addr
	return local, nil
}

// freeAddr returns host and a port free on it.
func freeAddr(host string) (string, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(context.Background(), "tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", fmt.Errorf("a free port on %s: %w", host, err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// replacedFlags are the flags whose rendered values localArgs drops.
var replacedFlags = []string{"--metrics-addr", "--health-addr", "--storage-addr", "--storage-adv-addr", "--storage-path", "--enable-leader-election"}

// flagName is the name of an argument "--name=value" or "--name".
func flagName(arg string) string {
	name, _, _ := strings.Cut(arg, "=")
	return name
}

// advertisedHost is the value of the last --storage-adv-addr of args (pflag
// takes the last), "" if none.
func advertisedHost(args []string) string {
	host := ""
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--storage-adv-addr="); ok {
			host = v
		}
	}
	return host
}

// localArgs replaces in args what processes on one host cannot share with
// local's addresses, and drops leader election. Flux renders every flag as
// --name=value; a value given as the next argument is not recognised.
func localArgs(args []string, local localAddrs) []string {
	out := make([]string, 0, len(args)+5)
	for _, a := range args {
		switch {
		case slices.Contains(replacedFlags, flagName(a)):
		case strings.HasPrefix(a, "--events-addr=") && a != "--events-addr=":
			out = append(out, "--events-addr="+local.eventsAddr)
		default:
			out = append(out, a)
		}
	}
	out = append(out, "--metrics-addr="+local.metricsAddr, "--health-addr="+local.healthAddr)
	if local.storageAddr != "" {
		out = append(out, "--storage-path="+local.storagePath, "--storage-addr="+local.storageAddr, "--storage-adv-addr="+local.storageAddr)
	}
	return out
}

// varRef is a reference $(NAME) in a container's argument or variable.
var varRef = regexp.MustCompile(`\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)`)

// expand replaces each $(NAME) in s by the value of NAME in vars and $$ by
// $, as the kubelet does; a reference to an undefined variable is left as
// it is.
func expand(s string, vars map[string]string) string {
	return varRef.ReplaceAllStringFunc(s, func(ref string) string {
		if ref == "$$" {
			return "$"
		}
		if v, ok := vars[ref[2:len(ref)-1]]; ok {
			return v
		}
		return ref
	})
}

// expandArgs expands every argument.
func expandArgs(args []string, vars map[string]string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = expand(a, vars)
	}
	return out
}

// resolveEnv is the container's environment as the kubelet sets it, for a
// pod of the Deployment named pod in ns: values (which may refer to the
// variables before them), the pod's fields and the container's resources.
// Secrets and ConfigMaps are not read: Flux's containers use neither.
func resolveEnv(c *corev1.Container, pod *corev1.PodSpec, ns, name string) (map[string]string, error) {
	vars := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			vars[e.Name] = expand(e.Value, vars)
		case e.ValueFrom.FieldRef != nil:
			fields := map[string]string{"metadata.namespace": ns, "metadata.name": name, "spec.serviceAccountName": pod.ServiceAccountName, "spec.nodeName": cluster.FakeNodeName}
			v, ok := fields[e.ValueFrom.FieldRef.FieldPath]
			if !ok {
				return nil, fmt.Errorf("env %s: field %s is not supported", e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
			vars[e.Name] = v
		case e.ValueFrom.ResourceFieldRef != nil:
			v, err := resourceValue(c, e.ValueFrom.ResourceFieldRef)
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
			vars[e.Name] = v
		default:
			return nil, fmt.Errorf("env %s: only values, fields and resources are supported", e.Name)
		}
	}
	return vars, nil
}

// resourceValue is a limit or request of the container divided by the
// divisor and rounded up, as the kubelet writes it.
func resourceValue(c *corev1.Container, ref *corev1.ResourceFieldSelector) (string, error) {
	kind, res, ok := strings.Cut(ref.Resource, ".")
	if !ok {
		return "", fmt.Errorf("resource %q is not supported", ref.Resource)
	}
	list := c.Resources.Limits
	if kind == "requests" {
		list = c.Resources.Requests
	}
	q, ok := list[corev1.ResourceName(res)]
	if !ok {
		return "", fmt.Errorf("resource %s is not set", ref.Resource)
	}
	divisor := 1.0
	if !ref.Divisor.IsZero() {
		divisor = ref.Divisor.AsApproximateFloat64()
	}
	return strconv.FormatInt(int64(math.Ceil(q.AsApproximateFloat64()/divisor)), 10), nil
}

// envList is vars as NAME=value pairs.
func envList(vars map[string]string) []string {
	out := make([]string, 0, len(vars))
	for n, v := range vars {
		out = append(out, n+"="+v)
	}
	slices.Sort(out)
	return out
}

// stopInstance ends the process with SIGTERM, then SIGKILL after a grace
// period, as the kubelet ends a container. k.mu is held.
func (k *fluxKubelet) stopInstance(inst *fluxInstance, why string) {
	if !cluster.Exited(inst.done) {
		k.t.Logf("flux stand-in: stopping %s: %s", inst.deployment, why)
	}
	// The wait for the exit must not hold the lock the exit takes.
	k.mu.Unlock()
	cluster.Terminate(inst.cmd.Process, inst.done, 10*time.Second)
	k.mu.Lock()
}

// stopAll stops every process.
func (k *fluxKubelet) stopAll() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for name, inst := range k.running {
		k.stopInstance(inst, "the test ends")
		delete(k.running, name)
	}
}

// hold stops the processes of the Deployments named, and starts none for
// them while the Deployments stay: what a node that stops running a
// shard's pods leaves.
func (k *fluxKubelet) hold(names ...string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, n := range names {
		k.held[n] = true
	}
}

// isRunning reports whether a process runs for the Deployment.
func (k *fluxKubelet) isRunning(name string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	inst := k.running[name]
	return inst != nil && !cluster.Exited(inst.done)
}

// ready asks the Deployment's process for its /readyz.
func (k *fluxKubelet) ready(ctx context.Context, name string) error {
	k.mu.Lock()
	inst := k.running[name]
	k.mu.Unlock()
	if inst == nil || cluster.Exited(inst.done) {
		return fmt.Errorf("%s: no process", name)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+inst.healthAddr+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: /readyz answers %d", name, resp.StatusCode)
	}
	return nil
}

// storageAddr is the loopback address and port that stand for the
// advertised storage host, as rendered and expanded.
func (k *fluxKubelet) storageAddr(host string) (string, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	addr, ok := k.storage[host]
	return addr, ok
}

// log is everything the processes of the Deployment have logged.
func (k *fluxKubelet) log(name string) (string, error) {
	k.mu.Lock()
	paths := slices.Clone(k.logs[name])
	k.mu.Unlock()
	var b strings.Builder
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return "", err
		}
		b.Write(data)
	}
	return b.String(), nil
}

// loggedLine returns nil once a line that the processes of the
// Deployment logged holds every one of parts.
func (k *fluxKubelet) loggedLine(name string, parts ...string) error {
	l, err := k.log(name)
	if err != nil {
		return err
	}
	for line := range strings.SplitSeq(l, "\n") {
		if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(line, p) }) {
			return nil
		}
	}
	return fmt.Errorf("%s logged no line with %q", name, parts)
}

// loggers are the Deployments whose processes logged s, but for those in
// except: a controller logs the objects it reconciles by name and
// namespace.
func (k *fluxKubelet) loggers(s string, except ...string) ([]string, error) {
	k.mu.Lock()
	var names []string
	for n := range k.logs {
		if !slices.Contains(except, n) {
			names = append(names, n)
		}
	}
	k.mu.Unlock()
	slices.Sort(names)
	var out []string
	var errs []error
	for _, n := range names {
		l, err := k.log(n)
		errs = append(errs, err)
		if strings.Contains(l, s) {
			out = append(out, n)
		}
	}
	return out, errors.Join(errs...)
}

// printLogs logs the end of every process's log.
func (k *fluxKubelet) printLogs() {
	k.mu.Lock()
	var names []string
	for n := range k.logs {
		names = append(names, n)
	}
	exits := fmt.Sprint(k.exits)
	k.mu.Unlock()
	slices.Sort(names)
	k.t.Logf("flux stand-in: processes that exited by themselves: %s", exits)
	for _, n := range names {
		l, err := k.log(n)
		if err != nil {
			k.t.Logf("%s log: %v", n, err)
			continue
		}
		k.t.Logf("%s log:\n%s", n, tail(l, 40))
	}
}
