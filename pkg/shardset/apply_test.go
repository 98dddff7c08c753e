package shardset

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/shardkeeper/shardkeeper/pkg/plan"
	"github.com/shardkeeper/shardkeeper/pkg/render"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

// shardDeployment is a rendered shard Deployment named "<source>-shard-<id>".
func shardDeployment(ns, source, id string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   ns,
			Name:        source + "-shard-" + id,
			Labels:      map[string]string{render.ManagedByLabel: render.ManagedByValue, render.ShardLabel: id},
			Annotations: map[string]string{render.SpecHashAnnotation: "hash-" + id},
		},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)},
	}
}

// shardService is a rendered shard metrics Service.
func shardService(ns, id string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   ns,
			Name:        "monitoring-fleet-controller-shard-" + id,
			Labels:      map[string]string{render.ManagedByLabel: render.ManagedByValue, render.ShardLabel: id},
			Annotations: map[string]string{render.SpecHashAnnotation: "svc-hash-" + id},
		},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: map[string]string{"app": "fleet-controller", render.ShardLabel: id},
			Ports:    []corev1.ServicePort{{Name: "metrics", Port: 8080, Protocol: corev1.ProtocolTCP}},
		},
	}
}

// cached returns o as the cache holds it: with a UID and resourceVersion.
func cached[T metav1.Object](o T, uid, rv string) T {
	o.SetUID(types.UID(uid))
	o.SetResourceVersion(rv)
	return o
}

func TestShardCreatedOnlyForShardsWhoseWritesSucceeded(t *testing.T) {
	e := newEnv(t, Options{}, nil, nil)
	boom := errors.New("admission webhook denied it")
	e.deployments.failOn("create", testNS+"/gitjob-shard-b", boom)
	p := plan.Plan{
		Actions: []plan.Action{
			{Kind: plan.Create, Shard: "a", Deployment: shardDeployment(testNS, "gitjob", "a")},
			{Kind: plan.Create, Shard: "a", Deployment: shardDeployment(testNS, "fleet-controller", "a")},
			{Kind: plan.Create, Shard: "b", Deployment: shardDeployment(testNS, "fleet-controller", "b")},
			{Kind: plan.Create, Shard: "b", Deployment: shardDeployment(testNS, "gitjob", "b")},
		},
		NewShards: map[string]bool{"a": true, "b": true},
	}

	err := e.applyAnnounced(shardConfigMapObject("a,b", ""), p)

	require.ErrorIs(t, err, boom)
	require.ErrorContains(t, err, "create Deployment "+testNS+"/gitjob-shard-b")
	assert.Equal(t, []string{"Normal ShardCreated shard a created: fleet-controller-shard-a, gitjob-shard-a"}, e.events())
	assert.Len(t, e.deployments.requests(), 4, "every write is tried")
}

func TestRemovalEventsOnlyForShardsWhoseDeletesSucceeded(t *testing.T) {
	deps := []*appsv1.Deployment{
		cached(shardDeployment(testNS, "fleet-controller", "b"), "uid-b", "1"),
		cached(shardDeployment(testNS, "fleet-controller", "c"), "uid-c", "2"),
		cached(shardDeployment(testNS, "fleet-controller", "d"), "uid-d", "3"),
	}
	e := newEnv(t, Options{}, deps, nil)
	e.deployments.failOn("delete", testNS+"/fleet-controller-shard-d", apierrors.NewConflict(deploymentsGR, "fleet-controller-shard-d", nil))
	p := plan.Plan{
		Actions: []plan.Action{
			{Kind: plan.Delete, Shard: "b", Deployment: deps[0]},
			{Kind: plan.Delete, Shard: "c", Deployment: deps[1]},
			{Kind: plan.Delete, Shard: "d", Deployment: deps[2]},
		},
		Removals: []plan.Removal{
			{Shard: "b"},
			{Shard: "c", Forced: true, Mapped: map[string]int{"gitrepos": 1}, Sample: []string{"gitrepos x/y"}},
			{Shard: "d", Forced: true, Mapped: map[string]int{"gitrepos": 1}, Sample: []string{"gitrepos x/z"}},
		},
	}

	err := e.applyAnnounced(shardConfigMapObject("a", "c,d"), p)

	assert.True(t, apierrors.IsConflict(err), "the failed delete is returned: %v", err)
	assert.Equal(t, []string{
		"Normal ShardDeleted shard b deleted",
		"Warning ShardForceDeleted shard c force-deleted; left behind with no controller: 1 gitrepos (gitrepos x/y)",
	}, e.events())
	assert.Equal(t, map[string]bool{"c": true}, e.c.forceDeletedSnapshot())
}

