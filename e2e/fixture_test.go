//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

// fleetChartDir is a chart that renders what Fleet's chart renders for its
// controllers (see its README.md), relative to this package.
const fleetChartDir = "testdata/fleet-chart"

// TestFixturesMatchFleetChart renders Fleet's chart and checks that the
// fixtures every other test uses as Fleet's live objects are exactly what
// the chart renders. With static shards, it then records what a shard of
// Fleet's own chart looks like: the shape that shardkeeper takes over.
func TestFixturesMatchFleetChart(t *testing.T) {
	const ns = "cattle-fleet-system"
	unsharded := []*appsv1.Deployment{testfixture.FleetController(ns), testfixture.Gitjob(ns), testfixture.HelmOpsController(ns)}
	services := testfixture.FleetMetricsServices(ns)

	t.Run("default values", func(t *testing.T) {
		deps, svcs := renderFleetChart(t, ns)
		assert.ElementsMatch(t, []string{"fleet-controller", "gitjob", "helmops"}, sortedKeys(deps))
		assert.ElementsMatch(t, []string{"monitoring-fleet-controller", "gitjob", "monitoring-gitjob"}, sortedKeys(svcs))
		for _, want := range unsharded {
			checkDeployment(t, want, deps[want.Name])
		}
		for _, want := range services {
			checkService(t, want, svcs[want.Name])
		}
		// The gitjob Service (webhooks) is not a fixture: shardkeeper has
		// no use for it.
		if s := svcs["gitjob"]; s != nil {
			assert.Equal(t, map[string]string{"app": "gitjob"}, s.Spec.Selector)
		}
	})

	t.Run("static shards", func(t *testing.T) {
		values := filepath.Join(t.TempDir(), "shards.yaml")
		require.NoError(t, os.WriteFile(values, []byte(
			"shards:\n- id: shard0\n  nodeSelector:\n    pool: zero\n- id: shard1\n"), 0o644))
		deps, svcs := renderFleetChart(t, ns, "-f", values)
		assert.ElementsMatch(t, []string{
			"fleet-controller", "gitjob", "helmops",
			"fleet-controller-shard-shard0", "gitjob-shard-shard0", "helmops-shard-shard0",
			"fleet-controller-shard-shard1", "gitjob-shard-shard1", "helmops-shard-shard1",
		}, sortedKeys(deps))
		assert.ElementsMatch(t, []string{
			"gitjob", "monitoring-fleet-controller", "monitoring-gitjob",
			"monitoring-fleet-controller-shard-shard0", "monitoring-gitjob-shard-shard0",
			"monitoring-fleet-controller-shard-shard1", "monitoring-gitjob-shard-shard1",
		}, sortedKeys(svcs))

		// Static shards leave the unsharded objects as they were.
		for _, want := range unsharded {
			checkDeployment(t, want, deps[want.Name])
		}
		for _, want := range services {
			checkService(t, want, svcs[want.Name])
		}

		for _, shard := range []struct {
			id           string
			nodeSelector map[string]string
		}{{"shard0", map[string]string{"pool": "zero"}}, {"shard1", nil}} {
			for _, src := range unsharded {
				want := upstreamShard(t, src, shard.id, shard.nodeSelector)
				checkDeployment(t, want, deps[want.Name])
				if got := deps[want.Name]; got != nil {
					// Spelled out, as this is what shardkeeper hands over from.
					assert.Equal(t, map[string]string{"app": src.Name}, got.Spec.Selector.MatchLabels,
						"%s shares its selector with the unsharded %s", got.Name, src.Name)
					assert.Equal(t, shard.id, got.Spec.Template.Labels["fleet.cattle.io/shard-id"], got.Name)
					assert.NotContains(t, got.Spec.Template.Labels, "fleet.cattle.io/shard-default", got.Name)
					assert.Equal(t, src.Spec.Template.Spec.Tolerations, got.Spec.Template.Spec.Tolerations,
						"%s: a shard has no tolerations of its own", got.Name)
				}
			}
			for _, src := range services {
				want := src.DeepCopy()
				want.Name = src.Name + "-shard-" + shard.id
				want.Spec.Selector = map[string]string{"app": src.Labels["app"], "fleet.cattle.io/shard-id": shard.id}
				checkService(t, want, svcs[want.Name])
			}
		}
		if g := deps["gitjob-shard-shard0"]; g != nil {
			c := g.Spec.Template.Spec.Containers[0]
			assert.Equal(t, []string{"gitjob", "--gitjob-image", testfixture.Image, "--shard-id", "shard0", "--shard-node-selector", `{"pool":"zero"}`}, c.Args)
			assert.Equal(t, map[string]string{"kubernetes.io/os": "linux", "pool": "zero"}, g.Spec.Template.Spec.NodeSelector)
		}
		if f := deps["fleet-controller-shard-shard1"]; f != nil {
			require.Len(t, f.Spec.Template.Spec.Containers, 1, "cleanup and agent management run on the unsharded pod only")
			assert.Equal(t, []string{"--shard-id", "shard1"}, f.Spec.Template.Spec.Containers[0].Args)
		}
	})
}

