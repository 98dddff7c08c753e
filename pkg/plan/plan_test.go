package plan

import (
	"maps"
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
	"k8s.io/utils/ptr"

	"github.com/shardkeeper/shardkeeper/e2e/fixture"
	"github.com/shardkeeper/shardkeeper/pkg/mapped"
	"github.com/shardkeeper/shardkeeper/pkg/render"
	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
	"github.com/shardkeeper/shardkeeper/pkg/source"
	"github.com/shardkeeper/shardkeeper/pkg/status"
)

const ns = "cattle-fleet-system"

// fakeMapped is a fixed table of mapped objects: shard -> kind -> names
// ("namespace/name"). The objects named in placed were labelled by
// placement; unlabelled objects are listed apart.
type fakeMapped struct {
	synced     bool
	objects    map[string]map[string][]string
	placed     map[string]bool
	unlabelled []string
}

func (f fakeMapped) object(kind, key, shard string, labelled bool) mapped.Object {
	ns, name, _ := strings.Cut(key, "/")
	o := mapped.Object{Kind: kind, Namespace: ns, Name: name, Shard: shard, Labelled: labelled, Weight: 1}
	if f.placed[key] {
		o.AssignedShard = shard
	}
	return o
}
func (f fakeMapped) MappedTo(shard string) []mapped.Object {
	var out []mapped.Object
	for _, kind := range slices.Sorted(maps.Keys(f.objects[shard])) {
		for _, key := range f.objects[shard][kind] {
			out = append(out, f.object(kind, key, shard, true))
		}
	}
	return out
}
func (f fakeMapped) All() []mapped.Object {
	var out []mapped.Object
	for _, shard := range slices.Sorted(maps.Keys(f.objects)) {
		out = append(out, f.MappedTo(shard)...)
	}
	for _, key := range f.unlabelled {
		out = append(out, f.object("gitrepos", key, "", false))
	}
	return out
}