var deploymentsGR = (&fakeDeployments{resource: "deployments"}).gr()

// A create that finds its object already there was another writer's: the
// Events name only what this process created.
func TestShardCreatedNamesOnlyThisProcesssCreates(t *testing.T) {
	theirs := cached(shardDeployment(testNS, "fleet-controller", "b"), "uid-1", "1")
	theirsToo := cached(shardDeployment(testNS, "fleet-controller", "c"), "uid-2", "2")
	e := newEnv(t, Options{}, []*appsv1.Deployment{theirs, theirsToo}, nil)
	p := plan.Plan{
		Actions: []plan.Action{
			{Kind: plan.Create, Shard: "b", Deployment: shardDeployment(testNS, "fleet-controller", "b")},
			{Kind: plan.Create, Shard: "b", Deployment: shardDeployment(testNS, "gitjob", "b")},
			{Kind: plan.Create, Shard: "c", Deployment: shardDeployment(testNS, "fleet-controller", "c"), Restore: true},
		},
		NewShards: map[string]bool{"b": true},
	}

	err := e.applyAnnounced(shardConfigMapObject("b,c", ""), p)

	require.NoError(t, err)
	assert.Equal(t, []string{"Normal ShardCreated shard b created: gitjob-shard-b"}, e.events())
	assert.Equal(t, 1, e.c.writes.Len(), "only this process's create is awaited")
}

func TestUpdateKeepsOthersMetadataAndSetsRendered(t *testing.T) {
	existingDeployment := cached(shardDeployment(testNS, "fleet-controller", "a"), "uid-1", "7")
	existingDeployment.Labels[render.ShardLabel] = "old"
	existingDeployment.Labels["team.example.com/owner"] = "ops"
	existingDeployment.Annotations[render.SpecHashAnnotation] = "stale"
	existingDeployment.Annotations["deployment.kubernetes.io/revision"] = "3"
	existingDeployment.Spec.Replicas = ptr.To[int32](5)
	renderedDeployment := shardDeployment(testNS, "fleet-controller", "a")
	renderedDeployment.Spec.Replicas = ptr.To[int32](2)

	existingService := cached(shardService(testNS, "a"), "uid-2", "8")
	existingService.Labels["team.example.com/owner"] = "ops"
	existingService.Annotations["prometheus.io/scrape"] = "true"
	existingService.Annotations[render.SpecHashAnnotation] = "stale"
	existingService.Spec.ClusterIP = "10.0.0.5"
	existingService.Spec.Selector = map[string]string{"app": "old"}
	renderedService := shardService(testNS, "a")

	wantLabels := map[string]string{render.ManagedByLabel: render.ManagedByValue, render.ShardLabel: "a", "team.example.com/owner": "ops"}

	t.Run("Deployment", func(t *testing.T) {
		e := newEnv(t, Options{}, []*appsv1.Deployment{existingDeployment}, nil)
		require.NoError(t, writeErr(e.c.write(plan.Action{Kind: plan.Update, Shard: "a", Deployment: renderedDeployment, Existing: existingDeployment})))

		sent := onlyUpdate(t, e.deployments)
		assert.Equal(t, wantLabels, sent.Labels)
		assert.Equal(t, map[string]string{render.SpecHashAnnotation: "hash-a", "deployment.kubernetes.io/revision": "3"}, sent.Annotations)
		assert.Equal(t, renderedDeployment.Spec, sent.Spec)
		assert.Equal(t, "7", sent.ResourceVersion, "the update carries the existing resourceVersion")
		assert.Equal(t, types.UID("uid-1"), sent.UID)
		assert.Equal(t, "old", existingDeployment.Labels[render.ShardLabel], "the cached object is not modified")
	})
	t.Run("Service", func(t *testing.T) {
		e := newEnv(t, Options{}, nil, []*corev1.Service{existingService})
		require.NoError(t, writeErr(e.c.write(plan.Action{Kind: plan.Update, Shard: "a", Service: renderedService, ExistingService: existingService})))

		sent := onlyUpdate(t, e.services)
		assert.Equal(t, wantLabels, sent.Labels)
		assert.Equal(t, map[string]string{render.SpecHashAnnotation: "svc-hash-a", "prometheus.io/scrape": "true"}, sent.Annotations)
		assert.Equal(t, renderedService.Spec.Selector, sent.Spec.Selector)
		assert.Equal(t, "10.0.0.5", sent.Spec.ClusterIP, "fields set by the API server are kept")
		assert.Equal(t, "8", sent.ResourceVersion)
		assert.Empty(t, e.deployments.requests())
	})
}

