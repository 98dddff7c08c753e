//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/shardkeeper/shardkeeper/pkg/placement"
	"github.com/shardkeeper/shardkeeper/pkg/render"
	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
	"github.com/shardkeeper/shardkeeper/pkg/status"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

// The Flux kinds the scenarios create.
var (
	fluxGitRepositories  = schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "gitrepositories"}
	fluxHelmRepositories = schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "helmrepositories"}
	fluxHelmCharts       = schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "helmcharts"}
	fluxKustomizations   = schema.GroupVersionResource{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Resource: "kustomizations"}
	fluxKinds            = map[schema.GroupVersionResource]string{
		fluxGitRepositories: "GitRepository", fluxHelmRepositories: "HelmRepository", fluxHelmCharts: "HelmChart",
		fluxKustomizations: "Kustomization", helmReleases: "HelmRelease",
	}
)

// fluxFinalizer is the finalizer every Flux controller puts on the objects
// it reconciles, and removes only in its delete path.
const fluxFinalizer = "finalizers.fluxcd.io"

// fluxReconcileTimeout bounds a wait for the real controllers: a fetch, a
// build and an apply, each the first reconcile of an object, which a watch
// starts at once.
const fluxReconcileTimeout = 3 * time.Minute

// fluxScenario is a scenario whose Flux controllers are the real ones, run
// by the stand-in for the kubelet.
type fluxScenario struct {
	*scenario
	kubelet *fluxKubelet
	gitURL  string
	helmURL string
}

// TestRealFluxControllers runs Flux's own source-, kustomize- and
// helm-controller, as the main controllers and as the shards a and b that
// shardkeeper makes of them, and checks that each object is reconciled by
// the controllers of its shard, and by them alone.
func TestRealFluxControllers(t *testing.T) {
	began := time.Now()
	t.Cleanup(func() { t.Logf("TestRealFluxControllers took %s", time.Since(began).Round(time.Second)) })
	fs := newFluxScenario(t, "realflux")
	nsA, nsB, nsMain, nsGroup, nsFailover := "realflux-a", "realflux-b", "realflux-main", "realflux-group", "realflux-failover"
	fs.testNamespaces(nsA, nsB, nsMain, nsGroup, nsFailover)
	fs.gitURL, fs.helmURL = serveGit(t), serveHelmRepository(t)
	fs.createConfigMap("a,b")
	fs.daemon = startDaemon(t, fs.fluxArgs("--allow-placement")...)
	fs.kubelet = startFluxKubelet(t, fs.fluxNS)
	fs.waitFluxShards("a", "b")

	t.Run("a GitRepository and Kustomization of shard a", func(t *testing.T) {
		fs.t = t
		fs.gitSync(nsA, "on-a", "a", "source-controller-a", "kustomize-controller-a")
	})

	t.Run("a HelmRepository and HelmRelease of shard b", func(t *testing.T) {
		fs.t = t
		fs.helmSource(nsB, "charts-on-b", "b")
		fs.waitReady(fluxHelmRepositories, nsB, "charts-on-b")
		fs.helmRelease(nsB, "hr-on-b", "charts-on-b", "b")
		fs.waitConfigMap(nsB, "hr-on-b"+chartConfigMapSuffix)
		fs.waitReady(helmReleases, nsB, "hr-on-b")
		_, err := kube.CoreV1().Secrets(nsB).Get(fs.ctx, "sh.helm.release.v1.hr-on-b.v1", metav1.GetOptions{})
		require.NoError(t, err, "the Helm release's storage Secret")
		// helm-controller makes the HelmChart, named <namespace>-<name>,
		// with the labels of spec.chart.metadata.
		chart, err := dyn.Resource(fluxHelmCharts).Namespace(nsB).Get(fs.ctx, nsB+"-hr-on-b", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "b", chart.GetLabels()[fluxLabel], "the HelmChart carries the shard label of spec.chart.metadata.labels")
		fs.assertArtifactFrom(fluxHelmCharts, nsB, nsB+"-hr-on-b", "source-controller-b")
		fs.assertOnlyLoggedBy(nsB, "source-controller-b", "helm-controller-b")
	})

	t.Run("unlabelled objects are the main controllers'", func(t *testing.T) {
		fs.t = t
		fs.gitSync(nsMain, "on-main", "", "source-controller", "kustomize-controller")
	})

	t.Run("a shard's Deployment and Service deleted by hand come back", func(t *testing.T) {
		fs.t = t
		fs.deleteAndWaitRestored("b")
	})

	t.Run("a forced removal strands the shard's objects", func(t *testing.T) {
		fs.t = t
		fs.removeShardByForce(nsA, "ks-on-a")
	})

	t.Run("placement moves a namespace's Flux objects together", func(t *testing.T) {
		fs.t = t
		fs.drainNamespace(nsGroup)
	})

	t.Run("the objects of a shard that is down fail over", func(t *testing.T) {
		fs.t = t
		fs.failover(nsFailover)
	})
}