// upstreamShard is the Deployment Fleet's chart renders for a static shard
// of the unsharded src: the same Deployment and selector under the name
// <src>-shard-<id>, with the pod label fleet.cattle.io/shard-id: <id> and
// no shard-default label, only the controller container, which gets
// `--shard-id <id>` (and gitjob `--shard-node-selector <JSON>`), and the
// shard's node selector added to the chart's.
func upstreamShard(t *testing.T, src *appsv1.Deployment, id string, nodeSelector map[string]string) *appsv1.Deployment {
	t.Helper()
	d := src.DeepCopy()
	d.Name = src.Name + "-shard-" + id
	pod := &d.Spec.Template
	pod.Labels["fleet.cattle.io/shard-id"] = id
	delete(pod.Labels, "fleet.cattle.io/shard-default")
	c := pod.Spec.Containers[0]
	c.Args = append(c.Args, "--shard-id", id)
	if src.Name == "gitjob" && len(nodeSelector) > 0 {
		js, err := json.Marshal(nodeSelector)
		require.NoError(t, err)
		c.Args = append(c.Args, "--shard-node-selector", string(js))
	}
	pod.Spec.Containers = []corev1.Container{c}
	maps.Copy(pod.Spec.NodeSelector, nodeSelector)
	return d
}

// renderFleetChart runs `helm template` on Fleet's chart and returns its
// Deployments and Services by name; any other kind fails the test.
func renderFleetChart(t *testing.T, ns string, args ...string) (map[string]*appsv1.Deployment, map[string]*corev1.Service) {
	t.Helper()
	objs := decodeObjects(t, helm(t, append([]string{"template", testfixture.FleetRelease, fleetChartDir, "--namespace", ns}, args...)...))
	deps := map[string]*appsv1.Deployment{}
	svcs := map[string]*corev1.Service{}
	for _, o := range objs {
		switch o.GetKind() {
		case "Deployment":
			d := &appsv1.Deployment{}
			decodeStrict(t, o, d)
			require.NotContains(t, deps, d.Name, "Deployment rendered twice")
			deps[d.Name] = d
		case "Service":
			s := &corev1.Service{}
			decodeStrict(t, o, s)
			require.NotContains(t, svcs, s.Name, "Service rendered twice")
			svcs[s.Name] = s
		default:
			t.Errorf("unexpected %s %s in Fleet's chart", o.GetKind(), o.GetName())
		}
	}
	return deps, svcs
}

// decodeStrict converts o into the typed into, failing on any field the
// type does not know (a misspelled field in the chart would otherwise be
// dropped silently).
func decodeStrict(t *testing.T, o *unstructured.Unstructured, into any) {
	t.Helper()
	b, err := o.MarshalJSON()
	require.NoError(t, err)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(into), "%s %s", o.GetKind(), o.GetName())
}

// checkDeployment checks that got, as `helm template` renders it, is the
// fixture want (see checkRendered).
func checkDeployment(t *testing.T, want, got *appsv1.Deployment) {
	t.Helper()
	if assert.NotNil(t, got, "Deployment %s is not rendered", want.Name) {
		checkRendered(t, want.ObjectMeta, got.ObjectMeta)
		assert.Equal(t, want.Spec, got.Spec, "Deployment %s: spec", want.Name)
	}
}

// checkService checks that got, as `helm template` renders it, is the
// fixture want (see checkRendered).
func checkService(t *testing.T, want, got *corev1.Service) {
	t.Helper()
	if assert.NotNil(t, got, "Service %s is not rendered", want.Name) {
		checkRendered(t, want.ObjectMeta, got.ObjectMeta)
		assert.Equal(t, want.Spec, got.Spec, "Service %s: spec", want.Name)
	}
}

// checkRendered compares the metadata of a fixture with that of the object
// `helm template` renders: the same name and labels, and no annotations.
// Helm adds its own managed-by label and release annotations only when it
// installs a chart; the fixture carries them as an installed release does,
// so they are checked on the fixture and left out of the comparison.
func checkRendered(t *testing.T, want, got metav1.ObjectMeta) {
	t.Helper()
	assert.Equal(t, want.Name, got.Name)
	assert.Equal(t, testfixture.HelmManagedByValue, want.Labels[testfixture.HelmManagedByLabel], "%s: Helm's label", want.Name)
	assert.Equal(t, map[string]string{
		testfixture.HelmReleaseNameAnnotation:      testfixture.FleetRelease,
		testfixture.HelmReleaseNamespaceAnnotation: want.Namespace,
	}, want.Annotations, "%s: Helm's annotations", want.Name)
	assert.Equal(t, withoutKeys(want.Labels, testfixture.HelmManagedByLabel), withoutKeys(got.Labels), "%s: labels", want.Name)
	assert.Empty(t, got.Annotations, "%s: annotations", want.Name)
	assert.Empty(t, got.Namespace, "%s: the chart sets no namespace; Helm does at install", want.Name)
}

// withoutKeys returns labels without the given keys, nil when none is left.
func withoutKeys(labels map[string]string, keys ...string) map[string]string {
	out := map[string]string{}
	for k, v := range labels {
		if !slices.Contains(keys, k) {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
