package render

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
	"github.com/shardkeeper/shardkeeper/pkg/source"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

func sources(t *testing.T, presets ...string) map[string]source.Source {
	t.Helper()
	set, err := source.Build(source.Options{Presets: presets, FleetNamespace: "cattle-fleet-system", FluxNamespace: "flux-system"})
	require.NoError(t, err)
	out := map[string]source.Source{}
	for _, s := range set.Sources {
		out[s.Name] = s
	}
	return out
}

func TestRenderFleetController(t *testing.T) {
	src := sources(t, "fleet")["fleet-controller"]
	live := testfixture.FleetController("cattle-fleet-system")
	d, err := Render(src, live, shardconfig.Shard{ID: "shard1"})
	require.NoError(t, err)

	assert.Equal(t, "fleet-controller-shard-shard1", d.Name)
	assert.Equal(t, "cattle-fleet-system", d.Namespace)
	assert.Equal(t, ManagedByValue, d.Labels[ManagedByLabel])
	assert.Equal(t, "shard1", d.Labels[ShardLabel])
	assert.NotContains(t, d.Labels, "helm.sh/chart")
	assert.NotContains(t, d.Annotations, "meta.helm.sh/release-name")
	assert.Equal(t, map[string]string{controllerLabel: "fleet-controller", ShardLabel: "shard1"}, d.Spec.Selector.MatchLabels)

	pod := d.Spec.Template
	assert.Equal(t, "shard1", pod.Labels[source.FleetShardIDLabel])
	assert.NotContains(t, pod.Labels, source.FleetShardDefaultLabel)
	for k, v := range d.Spec.Selector.MatchLabels {
		assert.Equal(t, v, pod.Labels[k], "selector must match the pod template")
	}
	require.Len(t, pod.Spec.Containers, 1, "cleanup and agent-management containers stay with the unsharded pod")
	assert.Equal(t, "fleet-controller", pod.Spec.Containers[0].Name)
	assert.Equal(t, []string{"fleetcontroller"}, pod.Spec.Containers[0].Command)
	assert.Equal(t, []string{"--shard-id=shard1"}, pod.Spec.Containers[0].Args)

	// The live source is not modified.
	assert.Len(t, live.Spec.Template.Spec.Containers, 3)
	assert.Equal(t, "true", live.Spec.Template.Labels[source.FleetShardDefaultLabel])
}

func TestRenderGitjobPlacement(t *testing.T) {
	src := sources(t, "fleet")["gitjob"]
	live := testfixture.Gitjob("cattle-fleet-system")
	live.Spec.Template.Spec.NodeSelector = map[string]string{"kubernetes.io/os": "linux", "pool": "default"}
	shard := shardconfig.Shard{
		ID:           "eu",
		Replicas:     ptr.To[int32](3),
		NodeSelector: map[string]string{"pool": "eu"},
		Tolerations:  []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "eu", Effect: corev1.TaintEffectNoSchedule}},
		Resources:    &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}},
	}
	d, err := Render(src, live, shard)
	require.NoError(t, err)
	assert.Equal(t, int32(3), *d.Spec.Replicas)
	pod := d.Spec.Template.Spec
	assert.Equal(t, map[string]string{"kubernetes.io/os": "linux", "pool": "eu"}, pod.NodeSelector)
	assert.Equal(t, append(testfixture.Gitjob("x").Spec.Template.Spec.Tolerations, shard.Tolerations...), pod.Tolerations,
		"the shard's tolerations are added to the source's")
	c := pod.Containers[0]
	assert.Equal(t, "1Gi", c.Resources.Limits.Memory().String())
	assert.Equal(t, []string{"gitjob", "--gitjob-image", testfixture.Image, "--shard-id=eu", `--shard-node-selector={"pool":"eu"}`}, c.Args)

	// Rendering twice gives the same hash; another setting another hash.
	again, err := Render(src, live, shard)
	require.NoError(t, err)
	assert.Equal(t, d.Annotations[SpecHashAnnotation], again.Annotations[SpecHashAnnotation])
	shard.Replicas = ptr.To[int32](2)
	other, err := Render(src, live, shard)
	require.NoError(t, err)
	assert.NotEqual(t, d.Annotations[SpecHashAnnotation], other.Annotations[SpecHashAnnotation])
}

