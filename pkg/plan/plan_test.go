package plan

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/shardkeeper/shardkeeper/pkg/placement"
	"github.com/shardkeeper/shardkeeper/pkg/render"
	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
	"github.com/shardkeeper/shardkeeper/pkg/source"
	"github.com/shardkeeper/shardkeeper/pkg/status"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

const ns = "cattle-fleet-system"

type world struct {
	t       testing.TB
	sources []SourceState
	deps    map[string]*appsv1.Deployment
	svcs    map[string]*corev1.Service
	mapped  testfixture.MappedTable
	renders *render.Cache
	// live is what the API server showed beyond the caches
	// (Input.LiveMapped).
	live map[string]string
}

func newWorld(tb testing.TB) *world {
	tb.Helper()
	set, err := source.Build(source.Options{Presets: []string{"fleet"}, FleetNamespace: ns})
	require.NoError(tb, err)
	w := &world{t: tb, deps: map[string]*appsv1.Deployment{}, svcs: map[string]*corev1.Service{}, mapped: testfixture.MappedTable{Objects: map[string]map[string][]string{}}}
	lives := map[string]*appsv1.Deployment{"fleet-controller": testfixture.FleetController(ns), "gitjob": testfixture.Gitjob(ns)} // no helmops: an older Fleet
	for _, s := range set.Sources {
		live := lives[s.Name]
		if live != nil {
			// As read from the API server, so that the render cache
			// keys on them.
			live.UID, live.ResourceVersion = types.UID("uid-"+live.Name), "1"
		}
		w.sources = append(w.sources, SourceState{Source: s, Live: live})
		if live != nil {
			w.deps[ns+"/"+live.Name] = live
		}
	}
	return w
}

func (w *world) config(shards string, force string) shardconfig.Config {
	cfg, err := shardconfig.Parse(map[string]string{shardconfig.ShardsKey: shards}, nil, map[string]string{shardconfig.ForceDeleteAnnotation: force})
	require.NoError(w.t, err)
	return cfg
}

// decide decides with a render cache kept across the world's decisions,
// as the daemon does.
func (w *world) decide(shards, force string) (Plan, error) {
	return w.decideConfig(w.config(shards, force))
}

// decideConfig decides cfg as decide does.
func (w *world) decideConfig(cfg shardconfig.Config) (Plan, error) {
	if w.renders == nil {
		w.renders = render.NewCache()
	}
	defer w.renders.Sweep()
	return Decide(Input{Config: cfg, Sources: w.sources, Deployments: w.deps, Services: w.svcs, Mapped: w.mapped,
		ConfigMap: types.NamespacedName{Namespace: ns, Name: "shardkeeper"}, Renders: w.renders, LiveMapped: w.live})
}

// converge applies the plan's actions to the world, as the API server would.
func (w *world) converge(p Plan) {
	for _, a := range p.Actions {
		switch {
		case a.Service != nil:
			storeWrite(w.svcs, a.Kind, a.Service)
		case a.Kind == Replace:
			delete(w.deps, a.Existing.Namespace+"/"+a.Existing.Name)
		default:
			storeWrite(w.deps, a.Kind, a.Deployment)
		}
	}
}

// storeWrite applies a create, update or delete of o to objs; a written
// object gets a UID, as from the API server.
func storeWrite[T interface {
	metav1.Object
	DeepCopy() T
}](objs map[string]T, kind ActionKind, o T) {
	key := o.GetNamespace() + "/" + o.GetName()
	switch kind {
	case Create, Update:
		stored := o.DeepCopy()
		stored.SetUID(types.UID("uid-" + stored.GetName()))
		if old, ok := objs[key]; ok {
			stored.SetGeneration(old.GetGeneration())
		}
		stored.SetGeneration(stored.GetGeneration() + 1)
		objs[key] = stored
	case Delete:
		delete(objs, key)
	}
}

func kinds(p Plan) map[ActionKind][]string {
	out := map[ActionKind][]string{}
	for _, a := range p.Actions {
		out[a.Kind] = append(out[a.Kind], a.Object().GetName())
	}
	for _, v := range out {
		sort.Strings(v)
	}
	return out
}

// conflictsIn returns the "Kind namespace/name" that a shard's Conflict
// message names, in the order it names them.
func conflictsIn(st status.ShardStatus) []string {
	if st.State != status.StateConflict {
		return nil
	}
	list, _, ok := strings.Cut(st.Message, " exists but is not managed by shardkeeper")
	if !ok {
		return nil
	}
	return strings.Split(list, ", ")
}

func TestCreateThenSteady(t *testing.T) {
	w := newWorld(t)
	p, err := w.decide("a,b", "")
	require.NoError(t, err)
	assert.Equal(t, map[ActionKind][]string{Create: {
		"fleet-controller-shard-a", "fleet-controller-shard-b", "gitjob-shard-a", "gitjob-shard-b",
	}}, kinds(p), "a missing source (helmops) is skipped")
	require.Len(t, p.Shards, 2)
	assert.Equal(t, status.StateActive, p.Shards[0].State)
	assert.Equal(t, 2, p.Shards[0].Desired)
	assert.Equal(t, map[string]bool{"a": true, "b": true}, p.NewShards)

	w.converge(p)
	p, err = w.decide("a,b", "")
	require.NoError(t, err)
	assert.Empty(t, p.Actions, "a converged world needs no write")
	assert.Empty(t, p.NewShards)
}

