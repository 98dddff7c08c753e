//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/shardkeeper/shardkeeper/e2e/cluster"
	"github.com/shardkeeper/shardkeeper/pkg/status"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

// v010Commit is v0.1.0: the tree that the CHANGELOG's v0.1.0 section
// describes. `make test-e2e` builds its daemon and extracts its chart into
// $SHARDKEEPER_BIN_DIR/v0.1.0 (or $SHARDKEEPER_V010_DIR).
const v010Commit = "8682fbc"

// v010Env names the directory of v0.1.0's daemon and chart, when it is not
// v0.1.0 under $SHARDKEEPER_BIN_DIR.
const v010Env = "SHARDKEEPER_V010_DIR"

// upgradeShards are the shards listed across the upgrade; each has mapped
// objects, so none may lose a controller.
var upgradeShards = []string{"shard0", "shard1"}

// v010Controllers are the controllers that v0.1.0 cloned with its README's
// Flux example: helm-controller by its flux preset and kustomize-controller
// by --source, both as "<controller>-shard-<id>".
var v010Controllers = []string{"helm-controller", "kustomize-controller"}

// v010Name is the name v0.1.0 gave shard id's copy of controller.
func v010Name(controller, id string) string { return controller + "-shard-" + id }

// TestUpgradeFromV010 installs v0.1.0's chart and runs v0.1.0's daemon
// with its README's Flux example (the flux preset, kustomize-controller
// added by --source), then upgrades chart and daemon to this tree: with
// the new chart's values, and with --reuse-values, whose values lack every
// key added since. Throughout, every Deployment of Flux's namespace is
// watched: each listed shard, all of which have mapped objects, must have
// an Available copy of helm-controller and of kustomize-controller at
// every moment, under v0.1.0's name or the current one, and none of its
// copies may be deleted but a v0.1.0 copy whose successor is Available. At
// the end each shard has exactly the copies of the current release,
// Available, and nothing managed is left that no listed shard owns.
func TestUpgradeFromV010(t *testing.T) {
	oldBin, oldChart := v010Release(t)
	// The real Flux CRDs: the mapped objects are validated as in a cluster
	// that runs Flux.
	installFluxCRDs(t)
	t.Run("helm upgrade with the new chart's values", func(t *testing.T) {
		upgradeFromV010(t, oldBin, oldChart, "upgvalues", false)
	})
	t.Run("helm upgrade --reuse-values", func(t *testing.T) {
		upgradeFromV010(t, oldBin, oldChart, "upgreuse", true)
	})
}

// v010Release returns v0.1.0's daemon and chart, failing the test when
// they are not built: skipping would let the upgrade go untested.
func v010Release(t *testing.T) (bin, chart string) {
	t.Helper()
	dir := os.Getenv(v010Env)
	if dir == "" {
		binDir := os.Getenv(cluster.BinDirEnv)
		if binDir == "" {
			t.Fatalf("neither %s nor %s is set: run the e2e tests with `make test-e2e`", v010Env, cluster.BinDirEnv)
		}
		dir = filepath.Join(binDir, "v0.1.0")
	}
	bin, chart = filepath.Join(dir, "shardkeeper"), filepath.Join(dir, "charts", "shardkeeper")
	for _, p := range []string{bin, filepath.Join(chart, "Chart.yaml")} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("v0.1.0's daemon and chart are not in %s: %v; `make \"$PWD/bin/v0.1.0/shardkeeper\"` builds them from commit %s, which the clone must have, or %s names where they are",
				dir, err, v010Commit, v010Env)
		}
	}
	out, err := exec.CommandContext(t.Context(), bin, "--version").Output()
	require.NoError(t, err, "%s --version", bin)
	require.Equal(t, "v0.1.0", strings.TrimSpace(string(out)), "%s is not v0.1.0's daemon", bin)
	meta, err := os.ReadFile(filepath.Join(chart, "Chart.yaml"))
	require.NoError(t, err)
	require.Contains(t, string(meta), `appVersion: "v0.1.0"`, "%s is not v0.1.0's chart", chart)
	return bin, chart
}