// gitSync creates in ns the GitRepository repo-<suffix> and the
// Kustomization ks-<suffix> of shard ("" for none), and checks that they
// are reconciled, by the instances source and kustomize alone, and that
// the artifact is served from source's address.
func (fs *fluxScenario) gitSync(ns, suffix, shard, source, kustomize string) {
	fs.t.Helper()
	repo, ks := "repo-"+suffix, "ks-"+suffix
	fs.gitSource(ns, repo, shard)
	fs.waitReady(fluxGitRepositories, ns, repo)
	fs.kustomization(ns, ks, repo, shard)
	fs.waitConfigMap(ns, gitConfigMap)
	fs.waitReady(fluxKustomizations, ns, ks)
	fs.assertArtifactFrom(fluxGitRepositories, ns, repo, source)
	fs.assertOnlyLoggedBy(ns, source, kustomize)
}

// deleteAndWaitRestored deletes shard's copy of kustomize-controller and of
// source-controller's Service, which Flux names "<controller>-<shard>",
// and waits for the daemon to put both back and say so.
func (fs *fluxScenario) deleteAndWaitRestored(shard string) {
	fs.t.Helper()
	deployment, service := "kustomize-controller-"+shard, "source-controller-"+shard
	old, err := kube.AppsV1().Deployments(fs.fluxNS).Get(fs.ctx, deployment, metav1.GetOptions{})
	require.NoError(fs.t, err)
	require.NoError(fs.t, kube.AppsV1().Deployments(fs.fluxNS).Delete(fs.ctx, deployment, metav1.DeleteOptions{}))
	require.NoError(fs.t, kube.CoreV1().Services(fs.fluxNS).Delete(fs.ctx, service, metav1.DeleteOptions{}))
	fs.waitEvent(status.ReasonShardRestored, deployment+" of shard "+shard+" was missing")
	fs.waitEvent(status.ReasonShardRestored, "Service "+fs.fluxNS+"/"+service)
	eventually(fs.t, time.Minute, "both back", func() error {
		d, err := kube.AppsV1().Deployments(fs.fluxNS).Get(fs.ctx, deployment, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.UID == old.UID {
			return fmt.Errorf("%s not deleted yet", deployment)
		}
		_, err = kube.CoreV1().Services(fs.fluxNS).Get(fs.ctx, service, metav1.GetOptions{})
		return err
	})
}

// newFluxScenario is a scenario whose Flux namespace runs the real Flux
// controllers' Deployments (source-controller and its Service,
// kustomize-controller, helm-controller, all shard-aware) over the real
// Flux CRDs.
func newFluxScenario(t *testing.T, name string) *fluxScenario {
	t.Helper()
	s := newScenario(t, name, true)
	installFluxCRDs(t)
	for _, d := range []*appsv1.Deployment{testfixture.SourceController(s.fluxNS, true), testfixture.KustomizeController(s.fluxNS, true)} {
		_, err := kube.AppsV1().Deployments(s.fluxNS).Create(s.ctx, d, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err := kube.CoreV1().Services(s.fluxNS).Create(s.ctx, testfixture.SourceControllerService(s.fluxNS), metav1.CreateOptions{})
	require.NoError(t, err)
	return &fluxScenario{scenario: s}
}

// fluxArgs are the daemon's arguments for Flux alone.
func (fs *fluxScenario) fluxArgs(extra ...string) []string {
	return append([]string{"--namespace", fs.fleetNS, "--configmap", fs.cmName, "--preset", "flux",
		"--flux-namespace", fs.fluxNS, fs.leastPrivilege()}, extra...)
}

// installFluxCRDs creates the real Flux CRDs, or replaces the minimal ones
// other tests install, and deletes them when the test ends: the tests that
// run later create objects that only the minimal ones accept.
func installFluxCRDs(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	crds, err := testfixture.FluxCRDs()
	require.NoError(t, err)
	for _, crd := range crds {
		_, err := dyn.Resource(crdResource).Create(ctx, crd, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			var old *unstructured.Unstructured
			old, err = dyn.Resource(crdResource).Get(ctx, crd.GetName(), metav1.GetOptions{})
			require.NoError(t, err)
			crd.SetResourceVersion(old.GetResourceVersion())
			_, err = dyn.Resource(crdResource).Update(ctx, crd, metav1.UpdateOptions{})
		}
		require.NoError(t, err, "CRD %s", crd.GetName())
	}
	t.Cleanup(func() { deleteFluxCRDs(t, crds) })
	eventually(t, time.Minute, "the Flux CRDs established", func() error {
		for _, crd := range crds {
			got, err := dyn.Resource(crdResource).Get(ctx, crd.GetName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !crdEstablished(got) {
				return fmt.Errorf("%s not established", crd.GetName())
			}
		}
		return nil
	})
}

// crdEstablished reports whether the CRD's Established condition is True.
func crdEstablished(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// deleteFluxCRDs deletes the CRDs, and with them every object of their
// kinds, once no finalizer holds one back.
func deleteFluxCRDs(t *testing.T, crds []*unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	for gvr := range fluxKinds {
		stripFinalizers(t, gvr, "")
	}
	for _, crd := range crds {
		if err := dyn.Resource(crdResource).Delete(ctx, crd.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete CRD %s: %v", crd.GetName(), err)
		}
	}
	eventually(t, 2*time.Minute, "the Flux CRDs deleted", func() error {
		for _, crd := range crds {
			if _, err := dyn.Resource(crdResource).Get(ctx, crd.GetName(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return notYet(crd.GetName()+" still exists", err)
			}
		}
		return nil
	})
}

// stripFinalizers removes the finalizers of every object of gvr in ns (""
// for all namespaces): no controller runs any more to remove them.
func stripFinalizers(t *testing.T, gvr schema.GroupVersionResource, ns string) {
	t.Helper()
	ctx := context.Background()
	list, err := dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return
	}
	if err != nil {
		t.Errorf("list %s: %v", gvr.Resource, err)
		return
	}
	for _, o := range list.Items {
		if len(o.GetFinalizers()) == 0 {
			continue
		}
		_, err := dyn.Resource(gvr).Namespace(o.GetNamespace()).Patch(ctx, o.GetName(), types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("remove the finalizers of %s %s/%s: %v", gvr.Resource, o.GetNamespace(), o.GetName(), err)
		}
	}
}

// testNamespaces creates the namespaces of the scenario's Flux objects: the
// controllers watch every namespace. When the test ends, once the
// controllers have stopped, the objects' finalizers are removed and the
// namespaces deleted.
func (fs *fluxScenario) testNamespaces(names ...string) {
	t := fs.t
	t.Helper()
	for _, ns := range names {
		_, err := kube.CoreV1().Namespaces().Create(fs.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	t.Cleanup(func() {
		for _, ns := range names {
			for gvr := range fluxKinds {
				stripFinalizers(t, gvr, ns)
			}
			if err := kube.CoreV1().Namespaces().Delete(fs.ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete namespace %s: %v", ns, err)
			}
		}
		eventually(t, 2*time.Minute, "the Flux test namespaces deleted", func() error {
			for _, ns := range names {
				if _, err := kube.CoreV1().Namespaces().Get(fs.ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return notYet(ns+" still exists", err)
				}
			}
			return nil
		})
	})
}

// fluxShardDeployments are the Deployments the contract gives shard id.
func fluxShardDeployments(id string) []string {
	out := make([]string, 0, len(fluxControllers))
	for _, c := range fluxControllers {
		out = append(out, c+"-"+id)
	}
	return out
}

// waitFluxShards waits until exactly the shards ids have their
// Deployments, Available, and the stand-in runs every Flux controller of
// the namespace, ready.
func (fs *fluxScenario) waitFluxShards(ids ...string) {
	fs.t.Helper()
	want := slices.Clone(fluxControllers)
	for _, id := range ids {
		want = append(want, fluxShardDeployments(id)...)
	}
	eventually(fs.t, 2*time.Minute, fmt.Sprintf("Flux shards %v running", ids), func() error {
		list, err := kube.AppsV1().Deployments(fs.fluxNS).List(fs.ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		got := map[string]appsv1.Deployment{}
		for _, d := range list.Items {
			got[d.Name] = d
			if d.Labels["app.kubernetes.io/managed-by"] == "shardkeeper" && !slices.Contains(want, d.Name) {
				return fmt.Errorf("%s still exists", d.Name)
			}
		}
		for _, n := range want {
			d, ok := got[n]
			if !ok {
				return fmt.Errorf("%s missing; Deployments: %v", n, slices.Sorted(maps.Keys(got)))
			}
			if d.Status.AvailableReplicas < 1 || d.Status.ObservedGeneration < d.Generation {
				return fmt.Errorf("%s not available yet", n)
			}
			if err := fs.kubelet.ready(fs.ctx, n); err != nil {
				return err
			}
		}
		return nil
	})
}

// create creates a Flux object of gvr, labelled for shard unless it is "".
func (fs *fluxScenario) create(gvr schema.GroupVersionResource, ns, name, shard string, spec map[string]any) {
	fs.t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(), "kind": fluxKinds[gvr],
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     spec,
	}}
	if shard != "" {
		obj.SetLabels(map[string]string{fluxLabel: shard})
	}
	_, err := dyn.Resource(gvr).Namespace(ns).Create(fs.ctx, obj, metav1.CreateOptions{})
	require.NoError(fs.t, err, "create %s %s/%s", fluxKinds[gvr], ns, name)
}

// gitSource creates a GitRepository of the test's Git server.
func (fs *fluxScenario) gitSource(ns, name, shard string) {
	fs.t.Helper()
	fs.create(fluxGitRepositories, ns, name, shard, map[string]any{
		"interval": "1m", "url": fs.gitURL, "ref": map[string]any{"branch": gitBranch},
	})
}

// kustomization creates a Kustomization that applies the repository's
// kustomization in ns.
func (fs *fluxScenario) kustomization(ns, name, repo, shard string) {
	fs.t.Helper()
	fs.create(fluxKustomizations, ns, name, shard, map[string]any{
		"interval": "1m", "path": "./", "prune": true, "targetNamespace": ns,
		"sourceRef": map[string]any{"kind": "GitRepository", "name": repo},
	})
}

// helmSource creates a HelmRepository of the test's Helm repository.
func (fs *fluxScenario) helmSource(ns, name, shard string) {
	fs.t.Helper()
	fs.create(fluxHelmRepositories, ns, name, shard, map[string]any{"interval": "1m", "url": fs.helmURL})
}

// helmRelease creates a HelmRelease of the chart from repo whose HelmChart
// carries the shard label too, as Flux's sharding guide says it must; for
// shard "", a chart template with no labels, left to placement.
func (fs *fluxScenario) helmRelease(ns, name, repo, shard string) {
	fs.t.Helper()
	chart := map[string]any{"spec": map[string]any{
		"chart": chartName, "version": chartVersion, "interval": "1m",
		"sourceRef": map[string]any{"kind": "HelmRepository", "name": repo},
	}}
	if shard != "" {
		chart["metadata"] = map[string]any{"labels": map[string]any{fluxLabel: shard}}
	}
	fs.create(helmReleases, ns, name, shard, map[string]any{"interval": "1m", "chart": chart})
}

// waitConfigMap waits until the ConfigMap that a controller applies exists.
func (fs *fluxScenario) waitConfigMap(ns, name string) {
	fs.t.Helper()
	eventually(fs.t, fluxReconcileTimeout, "ConfigMap "+ns+"/"+name+" applied", func() error {
		_, err := kube.CoreV1().ConfigMaps(ns).Get(fs.ctx, name, metav1.GetOptions{})
		return err
	})
}

// waitReady waits until the object's Ready condition is True.
func (fs *fluxScenario) waitReady(gvr schema.GroupVersionResource, ns, name string) {
	fs.t.Helper()
	eventually(fs.t, fluxReconcileTimeout, fluxKinds[gvr]+" "+ns+"/"+name+" Ready", func() error {
		o, err := dyn.Resource(gvr).Namespace(ns).Get(fs.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
				if m["status"] != "True" {
					return fmt.Errorf("Ready %v: %v", m["status"], m["message"])
				}
				return nil
			}
		}
		return errors.New("no Ready condition")
	})
}

// artifactHost is the host and port of the object's artifact URL.
func artifactHost(ctx context.Context, gvr schema.GroupVersionResource, ns, name string) (string, error) {
	o, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	raw, _, _ := unstructured.NestedString(o.Object, "status", "artifact", "url")
	if raw == "" {
		return "", errors.New("no artifact yet")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("artifact URL: %w", err)
	}
	return u.Host, nil
}

// advertisedAddr is the storage address the source-controller Deployment
// advertises, as rendered ($(RUNTIME_NAMESPACE) and all) and as the kubelet
// expands it.
func (fs *fluxScenario) advertisedAddr(deployment string) (rendered, expanded string) {
	fs.t.Helper()
	d, err := kube.AppsV1().Deployments(fs.fluxNS).Get(fs.ctx, deployment, metav1.GetOptions{})
	require.NoError(fs.t, err)
	i := slices.IndexFunc(d.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == fluxContainer })
	require.GreaterOrEqual(fs.t, i, 0, "%s has a container %s", deployment, fluxContainer)
	rendered = advertisedHost(d.Spec.Template.Spec.Containers[i].Args)
	return rendered, expand(rendered, map[string]string{"RUNTIME_NAMESPACE": fs.fluxNS})
}

// assertArtifactFrom checks that the source-controller Deployment
// advertises its own Service, and that the object's artifact is served by
// that Deployment's process: its URL names the loopback address that stands
// for that Service.
func (fs *fluxScenario) assertArtifactFrom(gvr schema.GroupVersionResource, ns, name, deployment string) {
	t := fs.t
	t.Helper()
	rendered, host := fs.advertisedAddr(deployment)
	assert.Equal(t, deployment+".$(RUNTIME_NAMESPACE).svc.cluster.local.", rendered, "the advertised storage address of %s", deployment)
	want, ok := fs.kubelet.storageAddr(host)
	require.True(t, ok, "no process of %s serves %s", deployment, host)
	eventually(t, fluxReconcileTimeout, fmt.Sprintf("the artifact of %s %s/%s served by %s (%s)", fluxKinds[gvr], ns, name, deployment, want), func() error {
		got, err := artifactHost(fs.ctx, gvr, ns, name)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("served by %s", got)
		}
		return nil
	})
}

// assertOnlyLoggedBy checks that the processes of the Deployments named,
// and no other, logged the namespace: the controllers log every object they
// reconcile with its namespace.
func (fs *fluxScenario) assertOnlyLoggedBy(ns string, deployments ...string) {
	t := fs.t
	t.Helper()
	quoted := fmt.Sprintf("%q", ns)
	for _, d := range deployments {
		eventually(t, time.Minute, d+" logged "+ns, func() error {
			l, err := fs.kubelet.log(d)
			if err != nil || !strings.Contains(l, quoted) {
				return notYet("not yet", err)
			}
			return nil
		})
	}
	others, err := fs.kubelet.loggers(quoted, deployments...)
	require.NoError(t, err)
	assert.Empty(t, others, "controllers other than %v reconciled objects of %s", deployments, ns)
}

// removeShardByForce removes shard a, which still has the objects of
// namespace ns: blocked, then forced; the Kustomization left on it is
// stranded once deleted, its finalizer removed by no controller.
func (fs *fluxScenario) removeShardByForce(ns, kustomization string) {
	t := fs.t
	t.Helper()
	before := map[string]types.UID{}
	for _, n := range fluxShardDeployments("a") {
		d, err := kube.AppsV1().Deployments(fs.fluxNS).Get(fs.ctx, n, metav1.GetOptions{})
		require.NoError(t, err)
		before[n] = d.UID
	}
	fs.setShards("b")
	fs.waitEvent(status.ReasonShardDeletionBlocked, "shard a ")
	holds(t, 5*time.Second, "shard a's Deployments and processes stay while it is blocked", func() error {
		for n, uid := range before {
			d, err := kube.AppsV1().Deployments(fs.fluxNS).Get(fs.ctx, n, metav1.GetOptions{})
			if err != nil || d.UID != uid || d.DeletionTimestamp != nil {
				return notYet(n+" was deleted", err)
			}
			if !fs.kubelet.isRunning(n) {
				return fmt.Errorf("%s has no process", n)
			}
		}
		return nil
	})

	fs.patch(`{"metadata":{"annotations":{"shardkeeper.io/force-delete":"a"}}}`)
	fs.waitEvent(status.ReasonShardForceDeleted, "shard a force-deleted")
	eventually(t, 2*time.Minute, "shard a's Deployments and processes gone", func() error {
		for n := range before {
			if _, err := kube.AppsV1().Deployments(fs.fluxNS).Get(fs.ctx, n, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return notYet(n+" still exists", err)
			}
			if fs.kubelet.isRunning(n) {
				return fmt.Errorf("%s still has a process", n)
			}
		}
		return nil
	})
	var forced string
	for _, m := range fs.events(status.ReasonShardForceDeleted) {
		if strings.Contains(m, "shard a ") {
			forced = m
		}
	}
	assert.Contains(t, forced, "kustomizations", "the forced deletion warns of the stranded Kustomization")
	assert.Contains(t, forced, ns+"/"+kustomization)

	require.NoError(t, dyn.Resource(fluxKustomizations).Namespace(ns).Delete(fs.ctx, kustomization, metav1.DeleteOptions{}))
	holds(t, 20*time.Second, "the Kustomization of the removed shard hangs on its finalizer", func() error {
		o, err := dyn.Resource(fluxKustomizations).Namespace(ns).Get(fs.ctx, kustomization, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if o.GetDeletionTimestamp() == nil || !slices.Contains(o.GetFinalizers(), fluxFinalizer) {
			return fmt.Errorf("deletion %v, finalizers %v", o.GetDeletionTimestamp(), o.GetFinalizers())
		}
		// The main controllers run all along, and leave it alone.
		return fs.kubelet.ready(fs.ctx, "kustomize-controller")
	})
	_, err := dyn.Resource(fluxKustomizations).Namespace(ns).Patch(fs.ctx, kustomization, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	eventually(t, time.Minute, "the Kustomization gone once its finalizer is removed", func() error {
		if _, err := dyn.Resource(fluxKustomizations).Namespace(ns).Get(fs.ctx, kustomization, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return notYet("still there", err)
		}
		return nil
	})
}

// failover lets placement put a GitRepository and its Kustomization of
// namespace ns on shard a or b, takes that shard down, and waits until the
// other shard's controllers reconcile them.
func (fs *fluxScenario) failover(ns string) {
	t := fs.t
	t.Helper()
	ids := []string{"a", "b"}
	settings := fmt.Sprintf("namespaces: [%s]\ninterval: 2s\ncooldown: 0s\nmaxMoves: 10\nfailoverAfter: 10s", ns)
	fs.setPlacement("a,b", settings)
	fs.waitFluxShards(ids...)
	fs.gitSource(ns, "repo-failover", "")
	fs.kustomization(ns, "ks-failover", "repo-failover", "")

	down := fs.waitPlaced(ns, "", "repo-failover", "ks-failover")
	up := "b"
	if down == "b" {
		up = "a"
	}
	t.Logf("placement put the objects of %s on shard %s; taking it down", ns, down)
	fs.assertArtifactFrom(fluxGitRepositories, ns, "repo-failover", "source-controller-"+down)
	fs.waitConfigMap(ns, gitConfigMap)

	fs.kubelet.hold(fluxShardDeployments(down)...)
	fs.setPlacement(shardsWithout(ids, down), settings)
	fs.takeDownFlux(down)
	eventually(t, 2*time.Minute, "shard "+down+"'s processes stopped", func() error {
		for _, n := range fluxShardDeployments(down) {
			if fs.kubelet.isRunning(n) {
				return fmt.Errorf("%s still runs", n)
			}
		}
		return nil
	})
	fs.waitState(down, status.StateFailedOver)
	moved := time.Now()
	fs.waitPlaced(ns, up, "repo-failover", "ks-failover")
	fs.assertArtifactFrom(fluxGitRepositories, ns, "repo-failover", "source-controller-"+up)
	// The Kustomization and its source move together, so the new shard's
	// kustomize-controller may fetch the artifact before the new
	// source-controller has rewritten its URL: it then retries the URL of
	// the shard that is down (--http-retry, 9 times by default, backing off
	// to 30 s) for some four minutes before it reads the new one.
	eventually(t, 6*time.Minute, "kustomize-controller-"+up+" applied "+ns+"/ks-failover", func() error {
		return fs.kubelet.loggedLine("kustomize-controller-"+up, `"name":"ks-failover"`, "server-side apply completed")
	})
	fs.waitReady(fluxKustomizations, ns, "ks-failover")
	t.Logf("the Kustomization of shard %s was applied by shard %s %s after the failover", down, up, time.Since(moved).Round(time.Second))
}

// waitPlaced waits until placement has labelled the GitRepository and the
// Kustomization named in ns for one shard, shard unless it is "", and
// returns it.
func (fs *fluxScenario) waitPlaced(ns, shard, repo, kustomization string) string {
	fs.t.Helper()
	got, _ := fs.waitGroup(ns, shard, fluxObject{fluxGitRepositories, repo}, fluxObject{fluxKustomizations, kustomization})
	return got
}

// fluxObject names a Flux object of a namespace.
type fluxObject struct {
	gvr  schema.GroupVersionResource
	name string
}

func (o fluxObject) String() string { return fluxKinds[o.gvr] + " " + o.name }

// waitGroup waits until placement has labelled every one of objs in ns for
// one shard, shard unless it is "", and returns it, with the time placement
// wrote on each (its assigned-at annotation) by object.
func (fs *fluxScenario) waitGroup(ns, shard string, objs ...fluxObject) (string, map[fluxObject]string) {
	fs.t.Helper()
	var got string
	var at map[fluxObject]string
	eventually(fs.t, 2*time.Minute, fmt.Sprintf("the objects of %s placed on shard %q", ns, shard), func() error {
		shards := map[string][]string{}
		at = map[fluxObject]string{}
		for _, obj := range objs {
			o, err := dyn.Resource(obj.gvr).Namespace(ns).Get(fs.ctx, obj.name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			label, placed := o.GetLabels()[fluxLabel], o.GetAnnotations()[placement.AssignedShardAnnotation]
			if label == "" || label != placed {
				return fmt.Errorf("%s: label %q, placed on %q", obj, label, placed)
			}
			shards[label] = append(shards[label], obj.String())
			at[obj] = o.GetAnnotations()[placement.AssignedAtAnnotation]
		}
		if len(shards) != 1 {
			return fmt.Errorf("on different shards: %v", shards)
		}
		got = slices.Collect(maps.Keys(shards))[0]
		if shard != "" && got != shard {
			return fmt.Errorf("on %s", got)
		}
		return nil
	})
	return got, at
}

// Names of the objects of the namespace that placement moves as one.
const (
	groupRepo          = "repo-group"
	groupKustomization = "ks-group"
	groupCharts        = "charts-group"
	groupRelease       = "hr-group"
)

// requestedAtAnnotation asks a Flux controller to reconcile the object; it
// answers in status.lastHandledReconcileAt.
const requestedAtAnnotation = "reconcile.fluxcd.io/requestedAt"

// drainNamespace lets placement put the Flux objects of namespace ns, all
// created unlabelled, on one shard, drains that shard, and checks that they
// move to the other one together, in one round, and that the controllers
// of the other shard take them over while those of the drained one, which
// still run, let them go.
func (fs *fluxScenario) drainNamespace(ns string) {
	t := fs.t
	t.Helper()
	ids := []string{"a", "b"}
	// The default cooldown keeps a rebalance from moving the group between
	// its assignment and the drain: the objects of the other scenarios,
	// out of scope, still weigh on their shards.
	fs.setPlacement("a,b", fmt.Sprintf("namespaces: [%s]\ninterval: 2s\nmaxMoves: 10\ncooldown: 10m", ns))
	fs.waitFluxShards(ids...)
	t.Cleanup(func() {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, shardconfig.DrainAnnotation)
		if _, err := kube.CoreV1().ConfigMaps(fs.fleetNS).Patch(fs.ctx, fs.cmName, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Errorf("remove the drain annotation: %v", err)
		}
	})
	fs.gitSource(ns, groupRepo, "")
	fs.kustomization(ns, groupKustomization, groupRepo, "")
	fs.helmSource(ns, groupCharts, "")
	fs.helmRelease(ns, groupRelease, groupCharts, "")
	group := []fluxObject{
		{fluxGitRepositories, groupRepo}, {fluxKustomizations, groupKustomization},
		{fluxHelmRepositories, groupCharts}, {helmReleases, groupRelease},
	}

	from, _ := fs.waitGroup(ns, "", group...)
	to := "b"
	if from == "b" {
		to = "a"
	}
	t.Logf("placement put the objects of %s on shard %s; draining it", ns, from)
	fs.assertGroupServedBy(ns, from)
	before, err := artifactHost(fs.ctx, fluxGitRepositories, ns, groupRepo)
	require.NoError(t, err)
	fs.waitSettled(ns, group)

	fs.patch(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, shardconfig.DrainAnnotation, from))
	drained := time.Now()
	_, at := fs.waitGroup(ns, to, group...)
	assert.Len(t, slices.Compact(slices.Sorted(maps.Values(at))), 1, "the objects of %s moved in one round: assigned at %v", ns, at)
	fs.waitEvent(status.ReasonObjectsMoved, fmt.Sprintf("(%d drained) to %s: %d; drained from %s: %d", len(group), to, len(group), from, len(group)))
	fs.assertGroupServedBy(ns, to)
	after, err := artifactHost(fs.ctx, fluxGitRepositories, ns, groupRepo)
	require.NoError(t, err)
	assert.NotEqual(t, before, after, "the GitRepository's artifact URL names the new shard's source-controller")
	t.Logf("the objects of %s were served by shard %s %s after shard %s was drained", ns, to, time.Since(drained).Round(time.Second), from)
	fs.assertLetGo(ns, from, append(group, fluxObject{fluxHelmCharts, ns + "-" + groupRelease}))

	fs.patch(fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, shardconfig.DrainAnnotation))
	fs.waitState(from, status.StateActive)
}

// waitSettled waits until no controller has written any of objs in ns for
// a few seconds: a drain then moves them at the versions it read, in one
// round, rather than meeting a status write half-way, which refuses the
// move of that object until the next round.
func (fs *fluxScenario) waitSettled(ns string, objs []fluxObject) {
	fs.t.Helper()
	last, since := "", time.Now()
	eventually(fs.t, time.Minute, "the objects of "+ns+" settled", func() error {
		var versions []string
		for _, obj := range objs {
			o, err := dyn.Resource(obj.gvr).Namespace(ns).Get(fs.ctx, obj.name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			versions = append(versions, o.GetResourceVersion())
		}
		if now := strings.Join(versions, ","); now != last {
			last, since = now, time.Now()
		}
		if quiet := time.Since(since); quiet < 3*time.Second {
			return fmt.Errorf("written %s ago", quiet.Round(time.Millisecond))
		}
		return nil
	})
}

// assertGroupServedBy checks that the controllers of shard serve the
// objects of drainNamespace: the HelmRelease's chart template carries the
// shard label, and so does the HelmChart that helm-controller makes of it;
// the shard's source-controller serves the artifacts; its
// kustomize-controller applied the Kustomization, and its helm-controller
// reconciled the release, whose ConfigMap is installed.
func (fs *fluxScenario) assertGroupServedBy(ns, shard string) {
	t := fs.t
	t.Helper()
	hr, err := dyn.Resource(helmReleases).Namespace(ns).Get(fs.ctx, groupRelease, metav1.GetOptions{})
	require.NoError(t, err)
	chartLabels, _, _ := unstructured.NestedStringMap(hr.Object, "spec", "chart", "metadata", "labels")
	assert.Equal(t, shard, chartLabels[fluxLabel], "the HelmRelease's spec.chart.metadata.labels, written with its shard label")
	chart := ns + "-" + groupRelease
	eventually(t, fluxReconcileTimeout, "helm-controller-"+shard+" labelled the HelmChart "+chart, func() error {
		o, err := dyn.Resource(fluxHelmCharts).Namespace(ns).Get(fs.ctx, chart, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := o.GetLabels()[fluxLabel]; got != shard {
			return fmt.Errorf("labelled %q", got)
		}
		return nil
	})
	fs.assertArtifactFrom(fluxGitRepositories, ns, groupRepo, "source-controller-"+shard)
	fs.assertArtifactFrom(fluxHelmCharts, ns, chart, "source-controller-"+shard)
	// A Kustomization that follows its source may first fetch the artifact
	// at the drained shard's address: that source-controller still runs
	// and serves it.
	eventually(t, fluxReconcileTimeout, "kustomize-controller-"+shard+" applied "+ns+"/"+groupKustomization, func() error {
		return fs.kubelet.loggedLine("kustomize-controller-"+shard, `"name":"`+groupKustomization+`"`, "server-side apply completed")
	})
	eventually(t, fluxReconcileTimeout, "helm-controller-"+shard+" reconciled "+ns+"/"+groupRelease, func() error {
		return fs.kubelet.loggedLine("helm-controller-"+shard, fmt.Sprintf("%q", groupRelease), fmt.Sprintf("%q", ns))
	})
	fs.waitConfigMap(ns, gitConfigMap)
	fs.waitConfigMap(ns, groupRelease+chartConfigMapSuffix)
	fs.waitReady(fluxKustomizations, ns, groupKustomization)
	// Right after a move, helm-controller may find the HelmChart without
	// an artifact: the new shard's source-controller rebuilds it. The
	// rebuilt one has the revision the release last attempted, which
	// helm-controller's watch skips, so the release is Ready again only
	// at its requeue for a dependency (--requeue-dependency, 30 s).
	fs.waitReady(helmReleases, ns, groupRelease)
}

// assertLetGo checks that the controllers of shard from, which still run,
// have let the objects go: each is asked for a reconcile, which the new
// shard's controllers answer, and for a while after that the processes of
// shard from log nothing of the namespace.
func (fs *fluxScenario) assertLetGo(ns, from string, objs []fluxObject) {
	t := fs.t
	t.Helper()
	marks := map[string]int{}
	for _, d := range fluxShardDeployments(from) {
		l, err := fs.kubelet.log(d)
		require.NoError(t, err)
		marks[d] = len(l)
	}
	token := time.Now().UTC().Format(time.RFC3339Nano)
	for _, o := range objs {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, requestedAtAnnotation, token)
		_, err := dyn.Resource(o.gvr).Namespace(ns).Patch(fs.ctx, o.name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		require.NoError(t, err, "request a reconcile of %s", o)
	}
	for _, o := range objs {
		eventually(t, fluxReconcileTimeout, fmt.Sprintf("the reconcile of %s/%s requested at %s handled", ns, o, token), func() error {
			got, err := dyn.Resource(o.gvr).Namespace(ns).Get(fs.ctx, o.name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if handled, _, _ := unstructured.NestedString(got.Object, "status", "lastHandledReconcileAt"); handled != token {
				return fmt.Errorf("last handled %q", handled)
			}
			return nil
		})
	}
	quoted := fmt.Sprintf("%q", ns)
	holds(t, 5*time.Second, "the controllers of the drained shard "+from+" log nothing of "+ns, func() error {
		for d, mark := range marks {
			l, err := fs.kubelet.log(d)
			if err != nil {
				return err
			}
			if since := l[mark:]; strings.Contains(since, quoted) {
				return fmt.Errorf("%s logged, after the move:\n%s", d, tail(since, 20))
			}
		}
		return nil
	})
}

// takeDownFlux makes shard id's Flux controllers unavailable, as takeDown
// does Fleet's: once the shard's Deployments carry the node selector no
// node meets, the ReplicaSets whose pods still run are deleted.
func (fs *fluxScenario) takeDownFlux(id string) {
	fs.t.Helper()
	sel := metav1.ListOptions{LabelSelector: render.ShardLabel + "=" + id}
	eventually(fs.t, time.Minute, "shard "+id+"'s Deployments updated", func() error {
		list, err := kube.AppsV1().Deployments(fs.fluxNS).List(fs.ctx, sel)
		if err != nil {
			return err
		}
		if len(list.Items) == 0 {
			return errors.New("no Deployments")
		}
		for _, d := range list.Items {
			if d.Spec.Template.Spec.NodeSelector["shardkeeper.io/test-pool"] != "nowhere" || d.Status.ObservedGeneration != d.Generation {
				return fmt.Errorf("%s not rolled to the new node selector yet", d.Name)
			}
		}
		return nil
	})
	owners := fluxShardDeployments(id)
	list, err := kube.AppsV1().ReplicaSets(fs.fluxNS).List(fs.ctx, metav1.ListOptions{})
	require.NoError(fs.t, err)
	for _, rs := range list.Items {
		owned := len(rs.OwnerReferences) > 0 && slices.Contains(owners, rs.OwnerReferences[0].Name)
		if owned && rs.Spec.Template.Spec.NodeSelector["shardkeeper.io/test-pool"] != "nowhere" {
			require.NoError(fs.t, kube.AppsV1().ReplicaSets(fs.fluxNS).Delete(fs.ctx, rs.Name, metav1.DeleteOptions{}))
		}
	}
}