func TestSourceChangeRollsOut(t *testing.T) {
	w := newWorld(t)
	p, _ := w.decide("a", "")
	w.converge(p)
	w.sources[0].Live.Spec.Template.Spec.Containers[0].Image = "rancher/fleet:v2"
	w.sources[0].Live.ResourceVersion = "2"
	p, err := w.decide("a", "")
	require.NoError(t, err)
	assert.Equal(t, map[ActionKind][]string{Update: {"fleet-controller-shard-a"}}, kinds(p))
	assert.Equal(t, "rancher/fleet:v2", p.Actions[0].Deployment.Spec.Template.Spec.Containers[0].Image)
	assert.False(t, p.Actions[0].Restore, "a source change is a rollout, not a repair")
}

func TestHandEditsAreRestored(t *testing.T) {
	w := newWorld(t)
	p, _ := w.decide("a", "")
	w.converge(p)
	w.deps[ns+"/gitjob-shard-a"].Spec.Replicas = ptr.To[int32](5)
	w.deps[ns+"/gitjob-shard-a"].Generation++ // as the API server does on a change of the spec
	delete(w.deps, ns+"/fleet-controller-shard-a")
	p, err := w.decide("a", "")
	require.NoError(t, err)
	assert.Equal(t, map[ActionKind][]string{Create: {"fleet-controller-shard-a"}, Update: {"gitjob-shard-a"}}, kinds(p))
	for _, a := range p.Actions {
		assert.True(t, a.Restore, a.Deployment.Name)
	}
	assert.Empty(t, p.NewShards)
}

func TestRemovalGuard(t *testing.T) {
	w := newWorld(t)
	p, _ := w.decide("a,b", "")
	w.converge(p)
	w.mapped.Objects["b"] = map[string][]string{"gitrepos": {"team1/repo1", "team1/repo2"}, "helmops": {"team2/op"}}

	p, err := w.decide("a", "")
	require.NoError(t, err)
	assert.Empty(t, p.Actions, "a shard with mapped objects is kept")
	require.Len(t, p.Shards, 2)
	b := p.Shards[1]
	assert.Equal(t, status.StateBlocked, b.State)
	assert.Equal(t, map[string]int{"gitrepos": 2, "helmops": 1}, b.Mapped)
	assert.Contains(t, b.Message, "2 gitrepos, 1 helmops")
	assert.Contains(t, b.Message, "gitrepos team1/repo1")
	assert.Contains(t, b.Message, "kubectl -n cattle-fleet-system annotate configmap shardkeeper shardkeeper.io/force-delete=b")

	// Not synced: nothing is deleted, even with no object mapped.
	w.mapped.Objects = map[string]map[string][]string{}
	w.mapped.Unsynced = true
	p, err = w.decide("a", "*")
	require.NoError(t, err)
	assert.Empty(t, p.Actions)
	assert.Equal(t, status.StateWaiting, p.Shards[1].State)
	assert.False(t, p.ForceChanged, `"*" waits until it can act`)

	// Synced and empty: deleted.
	w.mapped.Unsynced = false
	p, err = w.decide("a", "")
	require.NoError(t, err)
	assert.Equal(t, map[ActionKind][]string{Delete: {"fleet-controller-shard-b", "gitjob-shard-b"}}, kinds(p))
	require.Len(t, p.Removals, 1)
	assert.False(t, p.Removals[0].Forced)
	assert.True(t, p.Removals[0].check, "deleted on the caches' word: the API server is asked first")
	assert.Equal(t, []string{"b"}, p.ToCheck())
	assert.Len(t, p.Shards, 1)
}

// An object the API server has on a removed shard, which the caches do not
// show yet, holds the removal; a force-delete entry does not wait for it.
func TestRemovalWaitsForTheAPIServer(t *testing.T) {
	w := newWorld(t)
	p, _ := w.decide("a,b,c", "")
	w.converge(p)
	w.live = map[string]string{"b": "gitrepos team/payments"}

	p, err := w.decide("a", "")

	require.NoError(t, err)
	assert.Equal(t, map[ActionKind][]string{Delete: {"fleet-controller-shard-c", "gitjob-shard-c"}}, kinds(p))
	assert.Equal(t, []string{"c"}, p.ToCheck())
	require.Len(t, p.Shards, 2)
	b := p.Shards[1]
	assert.Equal(t, status.StateWaiting, b.State)
	assert.Equal(t, "removal waits until the mapped-object caches show gitrepos team/payments, which the API server has mapped to shard b", b.Message)

	p, err = w.decide("a", "b")
	require.NoError(t, err)
	assert.Equal(t, map[ActionKind][]string{Delete: {"fleet-controller-shard-b", "fleet-controller-shard-c", "gitjob-shard-b", "gitjob-shard-c"}}, kinds(p))
	require.Len(t, p.Removals, 2)
	assert.False(t, p.Removals[0].check, "forced: nothing to ask")
	assert.Equal(t, []string{"c"}, p.ToCheck())
	assert.True(t, p.ForceChanged)

	// Being deleted already: nothing is written, so nothing is asked.
	for _, d := range w.deps {
		if strings.HasSuffix(d.Name, "-shard-c") {
			d.DeletionTimestamp = &metav1.Time{}
		}
	}
	w.live = nil
	p, err = w.decide("a,b", "")
	require.NoError(t, err)
	assert.Empty(t, p.Actions)
	assert.Empty(t, p.ToCheck())
}