func TestRenderFlux(t *testing.T) {
	src := sources(t, "flux")["helm-controller"]
	live := testfixture.HelmController("flux-system", true)
	assert.True(t, HasArg(src, live, src.RequiredArg))
	assert.False(t, HasArg(src, testfixture.HelmController("flux-system", false), src.RequiredArg))

	d, err := Render(src, live, shardconfig.Shard{ID: "s1"})
	require.NoError(t, err)
	args := d.Spec.Template.Spec.Containers[0].Args
	assert.Contains(t, args, "--watch-label-selector=sharding.fluxcd.io/key=s1")
	assert.NotContains(t, args, "--watch-label-selector=!sharding.fluxcd.io/key")
	// As Flux's sharding guide and Flux Operator name and label a shard.
	assert.Equal(t, "helm-controller-s1", d.Name)
	assert.Equal(t, map[string]string{"app": "helm-controller-s1"}, d.Spec.Selector.MatchLabels)
	assert.Equal(t, "helm-controller-s1", d.Spec.Template.Labels["app"])
	assert.Equal(t, "s1", d.Spec.Template.Labels[ShardLabel])
	assert.NotContains(t, d.Spec.Template.Labels, controllerLabel,
		"pods without the controller label: an earlier copy's selector (controller and shard) must not select them")
	for what, a := range map[string]map[string]string{"Deployment": d.Annotations, "pod": d.Spec.Template.Annotations} {
		assert.Equal(t, "shard", a["sharding.fluxcd.io/role"], what)
	}
	id, ok := DeploymentShard(src, d)
	assert.True(t, ok)
	assert.Equal(t, "s1", id)
}

func TestRenderFluxSourceController(t *testing.T) {
	src := sources(t, "flux")["source-controller"]
	live := testfixture.SourceController("flux-system", true)
	d, err := Render(src, live, shardconfig.Shard{ID: "s1"})
	require.NoError(t, err)
	assert.Equal(t, "source-controller-s1", d.Name)
	args := d.Spec.Template.Spec.Containers[0].Args
	assert.Equal(t, "--storage-adv-addr=source-controller-s1.$(RUNTIME_NAMESPACE).svc.cluster.local.", args[len(args)-1],
		"the shard advertises its own Service, last, as Flux Operator renders it")
	assert.Len(t, slices.DeleteFunc(slices.Clone(args), func(a string) bool { return !strings.HasPrefix(a, "--storage-adv-addr") }), 1)

	// Another cluster domain is kept, and so is a port.
	live.Spec.Template.Spec.Containers[0].Args = append(live.Spec.Template.Spec.Containers[0].Args,
		"--storage-adv-addr", "source-controller.$(RUNTIME_NAMESPACE).svc.corp.example.:8080")
	d, err = Render(src, live, shardconfig.Shard{ID: "s1"})
	require.NoError(t, err)
	assert.Contains(t, d.Spec.Template.Spec.Containers[0].Args, "--storage-adv-addr=source-controller-s1.$(RUNTIME_NAMESPACE).svc.corp.example.:8080")

	svc, err := RenderService(src, testfixture.SourceControllerService("flux-system"), shardconfig.Shard{ID: "s1"})
	require.NoError(t, err)
	assert.Equal(t, "source-controller-s1", svc.Name)
	assert.Equal(t, map[string]string{"app": "source-controller-s1"}, svc.Spec.Selector)
	assert.Equal(t, "shard", svc.Annotations["sharding.fluxcd.io/role"])
	assert.Equal(t, testfixture.SourceControllerService("flux-system").Spec.Ports, svc.Spec.Ports)
}

func TestRenderRefusesASharedClaim(t *testing.T) {
	src := sources(t, "flux")["source-controller"]
	live := testfixture.SourceController("flux-system", true)
	for i, v := range live.Spec.Template.Spec.Volumes {
		if v.Name == "data" {
			live.Spec.Template.Spec.Volumes[i].VolumeSource = corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "source-controller"}}
		}
	}
	_, err := Render(src, live, shardconfig.Shard{ID: "s1"})
	require.ErrorContains(t, err, `keeps its storage on PersistentVolumeClaim source-controller (volume "data"), which a shard must not share`)
	// A custom source is not refused: its storage is its own business.
	_, err = Render(source.Source{Namespace: "flux-system", Name: "source-controller", Container: "manager"}, live, shardconfig.Shard{ID: "s1"})
	assert.NoError(t, err)
}