func (f fakeMapped) Synced() bool { return f.synced }
func (f fakeMapped) Counts(shard string) map[string]int {
	out := map[string]int{}
	for kind, names := range f.objects[shard] {
		out[kind] = len(names)
	}
	return out
}
func (f fakeMapped) Sample(shard string, n int) []string {
	var out []string
	for kind, names := range f.objects[shard] {
		for _, name := range names {
			out = append(out, kind+" "+name)
		}
	}
	sort.Strings(out)
	if len(out) > n {
		out = out[:n]
	}
	return out
}
func (f fakeMapped) Shards() []string {
	var out []string
	for id := range f.objects {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

type world struct {
	t       *testing.T
	sources []SourceState
	deps    map[string]*appsv1.Deployment
	svcs    map[string]*corev1.Service
	mapped  fakeMapped
}

func newWorld(t *testing.T) *world {
	set, err := source.Build(source.Options{Presets: []string{"fleet"}, FleetNamespace: ns})
	require.NoError(t, err)
	w := &world{t: t, deps: map[string]*appsv1.Deployment{}, svcs: map[string]*corev1.Service{}, mapped: fakeMapped{synced: true, objects: map[string]map[string][]string{}}}
	lives := map[string]*appsv1.Deployment{"fleet-controller": fixture.FleetController(ns), "gitjob": fixture.Gitjob(ns)} // no helmops: an older Fleet
	for _, s := range set.Sources {
		live := lives[s.Name]
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

func (w *world) decide(shards, force string) (Plan, error) {
	return Decide(Input{Config: w.config(shards, force), Sources: w.sources, Deployments: w.deps, Services: w.svcs, Mapped: w.mapped,
		ConfigMap: types.NamespacedName{Namespace: ns, Name: "shardkeeper"}})
}

// converge applies the plan's actions to the world, as the API server would.
func (w *world) converge(p Plan) {
	for _, a := range p.Actions {
		if a.Service != nil {
			key := a.Service.Namespace + "/" + a.Service.Name
			switch a.Kind {
			case Create, Update:
				svc := a.Service.DeepCopy()
				svc.UID = types.UID("uid-" + svc.Name)
				w.svcs[key] = svc
			case Delete:
				delete(w.svcs, key)
			}
			continue
		}
		key := a.Deployment.Namespace + "/" + a.Deployment.Name
		switch a.Kind {
		case Create, Update:
			d := a.Deployment.DeepCopy()
			d.UID = types.UID("uid-" + d.Name)
			w.deps[key] = d
		case Delete:
			delete(w.deps, key)
		case Replace:
			delete(w.deps, a.Existing.Namespace+"/"+a.Existing.Name)
		}
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
	w.mapped.objects["b"] = map[string][]string{"gitrepos": {"team1/repo1", "team1/repo2"}, "helmops": {"team2/op"}}

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
	w.mapped.objects = map[string]map[string][]string{}
	w.mapped.synced = false
	p, err = w.decide("a", "*")
	require.NoError(t, err)
	assert.Empty(t, p.Actions)
	assert.Equal(t, status.StateWaiting, p.Shards[1].State)
	assert.False(t, p.ForceChanged, `"*" waits until it can act`)

	// Synced and empty: deleted.
	w.mapped.synced = true
	p, err = w.decide("a", "")
	require.NoError(t, err)
	assert.Equal(t, map[ActionKind][]string{Delete: {"fleet-controller-shard-b", "gitjob-shard-b"}}, kinds(p))
	require.Len(t, p.Removals, 1)
	assert.False(t, p.Removals[0].Forced)
	assert.Len(t, p.Shards, 1)
}

func TestForce(t *testing.T) {
	w := newWorld(t)
	p, _ := w.decide("a,b,c", "")
	w.converge(p)
	w.mapped.objects["b"] = map[string][]string{"gitrepos": {"x/y"}}
	w.mapped.objects["c"] = map[string][]string{"gitrepos": {"x/z"}}

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
	assert.ErrorContains(t, err, `"nosuch"`)

	// A leftover of this process's own forced deletion is tidied instead.
	p, err := Decide(Input{Config: w.config("a", "gone"), Sources: w.sources, Deployments: w.deps, Mapped: w.mapped, ForceDeleted: map[string]bool{"gone": true}})
	require.NoError(t, err)
	assert.True(t, p.ForceChanged)
	assert.True(t, p.Force.Empty())
}

func TestConflictAndUnmanaged(t *testing.T) {
	w := newWorld(t)
	foreign := fixture.Gitjob(ns)
	foreign.Name = "gitjob-shard-a"
	w.deps[ns+"/"+foreign.Name] = foreign
	// An unmanaged Deployment with a shard name whose shard is not listed.
	stray := fixture.Gitjob(ns)
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
	old := fixture.FleetController(ns)
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

func TestUnknownAndNotShardAware(t *testing.T) {
	set, err := source.Build(source.Options{Presets: []string{"flux"}, FluxNamespace: "flux-system"})
	require.NoError(t, err)
	live := fixture.HelmController("flux-system", false)
	in := Input{
		Config:      shardconfig.Config{Shards: []shardconfig.Shard{{ID: "a"}}},
		Sources:     []SourceState{{Source: set.Sources[0], Live: live}},
		Deployments: map[string]*appsv1.Deployment{"flux-system/helm-controller": live},
		Mapped:      fakeMapped{synced: true, objects: map[string]map[string][]string{"a": {"helmreleases": {"x/1"}}, "typo": {"helmreleases": {"x/2", "x/3"}}}},
	}
	p, err := Decide(in)
	require.NoError(t, err)
	assert.Equal(t, []status.NotShardAware{{Source: "flux-system/helm-controller", Needs: "--watch-label-selector=!sharding.fluxcd.io/key"}}, p.NotShardAware)
	require.Len(t, p.Unknown, 1)
	assert.Equal(t, Unknown{Shard: "typo", Count: 2, Sample: []string{"helmreleases x/2", "helmreleases x/3"}}, p.Unknown[0])
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
	d := fixture.Gitjob(ns)
	assert.False(t, ready(d))
	d.Generation = 2
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, UpdatedReplicas: 1, AvailableReplicas: 1}
	assert.True(t, ready(d))
	d.Generation = 3
	assert.False(t, ready(d), "a spec not yet observed is not ready")
}