func TestForce(t *testing.T) {
	w := newWorld(t)
	p, _ := w.decide("a,b,c", "")
	w.converge(p)
	w.mapped.Objects["b"] = map[string][]string{"gitrepos": {"x/y"}}
	w.mapped.Objects["c"] = map[string][]string{"gitrepos": {"x/z"}}

	p, err := w.decide("a", "b")
	require.NoError(t, err)
	assert.Equal(t, map[ActionKind][]string{Delete: {"fleet-controller-shard-b", "gitjob-shard-b"}}, kinds(p))
	require.Len(t, p.Removals, 1)
	assert.True(t, p.Removals[0].Forced)
	assert.Equal(t, map[string]int{"gitrepos": 1}, p.Removals[0].Mapped)
	assert.True(t, p.ForceChanged)
	assert.True(t, p.Force.Empty(), "a used force entry is removed")
	assert.Equal(t, status.StateBlocked, p.Shards[1].State, "c is not forced")

	w.converge(p)
	// "*" forces every pending removal and is consumed.
	p, err = w.decide("a", "*")
	require.NoError(t, err)
	assert.Equal(t, map[ActionKind][]string{Delete: {"fleet-controller-shard-c", "gitjob-shard-c"}}, kinds(p))
	assert.True(t, p.Force.Empty())

	// A force entry for a shard still listed waits.
	p, err = w.decide("a", "a")
	require.NoError(t, err)
	assert.Empty(t, p.Actions)
	assert.False(t, p.ForceChanged)
}

func TestForceUnknown(t *testing.T) {
	w := newWorld(t)
	_, err := w.decide("a", "nosuch")
	require.ErrorContains(t, err, `"nosuch"`)

	// A leftover of this process's own forced deletion is tidied instead.
	p, err := Decide(Input{Config: w.config("a", "gone"), Sources: w.sources, Deployments: w.deps, Mapped: w.mapped, ForceDeleted: map[string]bool{"gone": true}})
	require.NoError(t, err)
	assert.True(t, p.ForceChanged)
	assert.True(t, p.Force.Empty())
}

func TestConflictAndUnmanaged(t *testing.T) {
	w := newWorld(t)
	foreign := testfixture.Gitjob(ns)
	foreign.Name = "gitjob-shard-a"
	w.deps[ns+"/"+foreign.Name] = foreign
	// An unmanaged Deployment with a shard name whose shard is not listed.
	stray := testfixture.Gitjob(ns)
	stray.Name = "gitjob-shard-old"
	w.deps[ns+"/"+stray.Name] = stray

	p, err := w.decide("a", "")
	require.NoError(t, err)
	assert.Equal(t, map[ActionKind][]string{Create: {"fleet-controller-shard-a"}}, kinds(p))
	assert.Equal(t, status.StateConflict, p.Shards[0].State)
	assert.Equal(t, []string{"Deployment " + ns + "/gitjob-shard-a"}, conflictsIn(p.Shards[0]))
	assert.Len(t, p.Shards, 1, "an unmanaged Deployment is not a shard in force")
}

func TestHandOver(t *testing.T) {
	w := newWorld(t)
	// A shard Deployment from Fleet's static chart values, labelled for hand-over.
	old := testfixture.FleetController(ns)
	old.Name = "fleet-controller-shard-a"
	old.UID = "old"
	old.Labels[render.ManagedByLabel] = render.ManagedByValue
	w.deps[ns+"/"+old.Name] = old

	p, err := w.decide("b", "")
	require.NoError(t, err)
	assert.Contains(t, kinds(p)[Delete], "fleet-controller-shard-a", "a handed-over shard not listed is removed like any other")

	p, err = w.decide("a", "")
	require.NoError(t, err)
	assert.Empty(t, kinds(p)[Replace], "its shared selector selects the rendered pods: it is kept, so the Deployment is never missing")
	require.Contains(t, kinds(p)[Update], "fleet-controller-shard-a")
	for _, a := range p.Actions {
		if a.Deployment != nil && a.Deployment.Name == "fleet-controller-shard-a" {
			assert.Equal(t, old.Spec.Selector, a.Deployment.Spec.Selector)
			assert.Equal(t, "a", a.Deployment.Spec.Template.Labels[source.FleetShardIDLabel])
		}
	}
	w.converge(p)
	p, err = w.decide("a", "")
	require.NoError(t, err)
	assert.Empty(t, p.Actions, "the kept selector is stable: nothing to write once updated")

	// A selector that would not select the rendered pods cannot be kept.
	other := w.deps[ns+"/fleet-controller-shard-a"].DeepCopy()
	other.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "something-else"}}
	w.deps[ns+"/fleet-controller-shard-a"] = other
	p, err = w.decide("a", "")
	require.NoError(t, err)
	assert.Equal(t, []string{"fleet-controller-shard-a"}, kinds(p)[Replace])
}

// Two sources whose copies' names overlap: "a-shard-b-shard-c" is a-shard-b's
// copy for shard c, and would be a's for shard "b-shard-c". source.Build
// refuses such a pair, and the labels on the copies tell them apart anyway.
func TestClonesAreKnownByTheirLabels(t *testing.T) {
	w := newWorld(t)
	w.sources, w.deps = nil, map[string]*appsv1.Deployment{}
	for _, name := range []string{"a", "a-shard-b"} {
		live := testfixture.Gitjob(ns)
		live.Name, live.UID, live.ResourceVersion = name, types.UID("uid-"+name), "1"
		w.deps[ns+"/"+name] = live
		w.sources = append(w.sources, SourceState{Source: source.Source{Namespace: ns, Name: name, Args: []string{"--shard={shard}"}}, Live: live})
	}

	p, err := w.decide("c", "")
	require.NoError(t, err)
	assert.Equal(t, map[ActionKind][]string{Create: {"a-shard-b-shard-c", "a-shard-c"}}, kinds(p))
	w.converge(p)
	for range 3 {
		p, err = w.decide("c", "")
		require.NoError(t, err)
		assert.Empty(t, p.Actions, "a converged shard set writes nothing")
		assert.Empty(t, p.Removals)
		require.Len(t, p.Shards, 1)
		assert.Equal(t, "c", p.Shards[0].ID)
		w.converge(p)
	}
}

