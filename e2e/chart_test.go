//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/shardkeeper/shardkeeper/e2e/cluster"
	"github.com/shardkeeper/shardkeeper/pkg/status"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

// The chart and the manifests rendered from it, relative to this package,
// where `go test` runs.
const (
	chartDir          = "../charts/shardkeeper"
	manifestsDir      = "../manifests"
	chartFieldManager = "shardkeeper-e2e"
)

// chartFluxKinds are the kinds of the Flux preset, as pkg/source lists them
// (fluxKinds): the chart grants rights on all of them.
var chartFluxKinds = func() []schema.GroupVersionResource {
	gvr := func(group, version, resource string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: group, Version: version, Resource: resource}
	}
	const sources, images = "source.toolkit.fluxcd.io", "image.toolkit.fluxcd.io"
	return []schema.GroupVersionResource{
		gvr(sources, "v1", "gitrepositories"), gvr(sources, "v1", "ocirepositories"), gvr(sources, "v1", "helmrepositories"),
		gvr(sources, "v1", "helmcharts"), gvr(sources, "v1", "buckets"),
		gvr("kustomize.toolkit.fluxcd.io", "v1", "kustomizations"), helmReleases,
		gvr(images, "v1", "imagerepositories"), gvr(images, "v1", "imagepolicies"), gvr(images, "v1", "imageupdateautomations"),
		gvr("source.extensions.fluxcd.io", "v1beta1", "artifactgenerators"),
	}
}()

