package shardset

import (
	"context"
	"testing"
	"time"

	appscontrollers "github.com/rancher/wrangler/v3/pkg/generated/controllers/apps/v1"
	corecontrollers "github.com/rancher/wrangler/v3/pkg/generated/controllers/core/v1"
	"github.com/rancher/wrangler/v3/pkg/generic"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/shardkeeper/shardkeeper/pkg/plan"
	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
	"github.com/shardkeeper/shardkeeper/pkg/source"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

// The wrangler fakes below embed the wrangler interfaces (nil) and
// implement only what Register and the Controller call: any other call
// panics.

// wranglerObject is a Deployment or a Service, as both wrangler and
// fakeClient take it.
type wranglerObject[T any] interface {
	generic.RuntimeMetaObject
	DeepCopy() T
}

// wranglerController is a Deployment or Service controller over a
// fakeClient; L is its list type.
type wranglerController[T wranglerObject[T], L runtime.Object] struct {
	generic.ControllerInterface[T, L]
	fake     *fakeClient[T]
	handlers []string
	onChange generic.ObjectHandler[T]
}

type (
	wranglerDeployments = wranglerController[*appsv1.Deployment, *appsv1.DeploymentList]
	wranglerServices    = wranglerController[*corev1.Service, *corev1.ServiceList]
)

func (w *wranglerController[T, L]) OnChange(_ context.Context, name string, h generic.ObjectHandler[T]) {
	w.handlers = append(w.handlers, name)
	w.onChange = h
}
func (w *wranglerController[T, L]) Cache() generic.CacheInterface[T] {
	return wranglerCache[T]{fake: w.fake}
}
func (w *wranglerController[T, L]) Create(o T) (T, error) {
	return w.fake.Create(o)
}
func (w *wranglerController[T, L]) Update(o T) (T, error) {
	return w.fake.Update(o)
}
func (w *wranglerController[T, L]) Delete(namespace, name string, opts *metav1.DeleteOptions) error {
	return w.fake.Delete(namespace, name, opts)
}

type wranglerCache[T wranglerObject[T]] struct {
	generic.CacheInterface[T]
	fake *fakeClient[T]
}

func (c wranglerCache[T]) List(namespace string, selector labels.Selector) ([]T, error) {
	return c.fake.List(namespace, selector)
}
func (c wranglerCache[T]) Get(namespace, name string) (T, error) {
	return c.fake.Get(namespace, name)
}

type wranglerConfigMaps struct {
	corecontrollers.ConfigMapController
	*fakeConfigMaps
	handlers []string
	onChange generic.ObjectHandler[*corev1.ConfigMap]
}

func (w *wranglerConfigMaps) OnChange(_ context.Context, name string, h generic.ObjectHandler[*corev1.ConfigMap]) {
	w.handlers = append(w.handlers, name)
	w.onChange = h
}
func (w *wranglerConfigMaps) Enqueue(namespace, name string) {
	w.fakeConfigMaps.Enqueue(namespace, name)
}
func (w *wranglerConfigMaps) EnqueueAfter(namespace, name string, d time.Duration) {
	w.fakeConfigMaps.EnqueueAfter(namespace, name, d)
}
func (w *wranglerConfigMaps) Patch(namespace, name string, pt types.PatchType, data []byte, sub ...string) (*corev1.ConfigMap, error) {
	return w.fakeConfigMaps.Patch(namespace, name, pt, data, sub...)
}

type wranglerStatusMaps struct {
	corecontrollers.ConfigMapClient
	*fakeStatusStore
}

func (w wranglerStatusMaps) Get(namespace, name string, o metav1.GetOptions) (*corev1.ConfigMap, error) {
	return w.fakeStatusStore.Get(namespace, name, o)
}
func (w wranglerStatusMaps) Create(cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	return w.fakeStatusStore.Create(cm)
}
func (w wranglerStatusMaps) Update(cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	return w.fakeStatusStore.Update(cm)
}

// Register wires one handler per controller, keeps each namespace's client
// for the writes in that namespace, and the handlers bring the relevant
// changes back to the shard ConfigMap.
func TestRegister(t *testing.T) {
	set, err := source.Build(source.Options{Presets: []string{source.PresetFleet}, FleetNamespace: "ns-a"})
	require.NoError(t, err)
	cms := &wranglerConfigMaps{fakeConfigMaps: &fakeConfigMaps{}}
	deps := map[string]*wranglerDeployments{
		"ns-a": {fake: newFakeClient[*appsv1.Deployment]("deployments", testfixture.Gitjob("ns-a"))},
		"ns-b": {fake: newFakeClient[*appsv1.Deployment]("deployments")},
	}
	svcs := map[string]*wranglerServices{
		"ns-a": {fake: newFakeClient[*corev1.Service]("services")},
		"ns-b": {fake: newFakeClient[*corev1.Service]("services")},
	}
	depControllers := map[string]appscontrollers.DeploymentController{}
	for ns, d := range deps {
		depControllers[ns] = d
	}
	svcControllers := map[string]corecontrollers.ServiceController{}
	for ns, s := range svcs {
		svcControllers[ns] = s
	}
	ref := types.NamespacedName{Namespace: "ns-a", Name: "shardkeeper"}

	c := Register(context.Background(), Options{ConfigMap: ref, Sources: set.Sources},
		cms, wranglerStatusMaps{fakeStatusStore: newFakeStatusStore()}, depControllers, svcControllers,
		&testfixture.MappedTable{}, record.NewFakeRecorder(10))

	assert.Equal(t, []string{"shardkeeper-shards"}, cms.handlers)
	for ns := range deps {
		assert.Equal(t, []string{"shardkeeper-deployment"}, deps[ns].handlers, ns)
		assert.Equal(t, []string{"shardkeeper-service"}, svcs[ns].handlers, ns)
	}

	// The caches are read per namespace.
	in, err := c.input(shardconfig.Config{})
	require.NoError(t, err)
	assert.Contains(t, in.Deployments, "ns-a/gitjob")

	// The writes go through their namespace's client.
	for _, ns := range []string{"ns-b", "ns-a"} {
		require.NoError(t, writeErr(c.write(plan.Action{Kind: plan.Create, Shard: "x", Deployment: shardDeployment(ns, "gitjob", "x")})))
		require.NoError(t, writeErr(c.write(plan.Action{Kind: plan.Create, Shard: "x", Service: shardService(ns, "x")})))
		assert.Equal(t, []string{"create " + ns + "/gitjob-shard-x"}, deps[ns].fake.summary())
		assert.Equal(t, []string{"create " + ns + "/monitoring-fleet-controller-shard-x"}, svcs[ns].fake.summary())
	}

	// A managed or source Deployment enqueues the shard ConfigMap; another
	// one does not.
	_, _ = deps["ns-a"].onChange("ns-a/unrelated", &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns-a", Name: "unrelated"}})
	assert.Empty(t, cms.enqueues)
	_, _ = deps["ns-a"].onChange("ns-a/gitjob", nil)
	assert.Equal(t, []enqueued{{Key: ref.String()}}, cms.enqueues)
	_, _ = svcs["ns-a"].onChange("ns-a/monitoring-fleet-controller-shard-z", nil)
	assert.Len(t, cms.enqueues, 2)

	// The ConfigMap handler reconciles only the shard ConfigMap.
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns-a", Name: "other"}}
	out, err := cms.onChange("ns-a/other", other)
	require.NoError(t, err)
	assert.Same(t, other, out)
	assert.Error(t, c.Ready(), "no reconcile yet")
}

// fleetEnv is a Controller for Fleet's preset over the fixtures: the
// fleet-controller and gitjob Deployments and their metrics Services.
func fleetEnv(t *testing.T) *env {
	t.Helper()
	set, err := source.Build(source.Options{Presets: []string{source.PresetFleet}, FleetNamespace: testNS})
	require.NoError(t, err)
	return newEnv(t, Options{Sources: set.Sources},
		[]*appsv1.Deployment{testfixture.FleetController(testNS), testfixture.Gitjob(testNS)},
		testfixture.FleetMetricsServices(testNS))
}

func TestOnChangeCreatesShards(t *testing.T) {
	e := fleetEnv(t)
	cm := shardConfigMapObject("a,b", "")

	out, err := e.c.onConfigMap(shardCM.String(), cm)

	require.NoError(t, err)
	assert.Same(t, cm, out)
	require.NoError(t, e.c.Ready())
	assert.Equal(t, []string{
		"create " + testNS + "/fleet-controller-shard-a", "create " + testNS + "/fleet-controller-shard-b",
		"create " + testNS + "/gitjob-shard-a", "create " + testNS + "/gitjob-shard-b",
	}, e.deployments.summary())
	assert.Equal(t, []string{
		"create " + testNS + "/monitoring-fleet-controller-shard-a", "create " + testNS + "/monitoring-fleet-controller-shard-b",
		"create " + testNS + "/monitoring-gitjob-shard-a", "create " + testNS + "/monitoring-gitjob-shard-b",
	}, e.services.summary())
	// The Events and the status wait for the caches to show the writes;
	// a recheck is enqueued in case no watch event comes.
	assert.Empty(t, e.events())
	assert.Empty(t, e.statusMaps.writes())
	assert.Contains(t, e.configMaps.enqueues, enqueued{Key: shardCM.String(), After: unseenRecheck})
	assert.Empty(t, e.configMaps.patches)

	// The fake caches hold the writes: the next reconcile (the watch
	// events') writes no object, and emits the Events and the status.
	e.deployments.reset()
	e.services.reset()
	_, err = e.c.onConfigMap(shardCM.String(), cm)
	require.NoError(t, err)
	assert.Empty(t, e.deployments.summary())
	assert.Empty(t, e.services.summary())
	assert.Equal(t, []string{
		"Normal ShardCreated shard a created: fleet-controller-shard-a, gitjob-shard-a, monitoring-fleet-controller-shard-a, monitoring-gitjob-shard-a",
		"Normal ShardCreated shard b created: fleet-controller-shard-b, gitjob-shard-b, monitoring-fleet-controller-shard-b, monitoring-gitjob-shard-b",
	}, e.events())
	assert.Equal(t, []string{"create " + statusKey}, e.statusMaps.writes())

	// Each Event once.
	_, err = e.c.onConfigMap(shardCM.String(), cm)
	require.NoError(t, err)
	assert.Empty(t, e.events())
}

// While the caches lag behind the writes, the Events wait: a reconcile
// that sees the lag emits nothing.
func TestEventsWaitForTheCaches(t *testing.T) {
	e := fleetEnv(t)
	cm := shardConfigMapObject("a", "")
	e.deployments.lag()
	_, err := e.c.onConfigMap(shardCM.String(), cm)
	require.NoError(t, err)
	require.Len(t, e.deployments.requests(), 2)

	_, err = e.c.onConfigMap(shardCM.String(), cm)
	require.NoError(t, err)
	assert.Empty(t, e.events(), "the caches do not show the creates yet")
	assert.Empty(t, e.statusMaps.writes())

	e.deployments.catchUp()
	_, err = e.c.onConfigMap(shardCM.String(), cm)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"Normal ShardCreated shard a created: fleet-controller-shard-a, gitjob-shard-a, monitoring-fleet-controller-shard-a, monitoring-gitjob-shard-a",
	}, e.events())
	assert.Equal(t, []string{"create " + statusKey}, e.statusMaps.writes())
}