// A shard ID may have 40 characters, but Fleet's metrics Service copy
// "monitoring-fleet-controller-shard-<id>" must fit in 63: a longer ID
// refuses the whole list, naming the longest allowed, before anything is
// written.
func TestIDTooLongForADerivedName(t *testing.T) {
	w := newWorld(t).withMetricsServices()
	p, err := w.decide("b,"+strings.Repeat("a", 29), "")
	require.NoError(t, err)
	require.NotEmpty(t, p.Actions)
	for _, a := range p.Actions {
		if a.Service != nil {
			assert.Empty(t, validation.IsDNS1035Label(a.Service.Name), a.Ref())
		} else {
			assert.Empty(t, validation.IsDNS1123Subdomain(a.Deployment.Name), a.Ref())
		}
	}

	// Without the live Service too: it may be installed at any time.
	for _, w := range []*world{newWorld(t).withMetricsServices(), newWorld(t)} {
		_, err = w.decide("b,"+strings.Repeat("c", 30), "")
		require.EqualError(t, err, `shards[1]: shard ID "`+strings.Repeat("c", 30)+`" is 30 characters long, `+
			`at most 29 are allowed with the enabled sources (Service monitoring-fleet-controller-shard-<id> must fit in 63 characters)`)
	}

	// Flux's preset: image-automation-controller-<id> is a pod label value,
	// installed or not (it may be installed at any time).
	fw := fluxWorld(t, true)
	set, err := source.Build(source.Options{Presets: []string{"flux"}, FluxNamespace: "flux-system"})
	require.NoError(t, err)
	for _, s := range set.Sources {
		if s.Name != "helm-controller" {
			fw.sources = append(fw.sources, SourceState{Source: s})
		}
	}
	_, err = fw.decide(strings.Repeat("f", 35), "")
	require.NoError(t, err)
	_, err = fw.decide(strings.Repeat("f", 36), "")
	assert.ErrorContains(t, err, "at most 35 are allowed with the enabled sources (pod label app=image-automation-controller-<id> must fit in 63 characters)")
}

func TestUnknownAndNotShardAware(t *testing.T) {
	set, err := source.Build(source.Options{Presets: []string{"flux"}, FluxNamespace: "flux-system"})
	require.NoError(t, err)
	live := testfixture.HelmController("flux-system", false)
	var sources []SourceState
	for _, s := range set.Sources {
		if s.Name == "helm-controller" {
			sources = append(sources, SourceState{Source: s, Live: live})
		} else {
			sources = append(sources, SourceState{Source: s})
		}
	}
	in := Input{
		Config:      shardconfig.Config{Shards: []shardconfig.Shard{{ID: "a"}}},
		Sources:     sources,
		Deployments: map[string]*appsv1.Deployment{"flux-system/helm-controller": live},
		Mapped:      testfixture.MappedTable{Objects: map[string]map[string][]string{"a": {"helmreleases": {"x/1"}}, "typo": {"helmreleases": {"x/2", "x/3"}}}},
	}
	p, err := Decide(in)
	require.NoError(t, err)
	assert.Equal(t, []status.NotShardAware{{Source: "flux-system/helm-controller", Needs: "--watch-label-selector=!sharding.fluxcd.io/key"}}, p.NotShardAware)
	require.Len(t, p.Unknown, 1)
	assert.Equal(t, Unknown{Shard: "typo", Count: 2, Mapped: map[string]int{"helmreleases": 2}, Sample: []string{"helmreleases x/2", "helmreleases x/3"}}, p.Unknown[0])
}

func TestBeingDeletedIsNotRecreated(t *testing.T) {
	w := newWorld(t)
	p, _ := w.decide("a", "")
	w.converge(p)
	d := w.deps[ns+"/gitjob-shard-a"]
	d.DeletionTimestamp = &metav1.Time{}
	p, err := w.decide("a", "")
	require.NoError(t, err)
	assert.Empty(t, p.Actions)
}

func TestReady(t *testing.T) {
	d := testfixture.Gitjob(ns)
	assert.False(t, ready(d))
	d.Generation = 2
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, UpdatedReplicas: 1, AvailableReplicas: 1}
	assert.True(t, ready(d))
	d.Generation = 3
	assert.False(t, ready(d), "a spec not yet observed is not ready")
}

// withMetricsServices gives the world Fleet's monitoring-* Services.
func (w *world) withMetricsServices() *world {
	for _, svc := range testfixture.FleetMetricsServices(ns) {
		w.svcs[ns+"/"+svc.Name] = svc
	}
	for i := range w.sources {
		w.sources[i].LiveService = w.svcs[w.sources[i].Source.ServiceKey()]
	}
	return w
}

func (w *world) service(name string) *corev1.Service { return w.svcs[ns+"/"+name] }