// TestChartRenderAndApply renders the chart for two sets of values and
// applies every object to the API server, then checks what its
// ServiceAccount may and may not do.
func TestChartRenderAndApply(t *testing.T) {
	// The default values' objects and rights; placement adds only rights.
	defaultKinds := map[string]int{"ServiceAccount": 1, "ConfigMap": 1, "Role": 2, "RoleBinding": 2,
		"ClusterRole": 1, "ClusterRoleBinding": 1, "Deployment": 1, "PodDisruptionBudget": 1}
	defaultRBAC := chartRBAC{
		sourceNamespaces:  []string{"cattle-fleet-system"},
		serviceNamespaces: []string{"cattle-fleet-system"},
		otherNamespaces:   []string{"flux-system", "default", "kube-system"},
		mapped:            []schema.GroupVersionResource{gitRepos, helmOps},
		unmapped:          []schema.GroupVersionResource{helmReleases},
		fleet:             true,
		lease:             true,
	}
	placementRBAC := defaultRBAC
	placementRBAC.placement = true
	stampRBAC := placementRBAC
	stampRBAC.stamp = true
	fullRBAC := chartRBAC{
		sourceNamespaces:  []string{"cattle-fleet-system", "flux-system"},
		serviceNamespaces: []string{"cattle-fleet-system", "flux-system"},
		otherNamespaces:   []string{"default", "kube-system"},
		mapped:            append([]schema.GroupVersionResource{gitRepos, helmOps}, chartFluxKinds...),
		fleet:             true,
		flux:              true,
		lease:             true,
	}
	fullPlacementRBAC := fullRBAC
	fullPlacementRBAC.placement = true
	fullKinds := map[string]int{"ServiceAccount": 1, "ConfigMap": 1, "Role": 3, "RoleBinding": 3,
		"ClusterRole": 1, "ClusterRoleBinding": 1, "Deployment": 1, "PodDisruptionBudget": 1}
	sets := []struct {
		name, release, namespace string
		args                     []string
		kinds                    map[string]int
		rbac                     chartRBAC
	}{{
		name:      "default values",
		release:   "skdefault",
		namespace: "chart-default",
		kinds:     defaultKinds,
		rbac:      defaultRBAC,
	}, {
		name:      "fleet and flux with metrics",
		release:   "skfull",
		namespace: "chart-full",
		args: []string{"-f", chartDir + "/ci/fleet-flux-values.yaml",
			"--set", "metrics.enabled=true", "--set", "metrics.serviceMonitor.enabled=true"},
		kinds: map[string]int{"ServiceAccount": 1, "ConfigMap": 1, "Role": 3, "RoleBinding": 3,
			"ClusterRole": 1, "ClusterRoleBinding": 1, "Deployment": 1, "PodDisruptionBudget": 1,
			"Service": 1, "ServiceMonitor": 1},
		rbac: fullRBAC,
	}, {
		name:      "fleet and flux with placement",
		release:   "skfullplace",
		namespace: "chart-full-place",
		args:      []string{"-f", chartDir + "/ci/fleet-flux-values.yaml", "--set", "placement.enabled=true"},
		kinds:     fullKinds,
		rbac:      fullPlacementRBAC,
	}, {
		name:      "placement allowed",
		release:   "skplace",
		namespace: "chart-place",
		args:      []string{"--set", "placement.enabled=true"},
		kinds:     defaultKinds,
		rbac:      placementRBAC,
	}, {
		// Kubernetes 1.36+: the stamping policy, its binding, --stamp and
		// the right to write the policy's parameter. This API server serves
		// MutatingAdmissionPolicy, so applying them proves it accepts them.
		name:      "placement on an API server with MutatingAdmissionPolicy",
		release:   "skstamp",
		namespace: "chart-stamp",
		args:      []string{"--set", "placement.enabled=true", "--api-versions", mapAPIVersion},
		kinds: map[string]int{"ServiceAccount": 1, "ConfigMap": 1, "Role": 2, "RoleBinding": 2,
			"ClusterRole": 1, "ClusterRoleBinding": 1, "Deployment": 1, "PodDisruptionBudget": 1,
			"MutatingAdmissionPolicy": 1, "MutatingAdmissionPolicyBinding": 1},
		rbac: stampRBAC,
	}}
	for _, set := range sets {
		t.Run(set.name, func(t *testing.T) {
			args := append([]string{"template", set.release, chartDir, "--namespace", set.namespace}, set.args...)
			objs := decodeObjects(t, helm(t, args...))
			// The release namespace is new; Fleet's and Flux's would exist.
			ensureNamespace(t, set.namespace)
			for _, ns := range set.rbac.sourceNamespaces {
				ensureNamespace(t, ns)
			}

			kinds := map[string]int{}
			for _, o := range objs {
				kinds[o.GetKind()]++
			}
			assert.Equal(t, set.kinds, kinds, "the kinds of the rendered objects")

			applyObjects(t, objs)
			deleteClusterPoliciesAtEnd(t, objs)

			dep := findObject(t, objs, "Deployment")
			checkDaemonDeployment(t, dep)
			containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
			assert.Equal(t, set.rbac.placement, strings.Contains(fmt.Sprint(containers), "--allow-placement"),
				"the daemon may place objects only where the chart grants patch")
			assert.Equal(t, set.rbac.stamp, strings.Contains(fmt.Sprint(containers), "--stamp"),
				"the daemon publishes the stamp records only where the policy reads them and the chart lets it")
			waitAvailable(t, set.namespace, dep.GetName())

			rbac := set.rbac
			rbac.namespace = set.namespace
			rbac.serviceAccount = findObject(t, objs, "ServiceAccount").GetName()
			rbac.configMap = findObject(t, objs, "ConfigMap").GetName()
			rbac.check(t)
		})
	}
}

// deleteClusterPoliciesAtEnd deletes the stamping policies among objs
// when the test ends: they are cluster-wide, and would outlive the
// release namespace.
func deleteClusterPoliciesAtEnd(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	t.Cleanup(func() {
		for _, o := range objs {
			gvr, ok := mutatingPolicyResources[o.GetKind()]
			if !ok {
				continue
			}
			if err := dyn.Resource(gvr).Delete(context.Background(), o.GetName(), metav1.DeleteOptions{}); err != nil {
				t.Errorf("deleting %s %s: %v", o.GetKind(), o.GetName(), err)
			}
		}
	})
}