func TestLegacyDeploymentShard(t *testing.T) {
	src := sources(t, "flux")["helm-controller"]
	legacy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "flux-system", Name: "helm-controller-shard-1",
		Labels: map[string]string{ManagedByLabel: ManagedByValue, ShardLabel: "1", controllerLabel: "helm-controller"}}}
	id, ok := LegacyDeploymentShard(src, legacy)
	assert.True(t, ok)
	assert.Equal(t, "1", id)
	_, ok = DeploymentShard(src, legacy)
	assert.False(t, ok, "by its labels, an earlier copy of shard 1, not the current copy of shard shard-1")

	current := legacy.DeepCopy()
	current.Labels[ShardLabel] = "shard-1"
	_, ok = LegacyDeploymentShard(src, current)
	assert.False(t, ok)
	id, ok = DeploymentShard(src, current)
	assert.True(t, ok)
	assert.Equal(t, "shard-1", id)

	_, ok = LegacyDeploymentShard(sources(t, "flux")["kustomize-controller"], legacy)
	assert.False(t, ok)
}

func TestRenderErrors(t *testing.T) {
	src := sources(t, "fleet")["helmops"]
	_, err := Render(src, nil, shardconfig.Shard{ID: "a"})
	require.ErrorContains(t, err, "not found")

	live := testfixture.HelmOpsController("ns")
	live.Spec.Template.Spec.Containers[0].Name = "renamed"
	_, err = Render(src, live, shardconfig.Shard{ID: "a"})
	assert.ErrorContains(t, err, `no container "helmops"`)
}

func TestSetFlag(t *testing.T) {
	tests := []struct {
		args []string
		arg  string
		want []string
	}{
		{nil, "--shard-id=a", []string{"--shard-id=a"}},
		{[]string{"x", "--shard-id=old", "y"}, "--shard-id=a", []string{"x", "y", "--shard-id=a"}},
		{[]string{"x", "--shard-id", "old", "y"}, "--shard-id=a", []string{"x", "y", "--shard-id=a"}},
		{[]string{"--shard-id", "--other"}, "--shard-id=a", []string{"--other", "--shard-id=a"}},
		{[]string{"--shard-idx=1"}, "--shard-id=a", []string{"--shard-idx=1", "--shard-id=a"}},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, setFlag(tt.args, tt.arg))
	}
}

func TestDeploymentUpToDate(t *testing.T) {
	src := sources(t, "fleet")["fleet-controller"]
	d, err := Render(src, testfixture.FleetController("ns"), shardconfig.Shard{ID: "a"})
	require.NoError(t, err)

	existing := d.DeepCopy()
	// What the API server adds does not count as drift.
	existing.Spec.Template.Spec.Containers[0].TerminationMessagePath = "/dev/termination-log"
	existing.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	existing.Labels["extra"] = "x"
	assert.True(t, deploymentUpToDate(d, existing))

	scaled := existing.DeepCopy()
	scaled.Spec.Replicas = ptr.To[int32](5)
	assert.False(t, deploymentUpToDate(d, scaled), "a hand edit of replicas is drift")

	edited := existing.DeepCopy()
	edited.Spec.Template.Spec.Containers[0].Image = "evil:latest"
	assert.False(t, deploymentUpToDate(d, edited), "a hand edit of the image is drift")

	stale := existing.DeepCopy()
	stale.Annotations[SpecHashAnnotation] = "old"
	assert.False(t, deploymentUpToDate(d, stale))

	unlabelled := existing.DeepCopy()
	delete(unlabelled.Labels, ShardLabel)
	assert.False(t, deploymentUpToDate(d, unlabelled))

	assert.False(t, SelectorChanged(d, existing))
	handed := existing.DeepCopy()
	handed.Spec.Selector.MatchLabels = map[string]string{"app": "fleet-controller"}
	assert.True(t, SelectorChanged(d, handed))
}