func TestShardMetricsServices(t *testing.T) {
	w := newWorld(t).withMetricsServices()
	p, err := w.decide("a", "")
	require.NoError(t, err)
	assert.Equal(t, []string{"fleet-controller-shard-a", "gitjob-shard-a", "monitoring-fleet-controller-shard-a", "monitoring-gitjob-shard-a"}, kinds(p)[Create],
		"a Service for each source that has one, as Fleet's chart renders for a shard")
	w.converge(p)

	svc := w.service("monitoring-fleet-controller-shard-a")
	require.NotNil(t, svc)
	assert.Equal(t, map[string]string{"app": "fleet-controller", source.FleetShardIDLabel: "a"}, svc.Spec.Selector,
		"exactly the shard's pods, as Fleet's chart selects them")
	assert.Equal(t, testfixture.FleetMetricsServices(ns)[0].Spec.Ports, svc.Spec.Ports)
	assert.Equal(t, corev1.ServiceTypeClusterIP, svc.Spec.Type)
	assert.Equal(t, render.ManagedByValue, svc.Labels[render.ManagedByLabel])
	assert.Equal(t, "a", svc.Labels[render.ShardLabel])
	assert.Equal(t, "fleet-controller", svc.Labels["app"])
	assert.NotContains(t, svc.Annotations, "meta.helm.sh/release-name", "not part of Fleet's release")
	rendered := w.deps[ns+"/fleet-controller-shard-a"]
	assert.Equal(t, "a", rendered.Spec.Template.Labels[source.FleetShardIDLabel])
	assert.NotContains(t, rendered.Spec.Template.Labels, source.FleetShardDefaultLabel, "the unsharded Service must not select the shard's pods")

	p, err = w.decide("a", "")
	require.NoError(t, err)
	assert.Empty(t, p.Actions, "steady")

	// The source Service changes: every copy follows.
	src := w.service("monitoring-gitjob").DeepCopy()
	src.Spec.Ports[0].Port = 9090
	w.svcs[ns+"/monitoring-gitjob"] = src
	w.sources[1].LiveService = src
	p, err = w.decide("a", "")
	require.NoError(t, err)
	assert.Equal(t, []string{"monitoring-gitjob-shard-a"}, kinds(p)[Update])
	assert.False(t, p.Actions[0].Restore, "a source change is a rollout")
	w.converge(p)

	// Deleted by hand: restored.
	delete(w.svcs, ns+"/monitoring-gitjob-shard-a")
	p, err = w.decide("a", "")
	require.NoError(t, err)
	require.Equal(t, []string{"monitoring-gitjob-shard-a"}, kinds(p)[Create])
	assert.True(t, p.Actions[0].Restore)
	w.converge(p)

	// Edited by hand: restored.
	edited := w.service("monitoring-gitjob-shard-a").DeepCopy()
	edited.Spec.Selector = map[string]string{"app": "gitjob"}
	w.svcs[ns+"/monitoring-gitjob-shard-a"] = edited
	p, err = w.decide("a", "")
	require.NoError(t, err)
	require.Equal(t, []string{"monitoring-gitjob-shard-a"}, kinds(p)[Update])
	assert.True(t, p.Actions[0].Restore)
	w.converge(p)

	// Blocked: the Services stay with the Deployments.
	w.mapped.Objects["a"] = map[string][]string{"gitrepos": {"x/1"}}
	p, err = w.decide("b", "")
	require.NoError(t, err)
	assert.NotContains(t, kinds(p)[Delete], "monitoring-gitjob-shard-a")
	assert.Contains(t, kinds(p)[Create], "monitoring-gitjob-shard-b")

	// Removed: deleted with the shard, with preconditions from the cache.
	delete(w.mapped.Objects, "a")
	p, err = w.decide("b", "")
	require.NoError(t, err)
	assert.Equal(t, []string{"fleet-controller-shard-a", "gitjob-shard-a", "monitoring-fleet-controller-shard-a", "monitoring-gitjob-shard-a"}, kinds(p)[Delete])
}

func TestShardMetricsServiceConflictAndAdoption(t *testing.T) {
	w := newWorld(t).withMetricsServices()
	// As Fleet's chart renders a static shard's Service.
	static := testfixture.FleetMetricsServices(ns)[0].DeepCopy()
	static.Name = "monitoring-fleet-controller-shard-a"
	static.Spec.Selector = map[string]string{"app": "fleet-controller", source.FleetShardIDLabel: "a"}
	static.Spec.ClusterIP = "10.0.0.7"
	w.svcs[ns+"/"+static.Name] = static

	p, err := w.decide("a", "")
	require.NoError(t, err)
	assert.NotContains(t, kinds(p)[Create], static.Name)
	assert.NotContains(t, kinds(p)[Update], static.Name, "an unmanaged Service is never touched")
	assert.Equal(t, status.StateConflict, p.Shards[0].State)
	assert.Contains(t, p.Shards[0].Message, "Service "+ns+"/"+static.Name)
	assert.Contains(t, conflictsIn(p.Shards[0]), "Service "+ns+"/"+static.Name)

	// Handed over by its label: adopted in place, its cluster IP kept.
	static.Labels[render.ManagedByLabel] = render.ManagedByValue
	p, err = w.decide("a", "")
	require.NoError(t, err)
	assert.Equal(t, status.StateActive, p.Shards[0].State)
	for _, a := range p.Actions {
		if a.Service != nil && a.Service.Name == static.Name {
			assert.Equal(t, Update, a.Kind)
			upd := render.UpdatedService(a.Service, a.ExistingService)
			assert.Equal(t, "10.0.0.7", upd.Spec.ClusterIP)
			assert.Equal(t, "a", upd.Labels[render.ShardLabel])
		}
	}
}

func TestNoServiceWithoutSourceService(t *testing.T) {
	w := newWorld(t) // Fleet with metrics disabled: no monitoring-* Services
	p, err := w.decide("a", "")
	require.NoError(t, err)
	for _, a := range p.Actions {
		assert.Nil(t, a.Service, "no source Service, no shard Service")
	}
}

