package shardset

import (
	"maps"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shardkeeper/shardkeeper/pkg/source"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

// A new shard Deployment's life as kube-controller-manager writes it: only
// the versions that change what a decision reads bring a reconcile.
func TestDeploymentStatusUpdatesThatChangeNothingReadBringNoReconcile(t *testing.T) {
	e := fleetEnv(t)
	taken := func() []enqueued {
		e.configMaps.mu.Lock()
		defer e.configMaps.mu.Unlock()
		out := e.configMaps.enqueues
		e.configMaps.enqueues = nil
		return out
	}
	enqueues := func() int { return len(taken()) }
	now := []enqueued{{Key: shardCM.String()}}
	d := shardDeployment(testNS, "fleet-controller", "a")
	d.UID, d.Generation, d.ResourceVersion = "uid-1", 1, "10"
	key := testNS + "/" + d.Name
	next := func(change func(*appsv1.Deployment)) {
		// A new object each time, as an informer hands out.
		d = d.DeepCopy()
		change(d)
		_, err := e.c.onDeployment(key, d)
		require.NoError(t, err)
	}

	next(func(*appsv1.Deployment) {})
	assert.Equal(t, now, taken(), "created: at once")

	next(func(d *appsv1.Deployment) {
		d.ResourceVersion = "11"
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1, UnavailableReplicas: 1}
		d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: "True", Reason: "NewReplicaSetCreated"}}
	})
	assert.Zero(t, enqueues(), "observed, replica not yet available: neither rolled out nor available")

	next(func(d *appsv1.Deployment) {
		d.ResourceVersion = "12"
		d.Annotations = maps.Clone(d.Annotations)
		d.Annotations["deployment.kubernetes.io/revision"] = "1"
	})
	assert.Zero(t, enqueues(), "kube-controller-manager's revision annotation is not read")

	next(func(d *appsv1.Deployment) {
		d.ResourceVersion = "13"
		d.Status.Conditions[0].Reason = "ReplicaSetUpdated"
		d.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}}
	})
	assert.Zero(t, enqueues(), "a condition's reason and the managed fields are not read")

	next(func(d *appsv1.Deployment) {
		d.ResourceVersion = "14"
		d.Status.AvailableReplicas, d.Status.ReadyReplicas, d.Status.UnavailableReplicas = 1, 1, 0
	})
	assert.Equal(t, []enqueued{{Key: shardCM.String(), After: rolloutDelay}}, taken(),
		"available and rolled out: batched with the rest of a rollout")

	for what, change := range map[string]func(*appsv1.Deployment){
		"spec (generation)": func(d *appsv1.Deployment) { d.Generation++ },
		"label":             func(d *appsv1.Deployment) { d.Labels["team"] = "x" },
		"annotation":        func(d *appsv1.Deployment) { d.Annotations["note"] = "x" },
		"deletion":          func(d *appsv1.Deployment) { d.DeletionTimestamp = &metav1.Time{} },
		"new object":        func(d *appsv1.Deployment) { d.UID = "uid-2" },
	} {
		next(func(d *appsv1.Deployment) {
			d.Labels, d.Annotations = maps.Clone(d.Labels), maps.Clone(d.Annotations)
			change(d)
		})
		assert.Equal(t, now, taken(), "a change of the %s: at once", what)
	}
	next(func(d *appsv1.Deployment) { d.Status.AvailableReplicas = 0 })
	assert.Equal(t, []enqueued{{Key: shardCM.String(), After: rolloutDelay}}, taken(), "unavailable: batched")

	_, err := e.c.onDeployment(key, nil)
	require.NoError(t, err)
	assert.Equal(t, now, taken(), "deleted: at once")
	next(func(*appsv1.Deployment) {})
	assert.Equal(t, now, taken(), "created again after its deletion: at once")

	// Deployments that are neither a source nor a shard copy never count.
	other := testfixture.FleetController(testNS)
	other.Name = "something-else"
	_, err = e.c.onDeployment(testNS+"/"+other.Name, other)
	require.NoError(t, err)
	assert.Zero(t, enqueues())
}

// A deletion arrives with its key only: it counts for a managed copy seen
// under any name, and for any name a source's copies (current or of an
// earlier release) can have, seen or not: the process may have started
// after the copy was last changed.
func TestDeletedCopiesBringAReconcile(t *testing.T) {
	enqueues := func(e *env) int {
		e.configMaps.mu.Lock()
		defer e.configMaps.mu.Unlock()
		n := len(e.configMaps.enqueues)
		e.configMaps.enqueues = nil
		return n
	}

	fleet := fleetEnv(t)
	odd := shardDeployment(testNS, "fleet-controller", "a")
	odd.Name = "renamed-by-hand"
	_, err := fleet.c.onDeployment(testNS+"/"+odd.Name, odd)
	require.NoError(t, err)
	assert.Equal(t, 1, enqueues(fleet), "a managed Deployment counts under any name")
	_, err = fleet.c.onDeployment(testNS+"/"+odd.Name, nil)
	require.NoError(t, err)
	assert.Equal(t, 1, enqueues(fleet), "its deletion too, though its name is no copy's")
	_, err = fleet.c.onDeployment(testNS+"/"+odd.Name, nil)
	require.NoError(t, err)
	assert.Zero(t, enqueues(fleet), "once forgotten, the name is nobody's")
	_, err = fleet.c.onDeployment(testNS+"/something-else", nil)
	require.NoError(t, err)
	assert.Zero(t, enqueues(fleet), "a deleted Deployment never seen, under no copy's name")

	set, err := source.Build(source.Options{Presets: []string{"flux"}, FluxNamespace: testNS})
	require.NoError(t, err)
	flux := newEnv(t, Options{Sources: set.Sources}, nil, nil)
	for _, name := range []string{"helm-controller-a", "kustomize-controller-a", "helm-controller-shard-a"} {
		_, err := flux.c.onDeployment(testNS+"/"+name, nil)
		require.NoError(t, err)
		assert.Equal(t, 1, enqueues(flux), "%s deleted, never seen by this process", name)
	}
	_, err = flux.c.onService(testNS+"/source-controller-a", nil)
	require.NoError(t, err)
	assert.Equal(t, 1, enqueues(flux), "the copy of source-controller's Service deleted")
	_, err = flux.c.onService(testNS+"/webhook-receiver", nil)
	require.NoError(t, err)
	assert.Zero(t, enqueues(flux), "a Service of no source")
}

func TestEqualExceptRevision(t *testing.T) {
	rev := "deployment.kubernetes.io/revision"
	for _, c := range []struct {
		a, b map[string]string
		want bool
	}{
		{nil, nil, true},
		{map[string]string{rev: "1"}, nil, true},
		{map[string]string{"x": "1", rev: "1"}, map[string]string{"x": "1", rev: "2"}, true},
		{map[string]string{"x": "1"}, map[string]string{"x": "2"}, false},
		{map[string]string{"x": "1", rev: "1"}, map[string]string{"x": "1", "y": "1"}, false},
		{map[string]string{"x": "1"}, map[string]string{rev: "1", "y": "1"}, false},
	} {
		assert.Equal(t, c.want, equalExceptRevision(c.a, c.b), "%v vs %v", c.a, c.b)
		assert.Equal(t, c.want, equalExceptRevision(c.b, c.a), "%v vs %v", c.b, c.a)
	}
}