// onlyUpdate returns what the one request recorded by f, an update, sent.
func onlyUpdate[T kubeObject[T]](t *testing.T, f *fakeClient[T]) T {
	t.Helper()
	calls := f.requests()
	require.Len(t, calls, 1)
	require.Equal(t, "update", calls[0].Verb)
	return calls[0].Object
}

func TestDeletePreconditions(t *testing.T) {
	background := metav1.DeletePropagationBackground
	want := func(uid, rv string) *metav1.DeleteOptions {
		u := types.UID(uid)
		return &metav1.DeleteOptions{
			Preconditions:     &metav1.Preconditions{UID: &u, ResourceVersion: &rv},
			PropagationPolicy: &background,
		}
	}
	for _, tc := range []struct {
		name    string
		action  plan.Action
		service bool
		key     string
		want    *metav1.DeleteOptions
	}{{
		name:   "Deployment delete",
		action: plan.Action{Kind: plan.Delete, Shard: "b", Deployment: cached(shardDeployment(testNS, "gitjob", "b"), "uid-1", "11")},
		key:    testNS + "/gitjob-shard-b",
		want:   want("uid-1", "11"),
	}, {
		name: "Deployment replace deletes the existing one",
		action: plan.Action{Kind: plan.Replace, Shard: "a",
			Deployment: shardDeployment(testNS, "gitjob", "a"),
			Existing:   cached(shardDeployment(testNS, "gitjob", "a"), "uid-2", "12")},
		key:  testNS + "/gitjob-shard-a",
		want: want("uid-2", "12"),
	}, {
		name:    "Service delete",
		action:  plan.Action{Kind: plan.Delete, Shard: "b", Service: cached(shardService(testNS, "b"), "uid-3", "13")},
		service: true,
		key:     testNS + "/monitoring-fleet-controller-shard-b",
		want:    want("uid-3", "13"),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Options{}, nil, nil)
			require.NoError(t, writeErr(e.c.write(tc.action))) // NotFound in the fakes: done

			var verbs []string
			var opts *metav1.DeleteOptions
			if tc.service {
				calls := e.services.requests()
				require.Len(t, calls, 1)
				verbs, opts = []string{calls[0].Verb + " " + calls[0].Key}, calls[0].Options
				assert.Empty(t, e.deployments.requests())
			} else {
				calls := e.deployments.requests()
				require.Len(t, calls, 1)
				verbs, opts = []string{calls[0].Verb + " " + calls[0].Key}, calls[0].Options
				assert.Empty(t, e.services.requests())
			}
			assert.Equal(t, []string{"delete " + tc.key}, verbs)
			assert.Equal(t, tc.want, opts)
		})
	}
}

