package plan

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/shardkeeper/shardkeeper/pkg/render"
	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
	"github.com/shardkeeper/shardkeeper/pkg/source"
	"github.com/shardkeeper/shardkeeper/pkg/status"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

// v010KustomizeArgs is the command line that v0.1.0's README gave for
// Flux, with the metrics Service of its chart's example.
var v010KustomizeArgs = source.Options{
	Presets:         []string{"flux"},
	FluxNamespace:   "flux-system",
	Custom:          []string{"flux-system/kustomize-controller:manager=--watch-label-selector=sharding.fluxcd.io/key={shard}"},
	RequiredArgs:    []string{"flux-system/kustomize-controller=--watch-label-selector=!sharding.fluxcd.io/key"},
	MetricsServices: []string{"flux-system/kustomize-controller=kustomize-controller-metrics"},
}

// kustomizeMetrics is a metrics Service of kustomize-controller, as the
// v0.1.0 chart's example named it (Flux installs none).
func kustomizeMetrics() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "flux-system", Name: "kustomize-controller-metrics", UID: "uid-kustomize-controller-metrics"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: map[string]string{"app": "kustomize-controller"},
			Ports: []corev1.ServicePort{{Name: "http-prom", Port: 8080, TargetPort: intstr.FromString("http-prom")}}},
	}
}

// v010KustomizeCopy is shard id's copy of kustomize-controller, and of its
// metrics Service, as v0.1.0 rendered the --source above:
// "kustomize-controller-shard-<id>", labelled and selected by
// shardkeeper's controller and shard labels (git show
// 8682fbc:pkg/render/render.go, service.go).
func v010KustomizeCopy(t *testing.T, live *appsv1.Deployment, liveSvc *corev1.Service, id string, available bool) (*appsv1.Deployment, *corev1.Service) {
	t.Helper()
	old := source.Source{Namespace: "flux-system", Name: "kustomize-controller", Container: "manager",
		Args: []string{"--watch-label-selector=sharding.fluxcd.io/key={shard}"}, MetricsService: "kustomize-controller-metrics"}
	d, err := render.Render(old, live, shardconfig.Shard{ID: id})
	require.NoError(t, err)
	require.Equal(t, "kustomize-controller-shard-"+id, d.Name)
	d.UID = types.UID("uid-" + d.Name)
	if available {
		d.Status = appsv1.DeploymentStatus{Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1, ReadyReplicas: 1}
	}
	svc, err := render.RenderService(old, liveSvc, shardconfig.Shard{ID: id})
	require.NoError(t, err)
	require.Equal(t, "kustomize-controller-metrics-shard-"+id, svc.Name)
	svc.UID = types.UID("uid-" + svc.Name)
	return d, svc
}

// v010World is a Flux world with kustomize-controller, as the daemon
// builds it from the v0.1.0 command line, and for each of ids the copies
// that v0.1.0 made of it.
func v010World(t *testing.T, opts source.Options, available bool, ids ...string) *world {
	t.Helper()
	set, err := source.Build(opts)
	require.NoError(t, err)
	live := testfixture.KustomizeController("flux-system", true)
	live.UID, live.ResourceVersion = "uid-kustomize-controller", "1"
	liveSvc := kustomizeMetrics()
	w := &world{t: t, deps: map[string]*appsv1.Deployment{"flux-system/kustomize-controller": live},
		svcs:   map[string]*corev1.Service{"flux-system/kustomize-controller-metrics": liveSvc},
		mapped: testfixture.MappedTable{Objects: map[string]map[string][]string{}}}
	for _, s := range set.Sources {
		if s.Name == "kustomize-controller" {
			st := SourceState{Source: s, Live: live}
			if s.MetricsService != "" {
				st.LiveService = liveSvc
			}
			w.sources = append(w.sources, st)
		}
	}
	require.Len(t, w.sources, 1)
	for _, id := range ids {
		d, svc := v010KustomizeCopy(t, live, liveSvc, id, available)
		w.deps["flux-system/"+d.Name], w.svcs["flux-system/"+svc.Name] = d, svc
	}
	return w
}