// upgradeFromV010 runs one upgrade from v0.1.0 in scenario name: with
// reuseValues, `helm upgrade --reuse-values`; without, `helm upgrade -f`
// the values of the install, on the new chart's defaults.
func upgradeFromV010(t *testing.T, oldBin, oldChart, name string, reuseValues bool) {
	t.Helper()
	began := time.Now()
	t.Cleanup(func() { t.Logf("%s took %s", t.Name(), time.Since(began).Round(time.Second)) })
	s := newScenario(t, name, true)
	shardedFlux(t, s)
	release := name
	values, old := runV010(t, s, oldBin, oldChart, release)
	shardList := s.shardList()

	w := watchUpgrade(s)
	args := []string{"upgrade", release, chartDir, "--namespace", s.fleetNS}
	if reuseValues {
		args = append(args, "--reuse-values")
	} else {
		args = append(args, "-f", values)
	}
	helm(t, args...)
	require.Equal(t, shardList, s.shardList(), "the upgrade keeps the shard list")

	// As the chart's Deployment rolls: the new daemon starts and waits for
	// the Lease, which v0.1.0's releases when it is stopped.
	s.daemon = startDaemon(t, releaseArgs(t, s, release)...)
	old.stop()

	eventually(t, 2*time.Minute, "each shard with the current release's copies alone, Available", func() error {
		if s.daemon.exited() {
			t.Fatalf("the upgraded daemon exited:\n%s", daemonLog(t, s.daemon))
		}
		return upgraded(s)
	})
	for _, id := range upgradeShards {
		for _, c := range v010Controllers {
			s.waitEvent(status.ReasonShardRenamed, v010Name(c, id))
		}
		s.waitState(id, status.StateActive)
	}
	s.waitQuiet()
	require.NoError(t, upgraded(s), "after the namespaces are quiet")
	assert.Empty(t, s.status().Error, "the status reports no error")
	assert.Equal(t, shardList, s.shardList(), "the shard list is unchanged")
	assert.Empty(t, w.problems(), "shards without an Available controller, or copies deleted while their shard has mapped objects")
	refused, err := s.daemon.metricSum("rest_client_requests_total", `code="403"`)
	require.NoError(t, err)
	assert.Zero(t, refused, "the upgraded daemon was refused a request that the upgraded chart should allow")
}