func TestAlreadyExistsAndNotFoundAreDone(t *testing.T) {
	dep := cached(shardDeployment(testNS, "gitjob", "a"), "uid-1", "1")
	svc := cached(shardService(testNS, "a"), "uid-2", "2")
	for _, tc := range []struct {
		name string
		// deps and svcs are in the cluster before the write.
		deps    []*appsv1.Deployment
		svcs    []*corev1.Service
		action  plan.Action
		wantErr func(error) bool
	}{
		{name: "Deployment create, AlreadyExists", deps: []*appsv1.Deployment{dep},
			action: plan.Action{Kind: plan.Create, Shard: "a", Deployment: shardDeployment(testNS, "gitjob", "a")}},
		{name: "Service create, AlreadyExists", svcs: []*corev1.Service{svc},
			action: plan.Action{Kind: plan.Create, Shard: "a", Service: shardService(testNS, "a")}},
		{name: "Deployment delete, NotFound",
			action: plan.Action{Kind: plan.Delete, Shard: "a", Deployment: dep}},
		{name: "Deployment replace, NotFound",
			action: plan.Action{Kind: plan.Replace, Shard: "a", Deployment: shardDeployment(testNS, "gitjob", "a"), Existing: dep}},
		{name: "Service delete, NotFound",
			action: plan.Action{Kind: plan.Delete, Shard: "a", Service: svc}},
		// The other errors are returned.
		{name: "Deployment update, NotFound",
			action:  plan.Action{Kind: plan.Update, Shard: "a", Deployment: shardDeployment(testNS, "gitjob", "a"), Existing: dep},
			wantErr: apierrors.IsNotFound},
		{name: "Service update, NotFound",
			action:  plan.Action{Kind: plan.Update, Shard: "a", Service: shardService(testNS, "a"), ExistingService: svc},
			wantErr: apierrors.IsNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Options{}, tc.deps, tc.svcs)
			p := plan.Plan{Actions: []plan.Action{tc.action}}
			switch tc.action.Kind {
			case plan.Create:
				p.NewShards = map[string]bool{"a": true}
			case plan.Delete:
				p.Removals = []plan.Removal{{Shard: "a"}}
			}

			err := e.applyAnnounced(shardConfigMapObject("a", ""), p)

			require.Len(t, append(e.deployments.summary(), e.services.summary()...), 1)
			if tc.wantErr != nil {
				assert.True(t, tc.wantErr(err), "got %v", err)
				assert.Empty(t, e.events())
				return
			}
			require.NoError(t, err)
			// Done: a delete's Event follows; an object that existed was
			// another writer's, so it is not announced as created.
			switch tc.action.Kind {
			case plan.Create:
				assert.Empty(t, e.events())
			case plan.Delete:
				assert.Equal(t, []string{"Normal ShardDeleted shard a deleted"}, e.events())
			}
		})
	}
}