func fluxWorld(t *testing.T, shardAware bool) *world {
	t.Helper()
	set, err := source.Build(source.Options{Presets: []string{"flux"}, FluxNamespace: "flux-system"})
	require.NoError(t, err)
	live := testfixture.HelmController("flux-system", shardAware)
	w := &world{t: t, deps: map[string]*appsv1.Deployment{"flux-system/helm-controller": live},
		svcs:   map[string]*corev1.Service{},
		mapped: testfixture.MappedTable{Objects: map[string]map[string][]string{}}}
	for _, s := range set.Sources {
		if s.Name == "helm-controller" {
			w.sources = append(w.sources, SourceState{Source: s, Live: live})
		}
	}
	return w
}

func TestSourceNotShardAwareGetsNoNewCopy(t *testing.T) {
	w := fluxWorld(t, false)
	p, err := w.decide("a", "")
	require.NoError(t, err)
	assert.Empty(t, p.Actions, "a copy beside a main controller that watches everything would be a second controller on every object")
	require.Len(t, p.Shards, 1)
	assert.Equal(t, status.StatePending, p.Shards[0].State)
	assert.Contains(t, p.Shards[0].Message, "helm-controller-a not created")
	assert.Empty(t, p.Targets)
	require.Len(t, p.NotShardAware, 1)

	// Once the main controller has the selector, the copy is created.
	aware := testfixture.HelmController("flux-system", true)
	w.deps["flux-system/helm-controller"], w.sources[0].Live = aware, aware
	p, err = w.decide("a", "")
	require.NoError(t, err)
	assert.Equal(t, []string{"helm-controller-a"}, kinds(p)[Create])
	assert.Equal(t, status.StateActive, p.Shards[0].State)
	assert.Empty(t, p.NotShardAware)
	w.converge(p)

	// The selector is dropped again (an upgrade lost the patch): the copy
	// is left as it is, even though the source changed, and the warning
	// stands.
	lost := testfixture.HelmController("flux-system", false)
	lost.Spec.Template.Spec.Containers[0].Image = "example/helm-controller:next"
	w.deps["flux-system/helm-controller"], w.sources[0].Live = lost, lost
	p, err = w.decide("a", "")
	require.NoError(t, err)
	assert.Empty(t, p.Actions)
	assert.Len(t, p.NotShardAware, 1)
	assert.Equal(t, status.StateActive, p.Shards[0].State, "the copy exists: the shard is served")

	// A removed shard is still deleted.
	p, err = w.decide("[]", "")
	require.NoError(t, err)
	assert.Equal(t, []string{"helm-controller-a"}, kinds(p)[Delete])
}

// legacyHelmCopy is a copy of helm-controller as shardkeeper made it
// before it named copies the way Flux does: "helm-controller-shard-<id>",
// selected by shardkeeper's own labels.
func legacyHelmCopy(id string, available bool) *appsv1.Deployment {
	d := testfixture.HelmController("flux-system", true)
	d.Name = "helm-controller-shard-" + id
	d.UID = types.UID("uid-" + d.Name)
	d.Labels = map[string]string{render.ManagedByLabel: render.ManagedByValue, render.ShardLabel: id, "shardkeeper.io/controller": "helm-controller"}
	d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{render.ShardLabel: id, "shardkeeper.io/controller": "helm-controller"}}
	d.Spec.Template.Labels = d.Spec.Selector.MatchLabels
	c := &d.Spec.Template.Spec.Containers[0]
	c.Args = slices.DeleteFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--watch-label-selector=") })
	c.Args = append(c.Args, "--watch-label-selector=sharding.fluxcd.io/key="+id)
	if available {
		d.Status = appsv1.DeploymentStatus{Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1, ReadyReplicas: 1}
	}
	return d
}

// fluxWorldWithLegacy is a Flux world in which shard id has its copy
// under the earlier name.
func fluxWorldWithLegacy(t *testing.T, id string, available bool) (*world, *appsv1.Deployment) {
	t.Helper()
	w := fluxWorld(t, true)
	old := legacyHelmCopy(id, available)
	w.deps["flux-system/"+old.Name] = old
	return w, old
}

func TestLegacyCopyIsRenamedWithoutAGap(t *testing.T) {
	w, old := fluxWorldWithLegacy(t, "a", true)

	// The copy of the new name is created; the old one keeps the shard
	// served meanwhile.
	p, err := w.decide("a", "")
	require.NoError(t, err)
	assert.Equal(t, map[ActionKind][]string{Create: {"helm-controller-a"}}, kinds(p))
	assert.False(t, p.NewShards["a"], "the shard is in force through its old copy: nothing new to announce")
	assert.Equal(t, status.StateActive, p.Shards[0].State, "the old copy serves the shard")
	w.converge(p)

	// Not Available yet: the old copy stays.
	p, err = w.decide("a", "")
	require.NoError(t, err)
	assert.Empty(t, p.Actions)
	assert.Equal(t, status.StateActive, p.Shards[0].State)

	// Available: the old copy goes, and only then.
	cur := w.deps["flux-system/helm-controller-a"]
	cur.Status = appsv1.DeploymentStatus{ObservedGeneration: cur.Generation, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1, ReadyReplicas: 1}
	p, err = w.decide("a", "")
	require.NoError(t, err)
	require.Len(t, p.Actions, 1)
	assert.Equal(t, Delete, p.Actions[0].Kind)
	assert.True(t, p.Actions[0].Renamed)
	assert.Equal(t, "helm-controller-shard-a", p.Actions[0].Deployment.Name)
	assert.Empty(t, p.Removals, "a rename is no removal of the shard")

	// Both run the same selector, and so share one Lease.
	selector := func(d *appsv1.Deployment) []string {
		var out []string
		for _, a := range d.Spec.Template.Spec.Containers[0].Args {
			if strings.HasPrefix(a, "--watch-label-selector") || a == "--enable-leader-election" {
				out = append(out, a)
			}
		}
		return out
	}
	assert.Equal(t, selector(old), selector(cur))
	w.converge(p)
	p, err = w.decide("a", "")
	require.NoError(t, err)
	assert.Empty(t, p.Actions)
}