func TestOnChangeForceDeletes(t *testing.T) {
	e := fleetEnv(t)
	for range 2 { // the second shows the writes and emits their Events
		_, err := e.c.onConfigMap(shardCM.String(), shardConfigMapObject("a,b", ""))
		require.NoError(t, err)
	}
	require.Len(t, e.events(), 2)
	e.deployments.reset()
	e.services.reset()
	e.mapped.Objects["b"] = map[string][]string{"gitrepos": {"team/repo"}}
	cachedB, err := e.deployments.List(testNS, labels.SelectorFromSet(labels.Set{"shardkeeper.io/shard": "b"}))
	require.NoError(t, err)
	require.Len(t, cachedB, 2)

	cm := shardConfigMapObject("a", "b")
	cm.ResourceVersion = "77"
	_, err = e.c.onConfigMap(shardCM.String(), cm)
	require.NoError(t, err)

	calls := e.deployments.requests()
	require.Len(t, calls, 2)
	for i, d := range cachedB {
		assert.Equal(t, "delete "+testNS+"/"+d.Name, calls[i].Verb+" "+calls[i].Key)
		assert.Equal(t, d.UID, *calls[i].Options.Preconditions.UID)
		assert.Equal(t, d.ResourceVersion, *calls[i].Options.Preconditions.ResourceVersion)
	}
	require.Len(t, e.configMaps.patches, 1)
	assert.JSONEq(t, `{"metadata":{"resourceVersion":"77","annotations":{"shardkeeper.io/force-delete":null}}}`, string(e.configMaps.patches[0].Data))
	assert.Empty(t, e.events(), "the Events wait for the caches to show the deletes and the patch")

	// The watch brings the patched ConfigMap (the fake patch's version).
	cm = shardConfigMapObject("a", "")
	cm.ResourceVersion = "101"
	_, err = e.c.onConfigMap(shardCM.String(), cm)
	require.NoError(t, err)
	assert.Contains(t, e.events(), "Warning ShardForceDeleted shard b force-deleted; left behind with no controller: 1 gitrepos (gitrepos team/repo)")
}

