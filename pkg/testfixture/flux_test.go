package testfixture_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

// exclusionArg is the argument Flux's sharding guide appends to the main
// controllers (fluxcd/website content/en/flux/installation/configuration/
// sharding.md).
const exclusionArg = "--watch-label-selector=!sharding.fluxcd.io/key"

// fluxNS is the namespace `flux install` installs Flux in by default.
const fluxNS = "flux-system"

// fluxFixtures are the Flux controller fixtures, by name, in fluxNS.
func fluxFixtures(shardAware bool) map[string]*appsv1.Deployment {
	return map[string]*appsv1.Deployment{
		"source-controller":    testfixture.SourceController(fluxNS, shardAware),
		"kustomize-controller": testfixture.KustomizeController(fluxNS, shardAware),
		"helm-controller":      testfixture.HelmController(fluxNS, shardAware),
	}
}

func TestFluxCRDsAreTheServedKinds(t *testing.T) {
	// The kinds and versions Flux v2.9.5's controllers serve.
	want := map[string]string{
		"helmreleases.helm.toolkit.fluxcd.io":        "v2",
		"kustomizations.kustomize.toolkit.fluxcd.io": "v1",
		"gitrepositories.source.toolkit.fluxcd.io":   "v1",
		"ocirepositories.source.toolkit.fluxcd.io":   "v1",
		"helmrepositories.source.toolkit.fluxcd.io":  "v1",
		"helmcharts.source.toolkit.fluxcd.io":        "v1",
		"buckets.source.toolkit.fluxcd.io":           "v1",
		"externalartifacts.source.toolkit.fluxcd.io": "v1",
	}
	crds, err := testfixture.FluxCRDs()
	require.NoError(t, err)
	got := map[string]string{}
	for _, crd := range crds {
		assert.Equal(t, "apiextensions.k8s.io/v1", crd.GetAPIVersion())
		assert.Equal(t, "CustomResourceDefinition", crd.GetKind())
		plural, _, err := unstructured.NestedString(crd.Object, "spec", "names", "plural")
		require.NoError(t, err)
		group, _, err := unstructured.NestedString(crd.Object, "spec", "group")
		require.NoError(t, err)
		assert.Equal(t, plural+"."+group, crd.GetName(), "a CRD's name is plural.group")
		got[crd.GetName()] = storedServedVersion(t, crd)
	}
	assert.Len(t, crds, len(want), "one CRD per embedded file")
	assert.Equal(t, want, got)
}

// storedServedVersion is the one version of crd that is both served and
// stored, or "" when there is none.
func storedServedVersion(t *testing.T, crd *unstructured.Unstructured) string {
	t.Helper()
	versions, _, err := unstructured.NestedSlice(crd.Object, "spec", "versions")
	require.NoError(t, err)
	for _, v := range versions {
		version, ok := v.(map[string]any)
		require.True(t, ok, "%s: a version is an object", crd.GetName())
		if version["served"] == true && version["storage"] == true {
			name, _ := version["name"].(string)
			return name
		}
	}
	return ""
}

func TestFluxFixturesSelectTheirPods(t *testing.T) {
	for _, shardAware := range []bool{false, true} {
		for name, d := range fluxFixtures(shardAware) {
			assert.Equal(t, name, d.Name)
			assert.Equal(t, map[string]string{"app": name}, d.Spec.Selector.MatchLabels, name)
			selector := labels.SelectorFromSet(d.Spec.Selector.MatchLabels)
			assert.True(t, selector.Matches(labels.Set(d.Spec.Template.Labels)), "%s selects its own pods", name)
			assert.Equal(t, name, d.Spec.Template.Spec.ServiceAccountName)
		}
	}
	svc := testfixture.SourceControllerService(fluxNS)
	pods := testfixture.SourceController(fluxNS, true).Spec.Template
	assert.True(t, labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pods.Labels)), "the Service selects source-controller's pods")
	require.Len(t, svc.Spec.Ports, 1)
	ports := pods.Spec.Containers[0].Ports
	assert.True(t, slices.ContainsFunc(ports, func(p corev1.ContainerPort) bool { return p.Name == svc.Spec.Ports[0].TargetPort.StrVal }),
		"the Service's target port %q is a port of the manager", svc.Spec.Ports[0].TargetPort.StrVal)
}

func TestFluxServiceAccountsRunTheFixtures(t *testing.T) {
	var names []string
	for _, sa := range testfixture.FluxServiceAccounts(fluxNS) {
		assert.Equal(t, fluxNS, sa.Namespace)
		names = append(names, sa.Name)
	}
	for name, d := range fluxFixtures(false) {
		assert.Contains(t, names, d.Spec.Template.Spec.ServiceAccountName, name)
	}
	assert.Len(t, names, 3)
}

func TestFluxFixturesMountTheirVolumes(t *testing.T) {
	for name, d := range fluxFixtures(false) {
		var volumes []string
		for _, v := range d.Spec.Template.Spec.Volumes {
			require.NotNil(t, v.EmptyDir, "%s: volume %s is an emptyDir", name, v.Name)
			volumes = append(volumes, v.Name)
		}
		var mounted []string
		for _, m := range d.Spec.Template.Spec.Containers[0].VolumeMounts {
			mounted = append(mounted, m.Name)
		}
		assert.Equal(t, volumes, mounted, "%s mounts each of its volumes", name)
	}
}

func TestFluxShardAwareFixturesExcludeShardedObjectsOnce(t *testing.T) {
	plain := fluxFixtures(false)
	for name, d := range fluxFixtures(true) {
		args := d.Spec.Template.Spec.Containers[0].Args
		plainArgs := plain[name].Spec.Template.Spec.Containers[0].Args
		assert.Equal(t, 1, countOf(args, exclusionArg), "%s: the exclusion argument once", name)
		assert.Zero(t, countOf(plainArgs, exclusionArg), "%s: no exclusion argument unless shard aware", name)
		// The guide's patch appends it: the rest is `flux install`'s.
		assert.Equal(t, append(slices.Clone(plainArgs), exclusionArg), args, name)
	}
}

func TestSourceControllerAdvertisesItsService(t *testing.T) {
	args := testfixture.SourceController(fluxNS, false).Spec.Template.Spec.Containers[0].Args
	assert.Equal(t, 1, countOf(args, "--storage-adv-addr=source-controller.$(RUNTIME_NAMESPACE).svc.cluster.local."))
	assert.Equal(t, 1, countOf(args, "--storage-path=/data"))
}

// countOf is how many times arg is in args.
func countOf(args []string, arg string) int {
	n := 0
	for _, a := range args {
		if a == arg {
			n++
		}
	}
	return n
}