func TestShardRestoredEvent(t *testing.T) {
	existingDep := cached(shardDeployment(testNS, "fleet-controller", "a"), "uid-1", "1")
	existingSvc := cached(shardService(testNS, "a"), "uid-2", "2")
	const (
		changed = "changed by hand; its rendered spec was restored"
		missing = "missing; it was created again"
	)
	for _, tc := range []struct {
		name   string
		action plan.Action
		fail   bool // the Deployment update fails
		want   []string
	}{
		{name: "Deployment update",
			action: plan.Action{Kind: plan.Update, Shard: "a", Restore: true, Deployment: shardDeployment(testNS, "fleet-controller", "a"), Existing: existingDep},
			want:   []string{"Warning ShardRestored Deployment " + testNS + "/fleet-controller-shard-a of shard a was " + changed}},
		{name: "Deployment create",
			action: plan.Action{Kind: plan.Create, Shard: "a", Restore: true, Deployment: shardDeployment(testNS, "gitjob", "a")},
			want:   []string{"Warning ShardRestored Deployment " + testNS + "/gitjob-shard-a of shard a was " + missing}},
		{name: "Service update",
			action: plan.Action{Kind: plan.Update, Shard: "a", Restore: true, Service: shardService(testNS, "a"), ExistingService: existingSvc},
			want:   []string{"Warning ShardRestored Service " + testNS + "/monitoring-fleet-controller-shard-a of shard a was " + changed}},
		{name: "Service create",
			action: plan.Action{Kind: plan.Create, Shard: "b", Restore: true, Service: shardService(testNS, "b")},
			want:   []string{"Warning ShardRestored Service " + testNS + "/monitoring-fleet-controller-shard-b of shard b was " + missing}},
		{name: "a failed restore is no news",
			action: plan.Action{Kind: plan.Update, Shard: "a", Restore: true, Deployment: shardDeployment(testNS, "fleet-controller", "a"), Existing: existingDep},
			fail:   true},
		{name: "an update that restores nothing",
			action: plan.Action{Kind: plan.Update, Shard: "a", Deployment: shardDeployment(testNS, "fleet-controller", "a"), Existing: existingDep}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Options{}, []*appsv1.Deployment{existingDep}, []*corev1.Service{existingSvc})
			if tc.fail {
				e.deployments.failOn("update", testNS+"/fleet-controller-shard-a", errors.New("refused"))
			}
			err := e.applyAnnounced(shardConfigMapObject("a", ""), plan.Plan{Actions: []plan.Action{tc.action}})
			if tc.fail {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.want, e.events())
		})
	}
}

// A write goes through the client of its object's namespace, whatever
// the order of the namespaces.
func TestWriteUsesTheClientOfItsNamespace(t *testing.T) {
	depsA, depsB := newFakeClient[*appsv1.Deployment]("deployments"), newFakeClient[*appsv1.Deployment]("deployments")
	svcsA, svcsB := newFakeClient[*corev1.Service]("services"), newFakeClient[*corev1.Service]("services")
	c := newController(Options{ConfigMap: shardCM}, &fakeConfigMaps{}, newFakeStatusStore(),
		map[string]deploymentAccess{"ns-a": {cache: depsA, client: depsA}, "ns-b": {cache: depsB, client: depsB}},
		map[string]serviceAccess{"ns-a": {cache: svcsA, client: svcsA}, "ns-b": {cache: svcsB, client: svcsB}},
		&testfixture.MappedTable{}, nil)

	for _, ns := range []string{"ns-a", "ns-b", "ns-a", "ns-b"} {
		require.NoError(t, writeErr(c.write(plan.Action{Kind: plan.Create, Shard: "x", Deployment: shardDeployment(ns, "gitjob", "x")})))
		require.NoError(t, writeErr(c.write(plan.Action{Kind: plan.Create, Shard: "x", Service: shardService(ns, "x")})))
	}
	assert.Equal(t, []string{"create ns-a/gitjob-shard-x", "create ns-a/gitjob-shard-x"}, depsA.summary())
	assert.Equal(t, []string{"create ns-b/gitjob-shard-x", "create ns-b/gitjob-shard-x"}, depsB.summary())
	assert.Equal(t, []string{"create ns-a/monitoring-fleet-controller-shard-x", "create ns-a/monitoring-fleet-controller-shard-x"}, svcsA.summary())
	assert.Equal(t, []string{"create ns-b/monitoring-fleet-controller-shard-x", "create ns-b/monitoring-fleet-controller-shard-x"}, svcsB.summary())

	// A namespace without a client is an error, not a write elsewhere.
	_, err := c.write(plan.Action{Kind: plan.Create, Shard: "x", Deployment: shardDeployment("ns-c", "gitjob", "x")})
	require.ErrorContains(t, err, "no Deployment client for namespace ns-c")
	_, err = c.write(plan.Action{Kind: plan.Delete, Shard: "x", Service: shardService("ns-c", "x")})
	assert.ErrorContains(t, err, "no Service client for namespace ns-c")
}