// After an upgrade from v0.1.0 with its Flux command line, the copy that
// v0.1.0 made of kustomize-controller as a --source serves the shard until
// the preset's copy is Available, and then goes with its metrics Service.
func TestV010KustomizeCopyIsRenamedWithoutAGap(t *testing.T) {
	w := v010World(t, v010KustomizeArgs, true, "a")
	old := w.deps["flux-system/kustomize-controller-shard-a"]

	p, err := w.decide("a", "")
	require.NoError(t, err)
	assert.Equal(t, map[ActionKind][]string{Create: {"kustomize-controller-a", "kustomize-controller-metrics-a"}}, kinds(p))
	assert.False(t, p.NewShards["a"], "the shard is in force through its v0.1.0 copy")
	assert.Equal(t, status.StateActive, p.Shards[0].State, "the v0.1.0 copy serves the shard")
	assert.Empty(t, p.Shards[0].Message)
	w.converge(p)

	// Not Available yet: the v0.1.0 copy and its Service stay.
	p, err = w.decide("a", "")
	require.NoError(t, err)
	assert.Empty(t, p.Actions)
	assert.Equal(t, status.StateActive, p.Shards[0].State)

	// Available: the v0.1.0 copy and its Service go, and only then.
	cur := w.deps["flux-system/kustomize-controller-a"]
	cur.Status = appsv1.DeploymentStatus{ObservedGeneration: cur.Generation, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1, ReadyReplicas: 1}
	p, err = w.decide("a", "")
	require.NoError(t, err)
	assert.Equal(t, map[ActionKind][]string{Delete: {"kustomize-controller-metrics-shard-a", "kustomize-controller-shard-a"}}, kinds(p))
	for _, a := range p.Actions {
		assert.True(t, a.Renamed, a.Ref())
	}
	assert.Empty(t, p.Removals, "a rename is no removal of the shard")
	assert.Equal(t, watchSelector(old), watchSelector(cur), "one selector, so one Lease: only one of the two acts at a time")
	w.converge(p)

	p, err = w.decide("a", "")
	require.NoError(t, err)
	assert.Empty(t, p.Actions)
}

// watchSelector returns d's --watch-label-selector arguments.
func watchSelector(d *appsv1.Deployment) []string {
	var out []string
	for _, a := range d.Spec.Template.Spec.Containers[0].Args {
		if len(a) > len("--watch-label-selector") && a[:len("--watch-label-selector")] == "--watch-label-selector" {
			out = append(out, a)
		}
	}
	return out
}

// A shard removed from the list before the upgrade completed has its
// v0.1.0 copies deleted with it.
func TestV010KustomizeCopyOfARemovedShardIsDeleted(t *testing.T) {
	w := v010World(t, v010KustomizeArgs, false, "gone")
	p, err := w.decide("a", "")
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"kustomize-controller-shard-gone", "kustomize-controller-metrics-shard-gone"}, kinds(p)[Delete])
	require.Len(t, p.Removals, 1)
	assert.Equal(t, "gone", p.Removals[0].Shard)
}

// A v0.1.0 metrics Service copy is known by its labels and its source
// annotation, not by today's options: once its option is dropped from the
// command line, it still goes with its Deployment.
func TestV010ServiceCopyWithoutItsOption(t *testing.T) {
	opts := v010KustomizeArgs
	opts.MetricsServices = nil
	w := v010World(t, opts, true, "a")
	p, err := w.decide("a", "")
	require.NoError(t, err)
	assert.Equal(t, map[ActionKind][]string{Create: {"kustomize-controller-a"}}, kinds(p))
	w.converge(p)
	cur := w.deps["flux-system/kustomize-controller-a"]
	cur.Status = appsv1.DeploymentStatus{ObservedGeneration: cur.Generation, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1, ReadyReplicas: 1}
	p, err = w.decide("a", "")
	require.NoError(t, err)
	assert.Equal(t, map[ActionKind][]string{Delete: {"kustomize-controller-metrics-shard-a", "kustomize-controller-shard-a"}}, kinds(p))

	// A Service left over from a rename whose Deployment is gone goes too.
	w.converge(p)
	_, svc := v010KustomizeCopy(t, w.sources[0].Live, kustomizeMetrics(), "a", true)
	w.svcs["flux-system/"+svc.Name] = svc
	p, err = w.decide("a", "")
	require.NoError(t, err)
	assert.Equal(t, map[ActionKind][]string{Delete: {"kustomize-controller-metrics-shard-a"}}, kinds(p))
}

// Shard "a"'s v0.1.0 metrics Service kustomize-controller-metrics-shard-a
// has the current name of shard "shard-a"'s: it is not taken over while
// it is shard a's, only deleted as such.
func TestV010ServiceNameOfAnotherShardIsNotTaken(t *testing.T) {
	w := v010World(t, v010KustomizeArgs, true, "a")
	delete(w.deps, "flux-system/kustomize-controller-shard-a") // renamed already, but for its Service
	p, err := w.decide("a,shard-a", "")
	require.NoError(t, err)
	var onLegacy []string
	for _, a := range p.Actions {
		if a.Object().GetName() == "kustomize-controller-metrics-shard-a" {
			onLegacy = append(onLegacy, string(a.Kind)+" "+a.Ref()+" of shard "+a.Shard)
		}
	}
	assert.Equal(t, []string{"delete Service flux-system/kustomize-controller-metrics-shard-a of shard a"}, onLegacy)
	assert.Equal(t, status.StateConflict, byID(p)["shard-a"].State)
	assert.Contains(t, byID(p)["shard-a"].Message, "Service flux-system/kustomize-controller-metrics-shard-a (the earlier copy of another shard)")

	// Once it is gone, shard-a gets its Service.
	w.converge(p)
	p, err = w.decide("a,shard-a", "")
	require.NoError(t, err)
	assert.Equal(t, map[ActionKind][]string{Create: {"kustomize-controller-metrics-shard-a"}}, kinds(p))
}