// FuzzRender renders every shard that the parser accepts against Fleet's
// and Flux's sources: a valid shard always renders, into a valid Deployment
// whose selector is its own and matches its pods.
func FuzzRender(f *testing.F) {
	for _, seed := range []string{
		"a", "- id: b\n  replicas: 0\n  nodeSelector: {pool: x}\n",
		"- id: c\n  tolerations: [{operator: Exists}]\n  resources: {limits: {cpu: 2}}\n",
	} {
		f.Add(seed)
	}
	srcs := map[string]source.Source{}
	for _, preset := range []string{"fleet", "flux"} {
		set, err := source.Build(source.Options{Presets: []string{preset}, FleetNamespace: "f", FluxNamespace: "x"})
		require.NoError(f, err)
		for _, s := range set.Sources {
			srcs[s.Name] = s
		}
	}
	lives := []*appsv1.Deployment{testfixture.FleetController("f"), testfixture.Gitjob("f"), testfixture.HelmOpsController("f"),
		testfixture.SourceController("x", true), testfixture.KustomizeController("x", true), testfixture.HelmController("x", true)}
	f.Fuzz(func(t *testing.T, value string) {
		shards, err := shardconfig.ParseShards(value)
		if err != nil {
			return
		}
		for _, shard := range shards {
			for _, live := range lives {
				src := srcs[live.Name]
				d, err := Render(src, live, shard)
				if err != nil {
					t.Fatalf("shard %q, source %s: %v", shard.ID, src.Name, err)
				}
				if errs := validation.IsDNS1123Subdomain(d.Name); len(errs) > 0 {
					t.Fatalf("name %q: %v", d.Name, errs)
				}
				sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
				if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
					t.Fatalf("selector %v does not match the pods %v", d.Spec.Selector, d.Spec.Template.Labels)
				}
				if d.Spec.Template.Labels[ShardLabel] != shard.ID || d.Labels[ManagedByLabel] != ManagedByValue {
					t.Fatalf("clone of %s for %q is not marked as the shard's own", src.Name, shard.ID)
				}
				c := d.Spec.Template.Spec.Containers
				if len(c) != 1 || c[0].Image != live.Spec.Template.Spec.Containers[0].Image {
					t.Fatalf("containers %v", c)
				}
			}
		}
	})
}

func TestRenderServiceAsFleetsChart(t *testing.T) {
	srcs := sources(t, "fleet")
	for i, name := range []string{"fleet-controller", "gitjob"} {
		live := testfixture.FleetMetricsServices("cattle-fleet-system")[i]
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
		return testfixture.Gitjob("cattle-fleet-system")
	}
	return testfixture.FleetController("cattle-fleet-system")
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
	require.ErrorContains(t, err, "not found")
	live.Spec.Selector = nil
	_, err = RenderService(src, live, shardconfig.Shard{ID: "a"})
	assert.ErrorContains(t, err, "no selector")
}