func TestLegacyCopyOfARemovedShardIsDeleted(t *testing.T) {
	w, _ := fluxWorldWithLegacy(t, "gone", false)
	p, err := w.decide("a", "")
	require.NoError(t, err)
	assert.Contains(t, kinds(p)[Delete], "helm-controller-shard-gone", "a removed shard's old copy is in force and goes with it")
	assert.Contains(t, kinds(p)[Create], "helm-controller-a")
}

func TestLegacyNameOfAnotherShardIsNotTaken(t *testing.T) {
	// Shard "1" has its old copy helm-controller-shard-1, which is the
	// current name of shard "shard-1"'s copy: neither is touched until
	// shard "1" has moved to its new name.
	w, _ := fluxWorldWithLegacy(t, "1", true)
	p, err := w.decide("1,shard-1", "")
	require.NoError(t, err)
	assert.Equal(t, map[ActionKind][]string{Create: {"helm-controller-1"}}, kinds(p))
	byID := map[string]status.ShardStatus{}
	for _, s := range p.Shards {
		byID[s.ID] = s
	}
	assert.Equal(t, status.StateConflict, byID["shard-1"].State)
	assert.Contains(t, byID["shard-1"].Message, "the earlier copy of another shard")
}

func TestJobPlacementMismatch(t *testing.T) {
	w := newWorld(t)
	in := func(shards string) Input {
		return Input{Config: w.config(shards, ""), Sources: w.sources, Deployments: w.deps}
	}
	gpu := "- id: gpu-pool\n  nodeSelector: {pool: gpu}\n  tolerations: [{key: dedicated, operator: Equal, value: gpu, effect: NoSchedule}]\n"
	msg := jobPlacementMismatch(in(gpu), in(gpu).Config.Shards[0])
	assert.Contains(t, msg, "gpu-pool")
	assert.Contains(t, msg, "dedicated=gpu:NoSchedule")
	assert.Contains(t, msg, ns+"/fleet-controller")
	assert.Contains(t, msg, "tolerations and nodeSelector")
	assert.NotContains(t, msg, "pool=gpu", "a key fleet-controller does not set reaches the Job through --shard-node-selector")

	// Fleet's chart values give fleet-controller the toleration: the Jobs have it.
	fc := w.deps[ns+"/fleet-controller"].DeepCopy()
	fc.Spec.Template.Spec.Tolerations = append(fc.Spec.Template.Spec.Tolerations,
		corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists})
	w.deps[ns+"/fleet-controller"] = fc
	assert.Empty(t, jobPlacementMismatch(in(gpu), in(gpu).Config.Shards[0]))

	// fleet-controller's node selector wins on the same key.
	fc.Spec.Template.Spec.NodeSelector["pool"] = "default"
	msg = jobPlacementMismatch(in(gpu), in(gpu).Config.Shards[0])
	assert.Contains(t, msg, "pool=gpu (fleet-controller's pool=default wins)")

	// The tolerations gitjob always gives its Jobs count too.
	linux := "- id: l\n  tolerations: [{key: cattle.io/os, operator: Equal, value: linux, effect: NoSchedule}]\n"
	assert.Empty(t, jobPlacementMismatch(in(linux), in(linux).Config.Shards[0]))

	// The mismatch is in the shard's status, and the shard is created anyway.
	fc.Spec.Template.Spec.NodeSelector["pool"] = "gpu"
	fc.Spec.Template.Spec.Tolerations = fc.Spec.Template.Spec.Tolerations[:1]
	p, err := w.decide(gpu, "")
	require.NoError(t, err)
	assert.Contains(t, p.Shards[0].JobPlacement, "dedicated=gpu:NoSchedule")
	assert.Contains(t, kinds(p)[Create], "gitjob-shard-gpu-pool")

	// Without a gitjob source there are no git Jobs to warn about.
	noGitjob := Input{Config: w.config(gpu, ""), Sources: w.sources[:1], Deployments: w.deps}
	assert.Empty(t, jobPlacementMismatch(noGitjob, noGitjob.Config.Shards[0]))
}

func TestActionRef(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: "d"}}
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: "s"}}
	assert.Equal(t, "Deployment n/d", Action{Deployment: d}.Ref())
	assert.Equal(t, "Service n/s", Action{Service: s}.Ref())
	assert.Equal(t, types.UID(""), Action{Service: s}.Object().GetUID())
}

