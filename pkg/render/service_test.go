package render

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/shardkeeper/shardkeeper/e2e/fixture"
	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
	"github.com/shardkeeper/shardkeeper/pkg/source"
)

func TestRenderServiceAsFleetsChart(t *testing.T) {
	srcs := sources(t, "fleet")
	for i, name := range []string{"fleet-controller", "gitjob"} {
		live := fixture.FleetMetricsServices("cattle-fleet-system")[i]
		svc, err := RenderService(srcs[name], live, shardconfig.Shard{ID: "s1"})
		require.NoError(t, err)
		// charts/fleet/templates/service.yaml and service_gitjob.yaml, for a shard.
		assert.Equal(t, "monitoring-"+name+"-shard-s1", svc.Name)
		assert.Equal(t, map[string]string{"app": name, source.FleetShardIDLabel: "s1"}, svc.Spec.Selector)
		assert.Equal(t, live.Spec.Ports, svc.Spec.Ports)
		assert.Equal(t, corev1.ServiceTypeClusterIP, svc.Spec.Type)
		assert.Equal(t, name, svc.Labels["app"])
		assert.Equal(t, ManagedByValue, svc.Labels[ManagedByLabel])
		assert.NotContains(t, svc.Annotations, "meta.helm.sh/release-name")
		assert.Equal(t, "cattle-fleet-system/monitoring-"+name, svc.Annotations[sourceAnnotation])

		// It selects the shard's pods, and not the unsharded ones.
		d, err := Render(srcs[name], deploymentOf(name), shardconfig.Shard{ID: "s1"})
		require.NoError(t, err)
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		assert.True(t, sel.Matches(labels.Set(d.Spec.Template.Labels)))
		assert.False(t, sel.Matches(labels.Set(deploymentOf(name).Spec.Template.Labels)))
		assert.False(t, labels.SelectorFromSet(live.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)),
			"the unsharded Service must not select the shard's pods")
	}
}

func deploymentOf(name string) *appsv1.Deployment {
	if name == "gitjob" {
		return fixture.Gitjob("cattle-fleet-system")
	}
	return fixture.FleetController("cattle-fleet-system")
}

func TestRenderServiceOfACustomSource(t *testing.T) {
	src := source.Source{Namespace: "apps", Name: "ctrl", MetricsService: "ctrl-metrics"}
	live := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "ctrl-metrics", Namespace: "apps", Labels: map[string]string{"helm.sh/chart": "x"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "ctrl"},
			Ports: []corev1.ServicePort{{Name: "m", Port: 80, TargetPort: intstr.FromInt32(8080), NodePort: 30080}}},
	}
	svc, err := RenderService(src, live, shardconfig.Shard{ID: "a"})
	require.NoError(t, err)
	assert.Equal(t, "ctrl-metrics-shard-a", svc.Name)
	assert.Equal(t, map[string]string{"app": "ctrl", controllerLabel: "ctrl", ShardLabel: "a"}, svc.Spec.Selector,
		"pods without a shard label of their own are told apart by shardkeeper's")
	assert.Zero(t, svc.Spec.Ports[0].NodePort, "a node port belongs to one Service")
	assert.NotContains(t, svc.Labels, "helm.sh/chart")

	_, err = RenderService(src, nil, shardconfig.Shard{ID: "a"})
	assert.ErrorContains(t, err, "not found")
	live.Spec.Selector = nil
	_, err = RenderService(src, live, shardconfig.Shard{ID: "a"})
	assert.ErrorContains(t, err, "no selector")
}

func TestServiceUpToDateAndUpdated(t *testing.T) {
	src := sources(t, "fleet")["gitjob"]
	live := fixture.FleetMetricsServices("cattle-fleet-system")[1]
	rendered, err := RenderService(src, live, shardconfig.Shard{ID: "s1"})
	require.NoError(t, err)
	existing := rendered.DeepCopy()
	existing.Spec.ClusterIP, existing.Spec.ClusterIPs = "10.0.0.9", []string{"10.0.0.9"}
	existing.Spec.SessionAffinity = corev1.ServiceAffinityNone
	assert.True(t, ServiceUpToDate(rendered, existing), "what the API server allocates or defaults is no change")

	existing.Spec.Selector = map[string]string{"app": "gitjob"}
	assert.False(t, ServiceUpToDate(rendered, existing), "a hand edit of the selector")
	upd := UpdatedService(rendered, existing)
	assert.Equal(t, rendered.Spec.Selector, upd.Spec.Selector)
	assert.Equal(t, "10.0.0.9", upd.Spec.ClusterIP, "immutable, kept")
}

func TestKeepSelector(t *testing.T) {
	src := sources(t, "fleet")["fleet-controller"]
	rendered, err := Render(src, fixture.FleetController("cattle-fleet-system"), shardconfig.Shard{ID: "s1"})
	require.NoError(t, err)
	// Fleet's chart gives its shard Deployments the selector app: fleet-controller.
	existing := rendered.DeepCopy()
	existing.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "fleet-controller"}}
	require.True(t, SelectorChanged(rendered, existing))
	kept, ok := KeepSelector(rendered, existing)
	require.True(t, ok)
	assert.Equal(t, existing.Spec.Selector, kept.Spec.Selector)
	assert.NotEqual(t, rendered.Annotations[SpecHashAnnotation], kept.Annotations[SpecHashAnnotation], "the hash covers the selector")
	again, _ := KeepSelector(rendered, existing)
	assert.Equal(t, kept.Annotations[SpecHashAnnotation], again.Annotations[SpecHashAnnotation], "stable")

	existing.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}
	_, ok = KeepSelector(rendered, existing)
	assert.False(t, ok, "a selector that misses the rendered pods forces a replace")
}