// shardedFlux completes the scenario's Flux as its sharding guide leaves
// it (helm-controller comes with the scenario): every main controller
// excludes the sharded objects, as the CHANGELOG's upgrade note asks of
// source- and kustomize-controller. Each of upgradeShards gets a
// HelmRelease and a Kustomization.
func shardedFlux(t *testing.T, s *scenario) {
	t.Helper()
	for _, d := range []*appsv1.Deployment{testfixture.SourceController(s.fluxNS, true), testfixture.KustomizeController(s.fluxNS, true)} {
		_, err := kube.AppsV1().Deployments(s.fluxNS).Create(s.ctx, d, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err := kube.CoreV1().Services(s.fluxNS).Create(s.ctx, testfixture.SourceControllerService(s.fluxNS), metav1.CreateOptions{})
	require.NoError(t, err)
	fs := &fluxScenario{scenario: s}
	for _, id := range upgradeShards {
		fs.helmRelease(s.fleetNS, "app-"+id, "charts", id)
		fs.kustomization(s.fleetNS, "infra-"+id, "repo", id)
	}
}

// runV010 installs v0.1.0's chart as release, with its README's Flux
// example in its values, and runs v0.1.0's daemon with the arguments of
// the chart's Deployment until its copies are Available. It returns the
// values file and the daemon.
func runV010(t *testing.T, s *scenario, oldBin, oldChart, release string) (string, *daemon) {
	t.Helper()
	values := filepath.Join(t.TempDir(), "values.yaml")
	require.NoError(t, os.WriteFile(values, []byte(v010Values(s.fluxNS)), 0o600))
	helm(t, "install", release, oldChart, "--namespace", s.fleetNS, "-f", values)
	// The release's cluster-wide objects outlive the namespace: uninstall
	// it, once the test's own context has ended.
	home := t.TempDir()
	t.Cleanup(func() { helmUnder(context.Background(), t, home, "uninstall", release, "--namespace", s.fleetNS) })
	t.Setenv("POD_NAMESPACE", s.fleetNS)
	old := startBinary(t, oldBin, releaseArgs(t, s, release)...)
	eventually(t, time.Minute, "v0.1.0's copies Available", func() error {
		got := s.deployments()
		for _, id := range upgradeShards {
			for _, c := range v010Controllers {
				if err := notAvailable(got[v010Name(c, id)]); err != nil {
					return notYet(v010Name(c, id), err)
				}
			}
		}
		return nil
	})
	return values, old
}

// v010Values are the chart values of v0.1.0's README's Flux example, for
// Flux in fluxNS: the flux preset alone, and kustomize-controller cloned
// by extraSources once it runs with the exclusion argument.
func v010Values(fluxNS string) string {
	return fmt.Sprintf(`shards: %q
presets:
  fleet:
    enabled: false
  flux:
    enabled: true
    namespace: %s
extraSources:
  - %q
extraSourceRequiredArgs:
  - %q
`, strings.Join(upgradeShards, ","), fluxNS,
		fluxNS+"/kustomize-controller:manager="+fluxSelectorFlag+"="+fluxLabel+"={shard}",
		fluxNS+"/kustomize-controller="+fluxSelectorFlag+"=!"+fluxLabel)
}

// releaseArgs are the daemon's arguments as the release's Deployment
// renders them, authorized as its ServiceAccount; the harness's probe and
// metrics addresses replace the chart's.
func releaseArgs(t *testing.T, s *scenario, release string) []string {
	t.Helper()
	dep := findObject(t, decodeObjects(t, helm(t, "get", "manifest", release, "--namespace", s.fleetNS)), "Deployment")
	sa, _, _ := unstructured.NestedString(dep.Object, "spec", "template", "spec", "serviceAccountName")
	require.NotEmpty(t, sa)
	var args []string
	for _, a := range daemonContainer(t, dep).Args {
		if !strings.HasPrefix(a, "--health-probe-bind-address") && !strings.HasPrefix(a, "--metrics-bind-address") {
			args = append(args, a)
		}
	}
	user := "system:serviceaccount:" + s.fleetNS + ":" + sa
	return append(args, "--kubeconfig", impersonatingKubeconfig(t, user, serviceAccountGroups(s.fleetNS)...))
}

// shardList is data.shards of the shard ConfigMap.
func (s *scenario) shardList() string {
	s.t.Helper()
	cm, err := kube.CoreV1().ConfigMaps(s.fleetNS).Get(s.ctx, s.cmName, metav1.GetOptions{})
	require.NoError(s.t, err)
	return cm.Data["shards"]
}

// daemonLog is the end of d's log.
func daemonLog(t *testing.T, d *daemon) string {
	t.Helper()
	b, err := os.ReadFile(d.log)
	if err != nil {
		return err.Error()
	}
	return tail(string(b), 40)
}

// upgraded fails unless the managed Deployments and Services of the
// scenario are exactly the current release's copies for upgradeShards,
// every Deployment rolled out and Available: no v0.1.0 copy is left, and
// nothing that no listed shard owns.
func upgraded(s *scenario) error {
	wantDeps := map[string]bool{}
	wantSvcs := map[string]bool{}
	for _, id := range upgradeShards {
		for _, n := range fluxShardDeployments(id) {
			wantDeps[n] = false
		}
		wantSvcs["source-controller-"+id] = false
	}
	managed := metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=shardkeeper"}
	var problems []string
	for _, ns := range []string{s.fleetNS, s.fluxNS} {
		deps, err := kube.AppsV1().Deployments(ns).List(s.ctx, managed)
		if err != nil {
			return err
		}
		for i := range deps.Items {
			d := &deps.Items[i]
			if _, ok := wantDeps[d.Name]; !ok || ns != s.fluxNS {
				problems = append(problems, "Deployment "+ns+"/"+d.Name+" is left")
				continue
			}
			wantDeps[d.Name] = true
			if err := notAvailable(d); err != nil {
				problems = append(problems, err.Error())
			}
		}
		svcs, err := kube.CoreV1().Services(ns).List(s.ctx, managed)
		if err != nil {
			return err
		}
		for _, svc := range svcs.Items {
			if _, ok := wantSvcs[svc.Name]; !ok || ns != s.fluxNS {
				problems = append(problems, "Service "+ns+"/"+svc.Name+" is left")
				continue
			}
			wantSvcs[svc.Name] = true
		}
	}
	for _, n := range slices.Sorted(maps.Keys(wantDeps)) {
		if !wantDeps[n] {
			problems = append(problems, "Deployment "+n+" is missing")
		}
	}
	for _, n := range slices.Sorted(maps.Keys(wantSvcs)) {
		if !wantSvcs[n] {
			problems = append(problems, "Service "+n+" is missing")
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// upgradeWatch follows every Deployment and Service of the Flux namespace
// and records each moment a listed shard is left without an Available copy
// of a controller that v0.1.0 cloned, and each deletion of a listed
// shard's copy other than a v0.1.0 copy.
type upgradeWatch struct {
	mu sync.Mutex
	// available is whether each Deployment has an Available replica, as
	// its last change showed.
	available map[string]bool
	// gaps are the shard's controllers ("<id>/<controller>") that have no
	// Available copy now.
	gaps  map[string]bool
	found []string
	done  bool
}

// watchUpgrade starts the watches, from the Deployments as they are now,
// until the test ends.
func watchUpgrade(s *scenario) *upgradeWatch {
	t := s.t
	t.Helper()
	w := &upgradeWatch{available: map[string]bool{}, gaps: map[string]bool{}}
	follow := func(kind, rv string, watchFn cache.WatchFuncWithContext) {
		rw, err := watchtools.NewRetryWatcherWithContext(s.ctx, rv, &cache.ListWatch{WatchFuncWithContext: watchFn})
		require.NoError(t, err)
		t.Cleanup(rw.Stop)
		go func() {
			for ev := range rw.ResultChan() {
				w.observe(ev)
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			if !w.done {
				w.found = append(w.found, "the watch of "+kind+"s ended before the test")
			}
		}()
	}
	deployments := kube.AppsV1().Deployments(s.fluxNS)
	list, err := deployments.List(s.ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for i := range list.Items {
		w.available[list.Items[i].Name] = hasAvailable(&list.Items[i])
	}
	w.checkGaps("the start")
	t.Cleanup(func() {
		if p := w.problems(); t.Failed() && len(p) > 0 {
			t.Logf("seen by the watch of the upgrade: %q", p)
		}
	})
	follow("Deployment", list.ResourceVersion, deployments.Watch)
	services := kube.CoreV1().Services(s.fluxNS)
	svcs, err := services.List(s.ctx, metav1.ListOptions{})
	require.NoError(t, err)
	follow("Service", svcs.ResourceVersion, services.Watch)
	// Registered last, this runs before the watches are stopped.
	t.Cleanup(func() { w.mu.Lock(); w.done = true; w.mu.Unlock() })
	return w
}

// hasAvailable reports whether d has an Available replica. A rollout of a
// generation not yet observed is no gap: the Deployment's rolling update
// keeps the earlier pod until the next one is ready, and the status says
// when it is not.
func hasAvailable(d *appsv1.Deployment) bool { return d.Status.AvailableReplicas >= 1 }

// observe takes one change.
func (w *upgradeWatch) observe(ev watch.Event) {
	obj, ok := ev.Object.(metav1.Object)
	if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified && ev.Type != watch.Deleted) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	name, kind := obj.GetName(), "Service"
	if d, ok := obj.(*appsv1.Deployment); ok {
		kind = "Deployment"
		w.available[name] = ev.Type != watch.Deleted && hasAvailable(d)
	}
	what := fmt.Sprintf("%s %s %s", ev.Type, kind, name)
	if ev.Type == watch.Deleted && obj.GetLabels()["app.kubernetes.io/managed-by"] == "shardkeeper" {
		id := obj.GetLabels()["shardkeeper.io/shard"]
		legacy := kind == "Deployment" && slices.ContainsFunc(v010Controllers, func(c string) bool { return name == v010Name(c, id) })
		if slices.Contains(upgradeShards, id) && !legacy {
			w.found = append(w.found, fmt.Sprintf("%s: deleted while shard %s, which has mapped objects, is listed", what, id))
		}
	}
	w.checkGaps(what)
}

// checkGaps records each shard's controller that has no Available copy
// after the change what, once per gap.
func (w *upgradeWatch) checkGaps(what string) {
	for _, id := range upgradeShards {
		for _, c := range v010Controllers {
			key := id + "/" + c
			gap := !w.available[v010Name(c, id)] && !w.available[c+"-"+id]
			if gap && !w.gaps[key] {
				w.found = append(w.found, fmt.Sprintf("after %s: shard %s has no Available %s (neither %s nor %s)", what, id, c, v010Name(c, id), c+"-"+id))
			}
			w.gaps[key] = gap
		}
	}
}

// problems returns what was recorded so far.
func (w *upgradeWatch) problems() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.found)
}