func TestBundlesBlockAndFollow(t *testing.T) {
	w := newWorld(t)
	p, _ := w.decide("a", "")
	w.converge(p)
	// The GitRepo moved to b by hand; its Bundle and BundleDeployment still
	// point at a until it is applied again.
	w.mapped.Objects["a"] = map[string][]string{"bundles": {"fleet-default/repo-x"}, "bundledeployments": {"cluster-ns/repo-x"}}
	p, err := w.decide("b", "")
	require.NoError(t, err)
	assert.NotContains(t, kinds(p)[Delete], "gitjob-shard-a")
	require.Equal(t, status.StateBlocked, p.Shards[0].State)
	assert.Contains(t, p.Shards[0].Message, "1 bundledeployments, 1 bundles")
	assert.Contains(t, p.Shards[0].Message, "forceSyncGeneration")

	// With placement, a drain waits for them, but they are not pinned.
	cfg, err := shardconfig.Parse(map[string]string{shardconfig.ShardsKey: "b", "placement": ""}, nil, nil)
	require.NoError(t, err)
	p, err = Decide(Input{Config: cfg, Sources: w.sources, Deployments: w.deps, Services: w.svcs, Mapped: derivedMapped{w.mapped},
		ConfigMap: types.NamespacedName{Namespace: ns, Name: "shardkeeper"}})
	require.NoError(t, err)
	var a status.ShardStatus
	for _, s := range p.Shards {
		if s.ID == "a" {
			a = s
		}
	}
	assert.Equal(t, status.StateDraining, a.State, "Bundles follow their GitRepo; they pin nothing")
	assert.NotContains(t, kinds(p)[Delete], "gitjob-shard-a")
}

// derivedMapped marks the Bundles and BundleDeployments as derived, as the
// mapped-object cache does for the Fleet preset.
type derivedMapped struct{ testfixture.MappedTable }

func (d derivedMapped) MappedTo(shard string) []placement.Object {
	out := d.MappedTable.MappedTo(shard)
	for i := range out {
		out[i].Derived = out[i].Kind == "bundles" || out[i].Kind == "bundledeployments"
	}
	return out
}

// BenchmarkDecide is a reconcile brought by a status change of a shard
// Deployment: a converged world of 100 shards decided again, with the
// render cache the daemon keeps and without one.
func BenchmarkDecide(b *testing.B) {
	ids := make([]string, 100)
	for i := range ids {
		ids[i] = fmt.Sprintf("s%03d", i)
	}
	shards := strings.Join(ids, ",")
	for _, cached := range []bool{false, true} {
		b.Run(fmt.Sprintf("cache=%v", cached), func(b *testing.B) {
			w := newWorld(b)
			p, err := w.decide(shards, "")
			require.NoError(b, err)
			w.converge(p)
			in := Input{Config: w.config(shards, ""), Sources: w.sources, Deployments: w.deps, Services: w.svcs, Mapped: w.mapped}
			if cached {
				in.Renders = render.NewCache()
			}
			b.ReportAllocs()
			for b.Loop() {
				p, err := Decide(in)
				in.Renders.Sweep()
				if err != nil || len(p.Actions) > 0 {
					b.Fatalf("a converged world: %v, %d actions", err, len(p.Actions))
				}
			}
		})
	}
}

// A rollout that has created every new replica still has old ones running
// until they are scaled down; kubectl rollout status waits for that too.
func TestReadyWaitsForOldReplicas(t *testing.T) {
	d := testfixture.Gitjob(ns)
	d.Generation = 2
	// One new replica up and available, one old one still running.
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 1, AvailableReplicas: 2}
	assert.False(t, ready(d), "old replicas are still running")

	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 0}
	assert.False(t, ready(d), "the new replica is not available yet")

	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1}
	assert.True(t, ready(d))
}

// A kind that exists but cannot be listed keeps its objects unknown: a
// removed shard that seems empty is kept, and the status says why.
func TestRemovalWaitsForAKindThatCannotBeListed(t *testing.T) {
	w := newWorld(t)
	p, _ := w.decide("a,b", "")
	w.converge(p)
	w.mapped.Unsynced = true
	w.mapped.FailingKinds = []string{"helmops: discovering fleet.cattle.io/v1alpha1: the server is currently unable to handle the request"}

	p, err := w.decide("a", "")
	require.NoError(t, err)
	assert.Empty(t, p.Actions, "nothing is deleted")
	assert.Equal(t, status.StateWaiting, byID(p)["b"].State)
	assert.Contains(t, byID(p)["b"].Message, "these kinds cannot be listed: helmops: discovering fleet.cattle.io/v1alpha1")
}

func TestStatusAfterFailedWrites(t *testing.T) {
	p := Plan{
		Shards: []status.ShardStatus{
			{ID: "a", State: status.StateActive, Ready: 2, Desired: 2},
			{ID: "c", State: status.StateDraining, Message: "shard c is draining"},
			{ID: "d", State: status.StatePending, Message: "withheld"},
			{ID: "e", State: status.StateActive},
		},
		Removals: []Removal{{Shard: "b", statusLine: status.ShardStatus{ID: "b", Ready: 1, Desired: 2}}, {Shard: "f"}},
	}
	assert.Equal(t, p.Shards, p.StatusAfter(nil))

	denied := errors.New("create Service ns/x: denied")
	got := p.StatusAfter(map[string]error{"a": denied, "b": denied, "c": denied, "d": denied})

	failing := func(id string) string {
		return "writes to shard " + id + " fail and are retried with backoff: create Service ns/x: denied"
	}
	assert.Equal(t, []status.ShardStatus{
		{ID: "a", State: status.StateWriteFailing, Ready: 2, Desired: 2, Message: failing("a")},
		{ID: "c", State: status.StateDraining, Message: "shard c is draining. Also, " + failing("c")},
		{ID: "d", State: status.StateWriteFailing, Message: failing("d")},
		{ID: "e", State: status.StateActive},
		{ID: "b", State: status.StateWriteFailing, Ready: 1, Desired: 2, Message: failing("b")},
	}, got)
	assert.Equal(t, status.StateActive, p.Shards[0].State, "the plan itself is left as it is")
}