// Before the mapped caches are full the counts are wrong: the status is
// not written, and the reconcile is enqueued again.
func TestOnChangeWaitsForTheMappedCaches(t *testing.T) {
	e := fleetEnv(t)
	e.mapped.Unsynced = true

	_, err := e.c.onConfigMap(shardCM.String(), shardConfigMapObject("a", ""))

	require.NoError(t, err)
	assert.Empty(t, e.statusMaps.calls)
	assert.Equal(t, []enqueued{{Key: shardCM.String(), After: time.Second}}, e.configMaps.enqueues)
}

// Changes of mapped objects are batched, but the first change that finds
// every kind synced, the end of the initial lists, is reconciled at once.
func TestMappedChangedCountsAtOnceWhenSynced(t *testing.T) {
	e := newEnv(t, Options{}, nil, nil)
	e.c.MappedChanged()
	assert.Empty(t, e.configMaps.enqueues, "nothing before the controllers run")

	e.c.Started()
	e.configMaps.enqueues = nil
	e.mapped.Unsynced = true
	e.c.MappedChanged()
	e.mapped.Unsynced = false
	e.c.MappedChanged()
	e.c.MappedChanged()
	key := shardCM.String()
	assert.Equal(t, []enqueued{{Key: key, After: mappedDelay}, {Key: key}, {Key: key, After: mappedDelay}}, e.configMaps.enqueues)
}