func TestServiceUpToDateAndUpdated(t *testing.T) {
	src := sources(t, "fleet")["gitjob"]
	live := testfixture.FleetMetricsServices("cattle-fleet-system")[1]
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
	rendered, err := Render(src, testfixture.FleetController("cattle-fleet-system"), shardconfig.Shard{ID: "s1"})
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

func TestShardOf(t *testing.T) {
	fleet := sources(t, "fleet")
	fc, gitjob := fleet["fleet-controller"], fleet["gitjob"]
	live := testfixture.FleetController("cattle-fleet-system")
	d, err := Render(fc, live, shardconfig.Shard{ID: "b-shard-c"})
	require.NoError(t, err)
	id, ok := DeploymentShard(fc, d)
	assert.True(t, ok)
	assert.Equal(t, "b-shard-c", id)
	_, ok = DeploymentShard(gitjob, d)
	assert.False(t, ok, "another source's copy")

	// A source whose name begins with another's: the labels say whose
	// copy it is, not the name.
	long := source.Source{Namespace: fc.Namespace, Name: "fleet-controller-shard-b", Args: []string{"--s={shard}"}}
	d, err = Render(long, live, shardconfig.Shard{ID: "c"})
	require.NoError(t, err)
	_, ok = DeploymentShard(fc, d)
	assert.False(t, ok, "%s is not fleet-controller's copy for shard b-shard-c", d.Name)
	id, ok = DeploymentShard(long, d)
	assert.True(t, ok)
	assert.Equal(t, "c", id)

	// Handed over, not yet updated: known by its name.
	handed := live.DeepCopy()
	handed.Name = "fleet-controller-shard-a"
	handed.Labels[ManagedByLabel] = ManagedByValue
	id, ok = DeploymentShard(fc, handed)
	assert.True(t, ok)
	assert.Equal(t, "a", id)
	delete(handed.Labels, ManagedByLabel)
	_, ok = DeploymentShard(fc, handed)
	assert.False(t, ok, "not managed")

	// Labels that disagree with the name: a copy of a copy, not ours.
	d, err = Render(fc, live, shardconfig.Shard{ID: "a"})
	require.NoError(t, err)
	d.Name = "fleet-controller-shard-x"
	_, ok = DeploymentShard(fc, d)
	assert.False(t, ok)

	svcSrc := fleet["fleet-controller"]
	svc, err := RenderService(svcSrc, testfixture.FleetMetricsServices("cattle-fleet-system")[0], shardconfig.Shard{ID: "a"})
	require.NoError(t, err)
	id, ok = ServiceShard(svcSrc, svc)
	assert.True(t, ok)
	assert.Equal(t, "a", id)
	_, ok = ServiceShard(gitjob, svc)
	assert.False(t, ok)
	_, ok = ServiceShard(sources(t, "flux")["helm-controller"], svc)
	assert.False(t, ok, "a source without a metrics Service has no copies of one")
}

// A pflag command line takes a repeated flag's last value: a required
// argument followed by another value of its flag is not in effect.
func TestHasArgReadsTheEffectiveValue(t *testing.T) {
	src := sources(t, "flux")["kustomize-controller"]
	const required = "--watch-label-selector=!sharding.fluxcd.io/key"
	tests := []struct {
		name          string
		command, args []string
		want          bool
	}{
		{"required", nil, []string{"--log-level=info", required}, true},
		{"required, space form", nil, []string{"--watch-label-selector", "!sharding.fluxcd.io/key"}, true},
		{"required in the command", []string{"kustomize-controller", required}, []string{"--log-level=info"}, true},
		{"overridden after", nil, []string{required, "--watch-label-selector=team=x"}, false},
		{"overridden after, space form", nil, []string{required, "--watch-label-selector", "team=x"}, false},
		{"overridden in args after the command", []string{"kustomize-controller", required}, []string{"--watch-label-selector=team=x"}, false},
		{"overriding an earlier value", nil, []string{"--watch-label-selector=team=x", required}, true},
		{"absent", nil, []string{"--log-level=info"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live := testfixture.KustomizeController("flux-system", false)
			c := &live.Spec.Template.Spec.Containers[0]
			c.Command, c.Args = tt.command, tt.args
			assert.Equal(t, tt.want, HasArg(src, live, required))
		})
	}
}

// v0.1.0 cloned Flux's controllers other than helm-controller as a
// --source, "<controller>-shard-<id>" with shardkeeper's controller and
// shard labels, and their metrics Services "<service>-shard-<id>": the
// flux preset knows both as its earlier copies, which it renames.
func TestV010CopiesOfAFluxSourceAreLegacy(t *testing.T) {
	src := sources(t, "flux")["kustomize-controller"]
	live := testfixture.KustomizeController("flux-system", true)
	liveSvc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "flux-system", Name: "kustomize-controller-metrics"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "kustomize-controller"},
			Ports: []corev1.ServicePort{{Name: "http-prom", Port: 8080}}},
	}
	// v0.1.0 rendered a --source as this one, named "-shard-" and
	// selected by shardkeeper's labels (git show 8682fbc:pkg/render).
	v010 := source.Source{Namespace: "flux-system", Name: "kustomize-controller", Container: "manager",
		Args: []string{"--watch-label-selector=sharding.fluxcd.io/key={shard}"}, MetricsService: "kustomize-controller-metrics"}
	d, err := Render(v010, live, shardconfig.Shard{ID: "a"})
	require.NoError(t, err)
	svc, err := RenderService(v010, liveSvc, shardconfig.Shard{ID: "a"})
	require.NoError(t, err)
	require.Equal(t, "kustomize-controller-shard-a", d.Name)
	require.Equal(t, "kustomize-controller-metrics-shard-a", svc.Name)

	id, ok := LegacyDeploymentShard(src, d)
	assert.True(t, ok)
	assert.Equal(t, "a", id)
	_, ok = DeploymentShard(src, d)
	assert.False(t, ok, "not the current copy of shard shard-a")

	for _, s := range []source.Source{src, withService(src, "kustomize-controller-metrics")} {
		id, ok = LegacyServiceShard(s, svc)
		assert.True(t, ok, "with metrics Service %q", s.MetricsService)
		assert.Equal(t, "a", id)
		_, ok = ServiceShard(s, svc)
		assert.False(t, ok)
	}
	_, ok = LegacyServiceShard(sources(t, "flux")["helm-controller"], svc)
	assert.False(t, ok, "another controller's")
	_, ok = LegacyServiceShard(sources(t, "fleet")["gitjob"], svc)
	assert.False(t, ok, "Fleet's names never changed")

	// The current copy of shard "shard-a" has the earlier copy's name for
	// shard "a": its labels tell them apart.
	current, err := RenderService(withService(src, "kustomize-controller-metrics"), liveSvc, shardconfig.Shard{ID: "shard-a"})
	require.NoError(t, err)
	require.Equal(t, svc.Name, current.Name)
	_, ok = LegacyServiceShard(src, current)
	assert.False(t, ok)
	unmanaged := svc.DeepCopy()
	delete(unmanaged.Labels, ManagedByLabel)
	_, ok = LegacyServiceShard(src, unmanaged)
	assert.False(t, ok)
}

func withService(s source.Source, svc string) source.Source {
	s.MetricsService = svc
	return s
}
