//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/shardkeeper/shardkeeper/e2e/cluster"
	"github.com/shardkeeper/shardkeeper/pkg/status"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

var (
	env  *cluster.Cluster
	kube kubernetes.Interface
	dyn  dynamic.Interface
)

var (
	gitRepos     = testfixture.GitRepos
	helmOps      = testfixture.HelmOps
	helmReleases = testfixture.HelmReleases
	crdResource  = testfixture.CRDs
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var err error
	env, err = cluster.Start(ctx, cluster.Options{Workloads: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the control plane:", err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
		}
	}()
	// The fleet namespaces warn about Pod Security "restricted", which
	// Fleet's pods do not meet; the tests check admission themselves.
	rest.SetDefaultWarningHandler(rest.NoWarnings{})
	kube = kubernetes.NewForConfigOrDie(env.Config())
	dyn = dynamic.NewForConfigOrDie(env.Config())
	// HelmReleases' CRD is installed by the tests that need it, to show a
	// kind whose CRD arrives late is picked up without a restart.
	for _, gvr := range []schema.GroupVersionResource{gitRepos, helmOps} {
		if err := installCRD(ctx, gvr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return m.Run()
}

// installCRD creates a minimal CRD for gvr and waits until it is served.
func installCRD(ctx context.Context, gvr schema.GroupVersionResource) error {
	crd := testfixture.CRD(gvr)
	_, err := dyn.Resource(crdResource).Create(ctx, crd, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating CRD %s: %w", gvr.Resource, err)
	}
	// Wait until it is served.
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if _, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1}); err == nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("CRD %s not served in time", gvr.Resource)
}

// daemon is a shardkeeper process run from the binary under test, or from
// an earlier release's.
type daemon struct {
	t *testing.T
	// bin is the binary run, "" for the one under test ($SHARDKEEPER_BINARY).
	bin         string
	args        []string
	log         string
	cmd         *exec.Cmd
	done        chan struct{}
	probePort   int
	metricsPort int
}

func startDaemon(t *testing.T, args ...string) *daemon {
	t.Helper()
	return startBinary(t, "", args...)
}

// startBinary is startDaemon with the daemon of bin, "" for the binary
// under test: an earlier release's, for the upgrade from it.
func startBinary(t *testing.T, bin string, args ...string) *daemon {
	t.Helper()
	d := &daemon{t: t, bin: bin, args: args, log: filepath.Join(t.TempDir(), "shardkeeper.log"), probePort: freePort(t), metricsPort: freePort(t)}
	d.start()
	t.Cleanup(func() {
		d.stop()
		if t.Failed() {
			b, _ := os.ReadFile(d.log)
			name := "shardkeeper"
			if bin != "" {
				name = bin
			}
			t.Logf("%s log:\n%s", name, tail(string(b), 80))
		}
	})
	return d
}

func (d *daemon) start() {
	d.t.Helper()
	bin := d.bin
	if bin == "" {
		bin = os.Getenv("SHARDKEEPER_BINARY")
	}
	if bin == "" {
		d.t.Fatal("SHARDKEEPER_BINARY is not set; run the e2e tests with `make test-e2e`")
	}
	f, err := os.OpenFile(d.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		d.t.Fatal(err)
	}
	args := append([]string{"--kubeconfig", env.KubeconfigPath(), "--log-level", "debug",
		"--health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", d.probePort),
		"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", d.metricsPort)}, d.args...)
	// No context ends the daemon: it runs across subtests until stop or
	// kill, and Pdeathsig ends it with the test binary.
	d.cmd = exec.CommandContext(context.Background(), bin, args...)
	d.cmd.Stdout, d.cmd.Stderr = f, f
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := d.cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	d.done = make(chan struct{})
	go func() { _ = d.cmd.Wait(); f.Close(); close(d.done) }()
}

// stop ends the daemon with SIGTERM, as Kubernetes does.
func (d *daemon) stop() {
	if d.cmd == nil {
		return
	}
	cluster.Terminate(d.cmd.Process, d.done, 10*time.Second)
	d.cmd = nil
}

// kill ends the daemon with SIGKILL: no Lease release, no cleanup.
func (d *daemon) kill() {
	if d.cmd == nil {
		return
	}
	_ = d.cmd.Process.Kill()
	<-d.done
	d.cmd = nil
}

// exited reports whether the daemon's process has ended.
func (d *daemon) exited() bool { return cluster.Exited(d.done) }