// TestChartManifests applies manifests/*.yaml, the chart rendered with its
// default values, as a user of plain manifests would.
func TestChartManifests(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(manifestsDir, "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no manifests in %s: run `make manifests`", manifestsDir)
	var objs []*unstructured.Unstructured
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		objs = append(objs, decodeObjects(t, b)...)
	}
	ns := findObject(t, objs, "Deployment").GetNamespace()
	require.Equal(t, "cattle-fleet-system", ns)
	ensureNamespace(t, ns)
	applyObjects(t, objs)

	dep := findObject(t, objs, "Deployment")
	checkDaemonDeployment(t, dep)
	waitAvailable(t, ns, dep.GetName())
	chartRBAC{
		namespace:         ns,
		serviceAccount:    findObject(t, objs, "ServiceAccount").GetName(),
		configMap:         findObject(t, objs, "ConfigMap").GetName(),
		sourceNamespaces:  []string{ns},
		serviceNamespaces: []string{ns},
		otherNamespaces:   []string{"flux-system", "default"},
		mapped:            []schema.GroupVersionResource{gitRepos, helmOps},
		unmapped:          []schema.GroupVersionResource{helmReleases},
		fleet:             true,
		lease:             true,
	}.check(t)
}

// TestChartRBACRunsTheDaemon runs the daemon with nothing but the rights
// the chart grants: the arguments of the rendered Deployment, authorized as
// its ServiceAccount. It creates shards, blocks a removal, is forced, and
// is never refused a request (403).
func TestChartRBACRunsTheDaemon(t *testing.T) {
	s := newScenario(t, "chartrbac", true)
	objs := decodeObjects(t, helm(t, "template", "skrbac", chartDir, "--namespace", s.fleetNS,
		"--set", "presets.fleet.namespace="+s.fleetNS,
		"--set", "presets.flux.enabled=true", "--set", "presets.flux.namespace="+s.fluxNS,
		"--set", "shards=one", "--set", "metrics.enabled=true"))
	applyObjects(t, objs)

	dep := findObject(t, objs, "Deployment")
	container := daemonContainer(t, dep)
	sa, _, _ := unstructured.NestedString(dep.Object, "spec", "template", "spec", "serviceAccountName")
	require.NotEmpty(t, sa)
	user := "system:serviceaccount:" + s.fleetNS + ":" + sa
	kubeconfig := impersonatingKubeconfig(t, user, serviceAccountGroups(s.fleetNS)...)

	// The harness picks free ports for the probes and metrics, and the
	// chart's own addresses would override them; everything else is passed
	// as the chart renders it, with POD_NAMESPACE as the pod would have it.
	var args []string
	for _, a := range container.Args {
		if strings.HasPrefix(a, "--health-probe-bind-address") || strings.HasPrefix(a, "--metrics-bind-address") {
			continue
		}
		args = append(args, a)
	}
	require.Contains(t, args, "--leader-elect")
	t.Setenv("POD_NAMESPACE", s.fleetNS)
	s.daemon = startDaemon(t, append(args, "--kubeconfig", kubeconfig)...)

	s.waitShards("one")
	s.waitEvent(status.ReasonShardCreated, "shard one created")
	eventually(t, time.Minute, "daemon ready", s.daemon.ready)
	holder, err := s.leaseHolder()
	require.NoError(t, err, "the Lease in the release namespace")
	assert.NotEmpty(t, holder)

	s.setShards("one,two")
	s.waitShards("one", "two")
	s.waitState("two", status.StateActive)

	// A removal that is blocked, then forced: the daemon patches the
	// annotation off the ConfigMap.
	s.object(gitRepos, "payments", fleetLabel, "two")
	s.setShards("one")
	s.waitState("two", status.StateBlocked)
	s.waitEvent(status.ReasonShardDeletionBlocked, "shard two")
	s.patch(`{"metadata":{"annotations":{"shardkeeper.io/force-delete":"two"}}}`)
	s.waitShards("one")
	s.waitEvent(status.ReasonShardForceDeleted, "shard two")
	eventually(t, time.Minute, "force-delete annotation consumed", func() error {
		cm, err := kube.CoreV1().ConfigMaps(s.fleetNS).Get(s.ctx, s.cmName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if v, ok := cm.Annotations["shardkeeper.io/force-delete"]; ok && v != "" {
			return fmt.Errorf("annotation still %q", v)
		}
		return nil
	})
	s.waitQuiet()
	// client-go counts every request of every client the daemon builds,
	// the informers' lists and watches included, by its answer's code.
	requests, err := s.daemon.metricSum("rest_client_requests_total")
	require.NoError(t, err)
	require.Positive(t, requests, "the daemon counts its requests")
	refused, err := s.daemon.metricSum("rest_client_requests_total", `code="403"`)
	require.NoError(t, err)
	assert.Zero(t, refused, "the daemon was refused a request the chart should allow")
}

// TestChartUpgradeKeepsTheShardList installs the chart with Helm, edits the
// shard list as an operator does, and checks that neither an upgrade nor an
// uninstall and a new install change it.
func TestChartUpgradeKeepsTheShardList(t *testing.T) {
	ctx := context.Background()
	ns, release := "chart-upgrade", "skupgrade"
	ensureNamespace(t, ns)
	base := []string{chartDir, "--namespace", ns, "--set", "presets.fleet.namespace=" + ns}
	getCM := func() *corev1.ConfigMap {
		t.Helper()
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "shardkeeper", metav1.GetOptions{})
		require.NoError(t, err)
		return cm
	}

	notes := string(helm(t, append([]string{"install", release}, append(base, "--set", "shards=shard0")...)...))
	assert.Contains(t, notes, "kubectl -n "+ns+" patch configmap shardkeeper", "the NOTES say how to change the shards")
	cm := getCM()
	assert.Equal(t, "shard0", cm.Data["shards"])
	assert.Equal(t, "keep", cm.Annotations["helm.sh/resource-policy"])

	// The operator's edits.
	_, err := kube.CoreV1().ConfigMaps(ns).Patch(ctx, "shardkeeper", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"example.com/owner":"platform"}},"data":{"shards":"shard0,shard1,shard2"}}`), metav1.PatchOptions{})
	require.NoError(t, err)

	// An upgrade with another shards value and another replica count: the
	// Deployment changes, the shard list does not.
	notes = string(helm(t, append([]string{"upgrade", release}, append(base, "--set", "shards=other", "--set", "replicaCount=1")...)...))
	assert.Contains(t, notes, "The shard list was kept as it is in the cluster", "the NOTES say the shards value was not applied")
	cm = getCM()
	assert.Equal(t, "shard0,shard1,shard2", cm.Data["shards"], "helm upgrade must keep the live shard list")
	assert.Equal(t, "platform", cm.Annotations["example.com/owner"])
	dep, err := kube.AppsV1().Deployments(ns).Get(ctx, release+"-shardkeeper", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(1), ptr.Deref(dep.Spec.Replicas, 0), "the upgrade itself was applied")
	assert.Contains(t, string(helm(t, "get", "manifest", release, "--namespace", ns)), `shards: "shard0,shard1,shard2"`,
		"the release's manifest records the live shard list")

	// A second upgrade with the same values is a no-op for the ConfigMap.
	rv := cm.ResourceVersion
	helm(t, append([]string{"upgrade", release}, append(base, "--set", "replicaCount=1")...)...)
	assert.Equal(t, rv, getCM().ResourceVersion, "an upgrade must not write the ConfigMap")

	// Uninstall keeps the ConfigMap; a new install adopts it as it is.
	helm(t, "uninstall", release, "--namespace", ns)
	assert.Equal(t, "shard0,shard1,shard2", getCM().Data["shards"], "helm uninstall must keep the ConfigMap")
	eventually(t, time.Minute, "the Deployment is gone", func() error {
		_, err := kube.AppsV1().Deployments(ns).Get(ctx, release+"-shardkeeper", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return notYet("still there", err)
	})
	helm(t, append([]string{"install", release}, append(base, "--set", "shards=shard9")...)...)
	assert.Equal(t, "shard0,shard1,shard2", getCM().Data["shards"], "a new install must keep the live shard list")
}

// chartRBAC is what the chart's ServiceAccount should be allowed to do.
type chartRBAC struct {
	namespace, serviceAccount, configMap string
	// sourceNamespaces hold the controllers it clones; otherNamespaces are
	// namespaces where it must not touch Deployments. serviceNamespaces
	// are the source namespaces where it manages the shards' copies of
	// Services (Fleet's and Flux's).
	sourceNamespaces, otherNamespaces, serviceNamespaces []string
	// mapped are listed cluster-wide; unmapped are not.
	mapped, unmapped []schema.GroupVersionResource
	// fleet: the Fleet preset's kinds are mapped, so Bundles and
	// BundleDeployments are listed cluster-wide too (counted, never
	// written), and with placement GitRepos and HelmOps may also be read
	// one by one.
	fleet bool
	// flux: the Flux preset's kinds are mapped, so with placement
	// HelmReleases may also be read one by one.
	flux  bool
	lease bool
	// placement: the mapped kinds may be patched (Bundles and
	// BundleDeployments never), GitRepos and HelmOps read with the Fleet
	// preset, HelmReleases with the Flux preset, and nothing more.
	placement bool
	// stamp: the stamping policy is installed, so the daemon may read and
	// write its parameter, the ConfigMap <configMap>-stamp, and no other.
	stamp bool
}

type accessCase struct {
	allowed                                bool
	verb, group, resource, namespace, name string
}

func (c accessCase) String() string {
	where := "cluster-wide"
	if c.namespace != "" {
		where = "in " + c.namespace
	}
	res := c.resource
	if c.group != "" {
		res += "." + c.group
	}
	if c.name != "" {
		res += " " + c.name
	}
	return fmt.Sprintf("%s %s %s", c.verb, res, where)
}

func (r chartRBAC) cases() []accessCase {
	ns, cm := r.namespace, r.configMap
	var cs []accessCase
	add := func(allowed bool, verbs []string, group, resource, namespace, name string) {
		for _, v := range verbs {
			cs = append(cs, accessCase{allowed, v, group, resource, namespace, name})
		}
	}
	all := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	for _, sns := range r.sourceNamespaces {
		// Every verb the daemon sends on Deployments, and no patch: it never
		// sends one.
		add(true, []string{"get", "list", "watch", "create", "update", "delete"}, "apps", "deployments", sns, "")
		add(false, []string{"patch"}, "apps", "deployments", sns, "")
		// The shard copies of Services (Fleet's monitoring-<source>-shard-<id>,
		// Flux's source-controller-<id>), only where a source has a Service.
		services := slices.Contains(r.serviceNamespaces, sns)
		add(services, []string{"list", "watch", "create", "update", "delete"}, "", "services", sns, "")
		add(false, []string{"get", "patch"}, "", "services", sns, "")
		add(false, []string{"get", "patch"}, "", "services", sns, "monitoring-fleet-controller")
		add(false, []string{"get", "list"}, "", "secrets", sns, "")
		add(false, []string{"list", "delete"}, "", "pods", sns, "")
	}
	for _, ons := range append([]string{ns}, r.otherNamespaces...) {
		if slices.Contains(r.sourceNamespaces, ons) {
			continue
		}
		add(false, []string{"list", "create", "delete"}, "apps", "deployments", ons, "")
		add(false, all, "", "services", ons, "")
	}
	add(false, []string{"list", "delete"}, "apps", "deployments", "", "")
	add(false, all, "", "services", "", "")

	for _, m := range r.mapped {
		add(true, []string{"list", "watch"}, m.Group, m.Resource, "", "")
		// Placement reads the whole object before a move that bumps a
		// GitRepo's spec.forceSyncGeneration or labels a HelmOp's
		// spec.labels (Fleet preset) or a HelmRelease's spec.chart (Flux
		// preset).
		get := r.fleet && (m == gitRepos || m == helmOps) || r.flux && m == helmReleases
		add(r.placement && get, []string{"get"}, m.Group, m.Resource, ns, "x")
		add(false, []string{"create", "update", "delete"}, m.Group, m.Resource, ns, "x")
		add(r.placement, []string{"patch"}, m.Group, m.Resource, ns, "x")
		add(false, []string{"create", "update", "delete"}, m.Group, m.Resource, "", "")
	}
	for _, m := range r.unmapped {
		add(false, []string{"list", "watch"}, m.Group, m.Resource, "", "")
	}
	// Fleet's Bundles and BundleDeployments are counted, never relabelled:
	// not even with placement.
	for _, derived := range []string{"bundles", "bundledeployments"} {
		add(r.fleet, []string{"list", "watch"}, "fleet.cattle.io", derived, "", "")
		add(false, []string{"get", "create", "update", "patch", "delete"}, "fleet.cattle.io", derived, ns, "x")
		add(false, []string{"create", "update", "patch", "delete"}, "fleet.cattle.io", derived, "", "")
	}
	add(true, []string{"list", "watch"}, "apiextensions.k8s.io", "customresourcedefinitions", "", "")
	add(false, []string{"get", "create", "update", "delete"}, "apiextensions.k8s.io", "customresourcedefinitions", "", "x")

	// The shard ConfigMap, the status ConfigMap, and no other.
	add(true, []string{"get", "list", "watch", "patch"}, "", "configmaps", ns, cm)
	add(false, []string{"update", "delete"}, "", "configmaps", ns, cm)
	add(true, []string{"get", "update"}, "", "configmaps", ns, cm+"-status")
	add(false, []string{"patch", "delete"}, "", "configmaps", ns, cm+"-status")
	add(r.stamp, []string{"get", "update"}, "", "configmaps", ns, cm+"-stamp")
	add(false, []string{"patch", "delete"}, "", "configmaps", ns, cm+"-stamp")
	add(true, []string{"create"}, "", "configmaps", ns, "")
	add(false, []string{"get", "patch", "update", "delete"}, "", "configmaps", ns, "kube-root-ca.crt")
	add(false, []string{"list", "watch"}, "", "configmaps", ns, "")
	add(false, []string{"get"}, "", "configmaps", "default", cm)

	add(true, []string{"create", "patch"}, "", "events", ns, "")
	add(false, []string{"list", "delete"}, "", "events", ns, "")
	add(false, []string{"get", "list"}, "", "secrets", ns, "")
	add(false, []string{"list"}, "", "secrets", "", "")

	add(r.lease, []string{"get", "update"}, "coordination.k8s.io", "leases", ns, "shardkeeper")
	add(r.lease, []string{"create"}, "coordination.k8s.io", "leases", ns, "")
	add(false, []string{"get", "update"}, "coordination.k8s.io", "leases", ns, "other")
	add(false, []string{"delete"}, "coordination.k8s.io", "leases", ns, "shardkeeper")
	return cs
}

// check asks the API server's authorizer about every case, then makes a few
// real requests as the ServiceAccount.
func (r chartRBAC) check(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	user := "system:serviceaccount:" + r.namespace + ":" + r.serviceAccount
	groups := serviceAccountGroups(r.namespace)
	for _, c := range r.cases() {
		review, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups, ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: c.namespace, Verb: c.verb, Group: c.group, Resource: c.resource, Name: c.name,
			}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		if review.Status.Allowed != c.allowed {
			want := "allowed"
			if !c.allowed {
				want = "denied"
			}
			t.Errorf("%s may %s: should be %s (%s)", r.serviceAccount, c, want, review.Status.Reason)
		}
	}

	// The same, with requests made as the ServiceAccount.
	as := kubernetes.NewForConfigOrDie(env.ConfigFor(user, groups...))
	asDyn := dynamic.NewForConfigOrDie(env.ConfigFor(user, groups...))
	assertAllowed(t, "list Deployments in "+r.sourceNamespaces[0], func() error {
		_, err := as.AppsV1().Deployments(r.sourceNamespaces[0]).List(ctx, metav1.ListOptions{})
		return err
	})
	assertAllowed(t, "list GitRepos cluster-wide", func() error {
		_, err := asDyn.Resource(gitRepos).List(ctx, metav1.ListOptions{})
		return err
	})
	assertAllowed(t, "list the shard ConfigMap by its name", func() error {
		_, err := as.CoreV1().ConfigMaps(r.namespace).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("metadata.name", r.configMap).String(),
		})
		return err
	})

	assertForbidden(t, "list every ConfigMap", func() error {
		_, err := as.CoreV1().ConfigMaps(r.namespace).List(ctx, metav1.ListOptions{})
		return err
	})
	assertForbidden(t, "get a Secret", func() error {
		_, err := as.CoreV1().Secrets(r.namespace).Get(ctx, "anything", metav1.GetOptions{})
		return err
	})
	for _, ons := range r.otherNamespaces {
		assertForbidden(t, "delete a Deployment in "+ons, func() error {
			return as.AppsV1().Deployments(ons).Delete(ctx, "anything", metav1.DeleteOptions{})
		})
	}
	assertForbidden(t, "create a GitRepo", func() error {
		_, err := asDyn.Resource(gitRepos).Namespace(r.namespace).Create(ctx, testfixture.Object(gitRepos, r.namespace, "sa-made", fleetLabel, "x"), metav1.CreateOptions{})
		return err
	})
	name := "admin-made-" + r.serviceAccount
	if _, err := dyn.Resource(gitRepos).Namespace(r.namespace).Create(ctx, testfixture.Object(gitRepos, r.namespace, name, fleetLabel, "x"), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	assertForbidden(t, "update a GitRepo", func() error {
		obj, err := dyn.Resource(gitRepos).Namespace(r.namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		obj.SetLabels(map[string]string{fleetLabel: "y"})
		_, err = asDyn.Resource(gitRepos).Namespace(r.namespace).Update(ctx, obj, metav1.UpdateOptions{})
		return err
	})
}

// assertAllowed fails the test, and lets it go on, unless call, a request
// made as the ServiceAccount, succeeds.
func assertAllowed(t *testing.T, what string, call func() error) {
	t.Helper()
	if err := call(); err != nil {
		t.Errorf("%s as the ServiceAccount: %v", what, err)
	}
}

func assertForbidden(t *testing.T, what string, call func() error) {
	t.Helper()
	if err := call(); !apierrors.IsForbidden(err) {
		t.Errorf("%s as the ServiceAccount: want Forbidden, got %v", what, err)
	}
}

// serviceAccountGroups are the groups a ServiceAccount's token carries.
func serviceAccountGroups(namespace string) []string {
	return []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}
}

// helm runs bin/helm with its caches and settings in a temporary directory
// and the test cluster as its kubeconfig, and returns its standard output.
func helm(t *testing.T, args ...string) []byte {
	t.Helper()
	return helmIn(t, t.TempDir(), args...)
}

// helmIn is helm with its caches and settings in home, kept from one call to
// the next (the repositories added, for instance).
func helmIn(t *testing.T, home string, args ...string) []byte {
	t.Helper()
	return helmUnder(t.Context(), t, home, args...)
}

// helmUnder is helmIn under ctx: a cleanup, which runs once the test's own
// context has ended, passes another.
func helmUnder(ctx context.Context, t *testing.T, home string, args ...string) []byte {
	t.Helper()
	bin := filepath.Join(os.Getenv(cluster.BinDirEnv), "helm")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("helm: %v; build it with `make helm`, or run the e2e tests with `make test-e2e`", err)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(),
		"KUBECONFIG="+env.KubeconfigPath(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

// decodeObjects splits a multi-document YAML stream into objects, skipping
// empty documents.
func decodeObjects(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if len(obj) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
	require.NotEmpty(t, out, "no objects decoded")
	return out
}

func findObject(t *testing.T, objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			found = append(found, o)
		}
	}
	require.Len(t, found, 1, "objects of kind %s", kind)
	return found[0]
}

// warnings collects the API server's warnings, e.g. a Pod Security
// violation of a Deployment's pod template.
type warnings struct {
	mu    sync.Mutex
	texts []string
}

func (w *warnings) HandleWarningHeader(code int, _ string, text string) {
	if code != 299 || text == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.texts = append(w.texts, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.texts
	w.texts = nil
	return out
}

// applyObjects applies every object server-side, as shardkeeper-e2e with
// force and strict field validation, Namespaces first. Kinds whose CRDs the
// test cluster does not have (the ServiceMonitor) are skipped. Any warning
// of the API server fails the test.
func applyObjects(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	w := &warnings{}
	cfg := env.Config()
	cfg.WarningHandler = w
	client := dynamic.NewForConfigOrDie(cfg)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))

	ordered := slices.Clone(objs)
	sort.SliceStable(ordered, func(i, j int) bool {
		return ordered[i].GetKind() == "Namespace" && ordered[j].GetKind() != "Namespace"
	})
	for _, o := range ordered {
		gvk := o.GroupVersionKind()
		what := fmt.Sprintf("%s %s/%s", gvk.Kind, o.GetNamespace(), o.GetName())
		if gvk.Kind == "ServiceMonitor" {
			t.Logf("skipping %s: the test cluster has no Prometheus Operator CRDs", what)
			continue
		}
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		require.NoError(t, err, what)
		var ri dynamic.ResourceInterface = client.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			require.NotEmpty(t, o.GetNamespace(), "%s: a namespaced object must name its namespace", what)
			ri = client.Resource(m.Resource).Namespace(o.GetNamespace())
		} else {
			require.Empty(t, o.GetNamespace(), "%s: a cluster-scoped object has no namespace", what)
		}
		data, err := o.MarshalJSON()
		require.NoError(t, err)
		_, err = ri.Patch(ctx, o.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{
			FieldManager: chartFieldManager, Force: ptr.To(true), FieldValidation: "Strict",
		})
		if err != nil {
			t.Errorf("apply %s: %v", what, err)
			continue
		}
		for _, text := range w.take() {
			t.Errorf("apply %s: warning: %s", what, text)
		}
	}
}

// ensureNamespace creates a namespace that enforces the restricted Pod
// Security Standard, unless it exists.
func ensureNamespace(t *testing.T, name string) {
	t.Helper()
	_, err := kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: name,
		Labels: map[string]string{
			"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest",
		},
	}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func daemonContainer(t *testing.T, dep *unstructured.Unstructured) corev1.Container {
	t.Helper()
	containers, _, err := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	require.NoError(t, err)
	require.Len(t, containers, 1)
	var c corev1.Container
	m, ok := containers[0].(map[string]any)
	require.True(t, ok, "a container is an object")
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(m, &c))
	return c
}

// checkDaemonDeployment checks what the daemon's Deployment must carry.
func checkDaemonDeployment(t *testing.T, dep *unstructured.Unstructured) {
	t.Helper()
	c := daemonContainer(t, dep)
	var podNS *corev1.EnvVar
	for i := range c.Env {
		if c.Env[i].Name == "POD_NAMESPACE" {
			podNS = &c.Env[i]
		}
	}
	if assert.NotNil(t, podNS, "POD_NAMESPACE") && assert.NotNil(t, podNS.ValueFrom) && assert.NotNil(t, podNS.ValueFrom.FieldRef) {
		assert.Equal(t, "metadata.namespace", podNS.ValueFrom.FieldRef.FieldPath)
	}
	if assert.NotNil(t, c.LivenessProbe) && assert.NotNil(t, c.LivenessProbe.HTTPGet) {
		assert.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path)
	}
	if assert.NotNil(t, c.ReadinessProbe) && assert.NotNil(t, c.ReadinessProbe.HTTPGet) {
		assert.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path)
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	assert.Equal(t, int32(8081), ports["probes"])
	assert.Contains(t, c.Args, "--health-probe-bind-address=:8081")
	if _, ok := ports["metrics"]; ok {
		assert.Equal(t, int32(8080), ports["metrics"])
		assert.Contains(t, c.Args, "--metrics-bind-address=:8080")
	} else {
		assert.Contains(t, c.Args, "--metrics-bind-address=0")
	}
	if sc := c.SecurityContext; assert.NotNil(t, sc) {
		assert.Equal(t, ptr.To(false), sc.AllowPrivilegeEscalation)
		assert.Equal(t, ptr.To(true), sc.ReadOnlyRootFilesystem)
		assert.Equal(t, ptr.To(true), sc.RunAsNonRoot)
		if assert.NotNil(t, sc.Capabilities) {
			assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)
		}
	}
}

// waitAvailable waits until every replica of the Deployment is available:
// its pods were admitted under the namespace's Pod Security Standard.
func waitAvailable(t *testing.T, namespace, name string) {
	t.Helper()
	eventually(t, 2*time.Minute, "Deployment "+namespace+"/"+name+" available", func() error {
		d, err := kube.AppsV1().Deployments(namespace).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		want := ptr.Deref(d.Spec.Replicas, 1)
		if d.Status.ObservedGeneration < d.Generation || d.Status.AvailableReplicas < want {
			for _, c := range d.Status.Conditions {
				if c.Type == "ReplicaFailure" && c.Status == corev1.ConditionTrue {
					return fmt.Errorf("%d/%d available: %s", d.Status.AvailableReplicas, want, c.Message)
				}
			}
			return fmt.Errorf("%d/%d available", d.Status.AvailableReplicas, want)
		}
		return nil
	})
}

// impersonatingKubeconfig writes a copy of the admin kubeconfig that
// impersonates user and groups, for a process that takes --kubeconfig.
func impersonatingKubeconfig(t *testing.T, user string, groups ...string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(env.KubeconfigPath())
	require.NoError(t, err)
	for _, auth := range cfg.AuthInfos {
		auth.Impersonate = user
		auth.ImpersonateGroups = groups
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}