func tail(s string, lines int) string {
	all := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// eventually retries cond until it returns nil or the timeout passes. The
// timeouts are generous: they bound a hang, they do not measure speed.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for {
		if err = cond(); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not true after %s: %v", what, timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// notYet is the error of a condition polled by eventually or holds that is
// not met: what, and why the check itself failed, if it did.
func notYet(what string, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return errors.New(what)
}

// holds checks that cond stays true for a while: it is how a test shows
// that something does not happen.
func holds(t *testing.T, period time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(period)
	for time.Now().Before(deadline) {
		if err := cond(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// scenario is one test's namespaces, sources and ConfigMap.
type scenario struct {
	t       *testing.T
	ctx     context.Context
	fleetNS string
	fluxNS  string
	// chartArgs are added to the helm template that renders the daemon's
	// RBAC (leastPrivilege), e.g. the API versions of a feature.
	chartArgs []string
	cmName    string
	daemon    *daemon
	// kubeconfig acts as the chart's ServiceAccount.
	kubeconfig string
}

func newScenario(t *testing.T, name string, fluxAware bool) *scenario {
	t.Helper()
	ctx := context.Background()
	s := &scenario{t: t, ctx: ctx, fleetNS: name + "-fleet", fluxNS: name + "-flux", cmName: "shardkeeper"}
	t.Cleanup(func() {
		if t.Failed() {
			s.dump(t)
		}
		// Registered first, this runs last: the daemon is stopped by now.
		s.deleteNamespaces(t)
	})
	// Pod Security is enforced at the level the real controllers meet, so
	// every shard copy proves it is admitted where its source is. Fleet's
	// pods set no seccompProfile (Fleet's chart does not), so they meet
	// "baseline" but not "restricted": the fleet namespace enforces
	// baseline and warns about restricted. Flux's pods meet "restricted".
	for ns, level := range map[string]string{s.fleetNS: "baseline", s.fluxNS: "restricted"} {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: podSecurityLabels(level)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, time.Minute, "default ServiceAccount in "+ns, func() error {
			_, err := kube.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
			return err
		})
	}
	// The sources keep their real ServiceAccounts, so the copies do too.
	for _, sa := range append(testfixture.FleetServiceAccounts(s.fleetNS), testfixture.FluxServiceAccounts(s.fluxNS)...) {
		if _, err := kube.CoreV1().ServiceAccounts(sa.Namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []*appsv1.Deployment{testfixture.FleetController(s.fleetNS), testfixture.Gitjob(s.fleetNS), testfixture.HelmOpsController(s.fleetNS), testfixture.HelmController(s.fluxNS, fluxAware)} {
		if _, err := kube.AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, svc := range testfixture.FleetMetricsServices(s.fleetNS) {
		if _, err := kube.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// deleteNamespaces deletes the scenario's namespaces and waits until they
// are gone. The tests of a run share one control plane, whose Service IP
// range is small: without this, a long run (`make soak`) fills it with the
// Services of finished scenarios. The mapped objects' finalizers are removed
// first, since no controller here would.
func (s *scenario) deleteNamespaces(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	namespaces := []string{s.fleetNS, s.fluxNS}
	for _, ns := range namespaces {
		for _, gvr := range []schema.GroupVersionResource{gitRepos, helmOps, helmReleases, testfixture.Bundles, testfixture.BundleDeployments} {
			list, err := dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
			if apierrors.IsNotFound(err) {
				continue // the kind's CRD is not installed
			}
			if err != nil {
				t.Errorf("list %s in %s: %v", gvr.Resource, ns, err)
				continue
			}
			for _, o := range list.Items {
				if len(o.GetFinalizers()) == 0 {
					continue
				}
				_, err := dyn.Resource(gvr).Namespace(ns).Patch(ctx, o.GetName(), types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
				if err != nil && !apierrors.IsNotFound(err) {
					t.Errorf("remove the finalizers of %s %s/%s: %v", gvr.Resource, ns, o.GetName(), err)
				}
			}
		}
		if err := kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", ns, err)
		}
	}
	eventually(t, 2*time.Minute, "scenario namespaces deleted", func() error {
		for _, ns := range namespaces {
			n, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return err
			}
			return fmt.Errorf("namespace %s still exists: %v", ns, n.Status.Conditions)
		}
		return nil
	})
}

// podSecurityLabels are the namespace labels that enforce the Pod Security
// level; below restricted, they also warn about restricted.
func podSecurityLabels(level string) map[string]string {
	labels := map[string]string{
		"pod-security.kubernetes.io/enforce": level, "pod-security.kubernetes.io/enforce-version": "latest",
	}
	if level != "restricted" {
		labels["pod-security.kubernetes.io/warn"] = "restricted"
		labels["pod-security.kubernetes.io/warn-version"] = "latest"
	}
	return labels
}

func (s *scenario) args(extra ...string) []string {
	return append([]string{"--namespace", s.fleetNS, "--configmap", s.cmName, "--preset", "fleet,flux",
		"--fleet-namespace", s.fleetNS, "--flux-namespace", s.fluxNS, s.leastPrivilege()}, extra...)
}

func (s *scenario) start(extra ...string) {
	s.daemon = startDaemon(s.t, s.args(extra...)...)
}

// leastPrivilege installs the chart's ServiceAccount and RBAC for the
// scenario's namespaces and returns the daemon flag that makes it act as
// that ServiceAccount: every scenario then proves the chart grants enough,
// since the real API server checks each request against it. Placement is
// allowed in the chart (patch on the mapped kinds), not in the daemon: only
// the scenarios that pass --allow-placement use it.
func (s *scenario) leastPrivilege() string {
	s.t.Helper()
	if s.kubeconfig != "" {
		return "--kubeconfig=" + s.kubeconfig
	}
	args := append([]string{"template", s.fleetNS, chartDir, "--namespace", s.fleetNS,
		"--set", "presets.fleet.namespace=" + s.fleetNS,
		"--set", "presets.flux.enabled=true", "--set", "presets.flux.namespace=" + s.fluxNS,
		"--set", "configMap.create=false", "--set", "placement.enabled=true"}, s.chartArgs...)
	objs := decodeObjects(s.t, helm(s.t, args...))
	var rbac []*unstructured.Unstructured
	sa := ""
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount":
			sa = o.GetName()
			rbac = append(rbac, o)
		case "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding":
			rbac = append(rbac, o)
		}
	}
	require.NotEmpty(s.t, sa, "the chart renders a ServiceAccount")
	applyObjects(s.t, rbac)
	s.kubeconfig = impersonatingKubeconfig(s.t, "system:serviceaccount:"+s.fleetNS+":"+sa, serviceAccountGroups(s.fleetNS)...)
	return "--kubeconfig=" + s.kubeconfig
}

func (s *scenario) createConfigMap(shards string) {
	s.t.Helper()
	_, err := kube.CoreV1().ConfigMaps(s.fleetNS).Create(s.ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: s.cmName},
		Data:       map[string]string{"shards": shards},
	}, metav1.CreateOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
}

// patch is `kubectl patch configmap --type merge -p PATCH`.
func (s *scenario) patch(patch string) {
	s.t.Helper()
	if _, err := kube.CoreV1().ConfigMaps(s.fleetNS).Patch(s.ctx, s.cmName, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		s.t.Fatal(err)
	}
}

func (s *scenario) setShards(shards string) {
	s.t.Helper()
	b, _ := json.Marshal(map[string]any{"data": map[string]string{"shards": shards}})
	s.patch(string(b))
}

// shardDeployments returns the managed Deployments by name, in both namespaces.
func (s *scenario) deployments() map[string]*appsv1.Deployment {
	s.t.Helper()
	out := map[string]*appsv1.Deployment{}
	for _, ns := range []string{s.fleetNS, s.fluxNS} {
		list, err := kube.AppsV1().Deployments(ns).List(s.ctx, metav1.ListOptions{})
		if err != nil {
			s.t.Fatal(err)
		}
		for i := range list.Items {
			d := &list.Items[i]
			out[d.Name] = d
		}
	}
	return out
}

// clones lists the Deployment names a shard should have.
func clones(ids ...string) []string {
	var out []string
	for _, id := range ids {
		for _, src := range []string{"fleet-controller", "gitjob", "helmops"} {
			out = append(out, src+"-shard-"+id)
		}
		// Named as Flux names its shards.
		out = append(out, "helm-controller-"+id)
	}
	return out
}

// waitShards waits until exactly the given shards have Deployments, all Available.
func (s *scenario) waitShards(ids ...string) {
	s.t.Helper()
	want := map[string]bool{}
	for _, n := range clones(ids...) {
		want[n] = true
	}
	eventually(s.t, 90*time.Second, fmt.Sprintf("shards %v running", ids), func() error {
		got := s.deployments()
		for n := range want {
			d, ok := got[n]
			if !ok {
				return fmt.Errorf("%s missing", n)
			}
			if d.Status.AvailableReplicas < 1 || d.Status.ObservedGeneration < d.Generation {
				return fmt.Errorf("%s not available yet", n)
			}
		}
		for n, d := range got {
			if d.Labels["app.kubernetes.io/managed-by"] == "shardkeeper" && !want[n] {
				return fmt.Errorf("%s still exists", n)
			}
		}
		return nil
	})
}

// events returns the messages of the Events with reason on the ConfigMap.
func (s *scenario) events(reason string) []string {
	s.t.Helper()
	list, err := kube.CoreV1().Events(s.fleetNS).List(s.ctx, metav1.ListOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Name == s.cmName && e.InvolvedObject.Kind == "ConfigMap" && e.Reason == reason {
			out = append(out, e.Message)
		}
	}
	return out
}

func (s *scenario) waitEvent(reason, contains string) {
	s.t.Helper()
	eventually(s.t, 60*time.Second, "Event "+reason+" with "+contains, func() error {
		for _, m := range s.events(reason) {
			if strings.Contains(m, contains) {
				return nil
			}
		}
		return fmt.Errorf("not found among %q", s.events(reason))
	})
}

// status reads the status ConfigMap.
func (s *scenario) status() status.Status {
	s.t.Helper()
	cm, err := kube.CoreV1().ConfigMaps(s.fleetNS).Get(s.ctx, s.cmName+"-status", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return status.Status{}
	}
	if err != nil {
		s.t.Fatal(err)
	}
	return status.Decode(cm.Data)
}

// leaseHolder returns the holder of the leader-election Lease, "" if none.
func (s *scenario) leaseHolder() (string, error) {
	lease, err := kube.CoordinationV1().Leases(s.fleetNS).Get(s.ctx, "shardkeeper", metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return ptr.Deref(lease.Spec.HolderIdentity, ""), nil
}

func (s *scenario) shardState(id string) string {
	for _, sh := range s.status().Shards {
		if sh.ID == id {
			return sh.State
		}
	}
	return ""
}

func (s *scenario) waitState(id, state string) {
	s.t.Helper()
	eventually(s.t, 60*time.Second, "shard "+id+" "+state, func() error {
		if got := s.shardState(id); got != state {
			return fmt.Errorf("state %q", got)
		}
		return nil
	})
}

// object creates a mapped object (GitRepo, HelmOp, HelmRelease) in the fleet namespace.
func (s *scenario) object(gvr schema.GroupVersionResource, name, label, shard string, finalizers ...string) {
	s.t.Helper()
	obj := testfixture.Object(gvr, s.fleetNS, name, label, shard)
	if len(finalizers) > 0 {
		obj.SetFinalizers(finalizers)
	}
	if _, err := dyn.Resource(gvr).Namespace(s.fleetNS).Create(s.ctx, obj, metav1.CreateOptions{}); err != nil {
		s.t.Fatal(err)
	}
}

func (s *scenario) relabel(gvr schema.GroupVersionResource, name, label, shard string) {
	s.t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, label, shard)
	if _, err := dyn.Resource(gvr).Namespace(s.fleetNS).Patch(s.ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		s.t.Fatal(err)
	}
}

// deletions records the name of every managed Deployment deleted in the
// scenario's namespaces, as the API server reports it.
type deletions struct {
	mu    sync.Mutex
	names []string
}

// watch starts (or, after an API server restart, starts again) the watches
// that record into d.
func (d *deletions) watch(s *scenario) {
	s.t.Helper()
	for _, ns := range []string{s.fleetNS, s.fluxNS} {
		w, err := kube.AppsV1().Deployments(ns).Watch(s.ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=shardkeeper"})
		require.NoError(s.t, err)
		s.t.Cleanup(w.Stop)
		go func() {
			for ev := range w.ResultChan() {
				if dep, ok := ev.Object.(*appsv1.Deployment); ok && ev.Type == watch.Deleted {
					d.mu.Lock()
					d.names = append(d.names, dep.Name)
					d.mu.Unlock()
				}
			}
		}()
	}
}

// list returns the names recorded so far.
func (d *deletions) list() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.names)
}

// snapshot records the resourceVersion of every Deployment, ConfigMap and
// Event in the scenario's namespaces: equal snapshots mean no write.
func (s *scenario) snapshot() map[string]string {
	s.t.Helper()
	out := map[string]string{}
	for _, ns := range []string{s.fleetNS, s.fluxNS} {
		ds, err := kube.AppsV1().Deployments(ns).List(s.ctx, metav1.ListOptions{})
		if err != nil {
			s.t.Fatal(err)
		}
		for _, d := range ds.Items {
			out["deployment/"+ns+"/"+d.Name] = d.ResourceVersion
		}
		cms, err := kube.CoreV1().ConfigMaps(ns).List(s.ctx, metav1.ListOptions{})
		if err != nil {
			s.t.Fatal(err)
		}
		for _, c := range cms.Items {
			out["configmap/"+ns+"/"+c.Name] = c.ResourceVersion
		}
		evs, err := kube.CoreV1().Events(ns).List(s.ctx, metav1.ListOptions{})
		if err != nil {
			s.t.Fatal(err)
		}
		for _, e := range evs.Items {
			if e.Source.Component == "shardkeeper" {
				out["event/"+ns+"/"+e.Name] = e.ResourceVersion
			}
		}
	}
	return out
}

// waitQuiet waits until nothing in the scenario's namespaces has changed
// for a few seconds: the rollouts are done and the status is written.
func (s *scenario) waitQuiet() {
	s.t.Helper()
	last := s.snapshot()
	stableSince := time.Now()
	eventually(s.t, 2*time.Minute, "namespaces quiet", func() error {
		now := s.snapshot()
		if !maps.Equal(now, last) {
			last, stableSince = now, time.Now()
		}
		if time.Since(stableSince) < 3*time.Second {
			return fmt.Errorf("changed %s ago", time.Since(stableSince).Round(time.Millisecond))
		}
		return nil
	})
}

// ready asks the daemon's /readyz.
func (d *daemon) ready() error {
	return d.get(d.probePort, "/readyz", nil)
}

// metric returns the value of one sample line of /metrics, e.g.
// `shardkeeper_api_writes_total{resource="deployments",verb="create"}`.
func (d *daemon) metric(sample string) (float64, error) {
	var body []byte
	if err := d.get(d.metricsPort, "/metrics", &body); err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			var f float64
			_, err := fmt.Sscan(v, &f)
			return f, err
		}
	}
	return 0, nil
}

// metricSum returns the sum of the samples of the metric name that carry
// every one of labels, each written as in /metrics (`code="403"`), whatever
// their other labels.
func (d *daemon) metricSum(name string, labels ...string) (float64, error) {
	var body []byte
	if err := d.get(d.metricsPort, "/metrics", &body); err != nil {
		return 0, err
	}
	var sum float64
	for line := range strings.SplitSeq(string(body), "\n") {
		if (!strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{")) || !hasLabels(line, labels) {
			continue
		}
		var f float64
		if _, err := fmt.Sscan(line[strings.LastIndex(line, " ")+1:], &f); err != nil {
			return 0, fmt.Errorf("%s: %w", line, err)
		}
		sum += f
	}
	return sum, nil
}

// hasLabels reports whether the sample line carries every one of labels.
func hasLabels(line string, labels []string) bool {
	set, _, _ := strings.Cut(line, "} ")
	for _, l := range labels {
		if !strings.Contains(set, "{"+l) && !strings.Contains(set, ","+l) {
			return false
		}
	}
	return true
}

// leads reports whether the daemon holds the Lease and runs the
// controllers, by its shardkeeper_leader gauge.
func (d *daemon) leads() (bool, error) {
	v, err := d.metric("shardkeeper_leader")
	return v == 1, err
}

// get asks the daemon for path on port and, if body is not nil, keeps the
// answer there; an answer other than 200 is an error. The request ends with
// the test that started the daemon, as the daemon does.
func (d *daemon) get(port int, path string, body *[]byte) error {
	req, err := http.NewRequestWithContext(d.t.Context(), http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", port, path), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %d %s", path, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	if body != nil {
		*body = b
	}
	return nil
}

func freePort(t *testing.T) int {
	t.Helper()
	var lc net.ListenConfig
	ln, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// dump logs what a person would look at first when a scenario fails: its
// pods and warning Events, and the ends of the control plane's logs.
func (s *scenario) dump(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, ns := range []string{s.fleetNS, s.fluxNS} {
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, p := range pods.Items {
				t.Logf("pod %s/%s node=%q phase=%s conditions=%v", ns, p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Conditions)
			}
		}
		events, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, e := range events.Items {
				if e.Type == corev1.EventTypeWarning {
					t.Logf("event %s %s/%s: %s", e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
				}
			}
		}
	}
	if nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
		for _, n := range nodes.Items {
			t.Logf("node %s taints=%v conditions=%v", n.Name, n.Spec.Taints, n.Status.Conditions)
		}
	}
	for _, name := range []string{"kube-controller-manager", "kube-scheduler", "kwok"} {
		b, err := os.ReadFile(env.LogPath(name))
		if err == nil {
			t.Logf("%s log:\n%s", name, tail(string(b), 30))
		}
	}
}
