package stamp

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/shardkeeper/shardkeeper/pkg/render"
)

// countingMaps counts the requests that reach the fake clientset.
type countingMaps struct {
	configMaps
	gets, writes int
}

func (c *countingMaps) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.ConfigMap, error) {
	c.gets++
	return c.configMaps.Get(ctx, name, opts)
}

func (c *countingMaps) Create(ctx context.Context, cm *corev1.ConfigMap, opts metav1.CreateOptions) (*corev1.ConfigMap, error) {
	c.writes++
	return c.configMaps.Create(ctx, cm, opts)
}

func (c *countingMaps) Update(ctx context.Context, cm *corev1.ConfigMap, opts metav1.UpdateOptions) (*corev1.ConfigMap, error) {
	c.writes++
	return c.configMaps.Update(ctx, cm, opts)
}

func TestPublishWritesOnlyChanges(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	maps := &countingMaps{configMaps: client.CoreV1().ConfigMaps("ns")}
	clock := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	p := &Publisher{client: maps, name: Name("shardkeeper"), now: func() time.Time { return clock }}

	require.NoError(t, p.Publish(ctx, map[string]string{KeyNext: "a"}))
	cm, err := client.CoreV1().ConfigMaps("ns").Get(ctx, "shardkeeper-stamp", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{KeyNext: "a"}, cm.Data)
	assert.Equal(t, render.ManagedByValue, cm.Labels[render.ManagedByLabel])

	require.NoError(t, p.Publish(ctx, map[string]string{KeyNext: "a"}))
	assert.Equal(t, [2]int{1, 1}, [2]int{maps.gets, maps.writes}, "the same records again: no request at all")

	require.NoError(t, p.Publish(ctx, map[string]string{KeyNext: "b", "namespace.x": "a"}))
	assert.Equal(t, 2, maps.writes)
	cm, err = client.CoreV1().ConfigMaps("ns").Get(ctx, "shardkeeper-stamp", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{KeyNext: "b", "namespace.x": "a"}, cm.Data)

	// Someone else edits the records; the daemon's own do not change. Once
	// its copy is old enough, it reads the ConfigMap again and puts them
	// back.
	cm.Data[KeyNext] = "tampered"
	_, err = client.CoreV1().ConfigMaps("ns").Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	clock = clock.Add(recheckAfter - time.Second)
	require.NoError(t, p.Publish(ctx, map[string]string{KeyNext: "b", "namespace.x": "a"}))
	assert.Equal(t, [2]int{1, 2}, [2]int{maps.gets, maps.writes}, "within recheckAfter: no request")
	clock = clock.Add(time.Second)
	require.NoError(t, p.Publish(ctx, map[string]string{KeyNext: "b", "namespace.x": "a"}))
	assert.Equal(t, [2]int{2, 3}, [2]int{maps.gets, maps.writes})
	cm, err = client.CoreV1().ConfigMaps("ns").Get(ctx, "shardkeeper-stamp", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "b", cm.Data[KeyNext], "the daemon's records are back")
}

func TestPublishOverwritesOtherWriters(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "shardkeeper-stamp", Namespace: "ns"},
		Data: map[string]string{KeyNext: "someone-elses"}})
	p := NewPublisher(client.CoreV1(), "ns", "shardkeeper")
	require.NoError(t, p.Publish(ctx, map[string]string{KeyNext: "a"}), "an existing ConfigMap is read, then updated")

	// Someone edits it behind the daemon's back: the stale update is
	// refused, and the next publish reads it again and puts the daemon's
	// records back.
	cm, err := client.CoreV1().ConfigMaps("ns").Get(ctx, "shardkeeper-stamp", metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data[KeyNext] = "tampered"
	cm.ResourceVersion = "999"
	_, err = client.CoreV1().ConfigMaps("ns").Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	p.last.ResourceVersion = "1" // what the daemon saw before the edit
	client.PrependReactor("update", "configmaps", conflictOnStaleVersion(client))
	require.Error(t, p.Publish(ctx, map[string]string{KeyNext: "b"}))
	require.NoError(t, p.Publish(ctx, map[string]string{KeyNext: "b"}))
	cm, err = client.CoreV1().ConfigMaps("ns").Get(ctx, "shardkeeper-stamp", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "b", cm.Data[KeyNext])
}

// conflictOnStaleVersion refuses an update whose resourceVersion is not
// the stored one, as the API server does.
func conflictOnStaleVersion(client *fake.Clientset) clienttesting.ReactionFunc {
	return func(action clienttesting.Action) (bool, runtime.Object, error) {
		cm := action.(clienttesting.UpdateAction).GetObject().(*corev1.ConfigMap)
		stored, err := client.Tracker().Get(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, action.GetNamespace(), cm.Name)
		if err != nil {
			return true, nil, err
		}
		if stored.(*corev1.ConfigMap).ResourceVersion != cm.ResourceVersion {
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, cm.Name, errors.New("stale"))
		}
		return false, nil, nil
	}
}

// policyAnswers makes the fake API server answer a dry-run create of the
// probe as the chart's policy of each label in rvs would: with the
// resourceVersion of the stamp ConfigMap it applies. A label absent from
// rvs has no policy.
func policyAnswers(client *fake.Clientset, rvs map[string]string) *[]metav1.CreateOptions {
	var seen []metav1.CreateOptions
	client.PrependReactor("create", "configmaps", func(a clienttesting.Action) (bool, runtime.Object, error) {
		create := a.(clienttesting.CreateActionImpl)
		cm := create.GetObject().(*corev1.ConfigMap).DeepCopy()
		if cm.Name != ProbeName("shardkeeper") {
			return false, nil, nil
		}
		seen = append(seen, create.CreateOptions)
		if rv, ok := rvs[cm.Annotations[AnnotationProbe]]; ok {
			cm.Annotations[AnnotationParams] = rv
		}
		return true, cm, nil
	})
	return &seen
}

// versions makes the fake API server give every write of the stamp
// ConfigMap a new resourceVersion, as a real one does.
func versions(client *fake.Clientset) {
	n := 0
	for _, verb := range []string{"create", "update"} {
		client.PrependReactor(verb, "configmaps", func(a clienttesting.Action) (bool, runtime.Object, error) {
			cm := a.(interface{ GetObject() runtime.Object }).GetObject().(*corev1.ConfigMap)
			if cm.Name == Name("shardkeeper") {
				n++
				cm.ResourceVersion = strconv.Itoa(n)
			}
			return false, nil, nil
		})
	}
}

func TestConfirmAsksEveryPolicyInADryRun(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	versions(client)
	p := NewPublisher(client.CoreV1(), "ns", "shardkeeper")
	labels := []string{"fleet.cattle.io/shard-ref", "sharding.fluxcd.io/key"}

	require.ErrorContains(t, p.Confirm(ctx, labels), "not written yet", "nothing to confirm before the records are written")

	require.NoError(t, p.Publish(ctx, map[string]string{KeyNext: "a"}))
	written := p.last.ResourceVersion
	answers := map[string]string{"fleet.cattle.io/shard-ref": written, "sharding.fluxcd.io/key": "older"}
	seen := policyAnswers(client, answers)

	err := p.Confirm(ctx, labels)
	require.ErrorContains(t, err, `the admission policy that stamps sharding.fluxcd.io/key still applies the stamp ConfigMap shardkeeper-stamp at resourceVersion "older"`)
	require.Len(t, *seen, 2)
	for _, opts := range *seen {
		assert.Equal(t, []string{metav1.DryRunAll}, opts.DryRun, "the probe is never created")
	}

	delete(answers, "sharding.fluxcd.io/key")
	require.ErrorContains(t, p.Confirm(ctx, labels), "did not answer")

	answers["sharding.fluxcd.io/key"] = written
	require.NoError(t, p.Confirm(ctx, labels))
	asked := len(*seen)
	require.NoError(t, p.Confirm(ctx, labels))
	assert.Len(t, *seen, asked, "the same records confirmed once: no request")

	require.NoError(t, p.Publish(ctx, map[string]string{KeyNext: "b"}))
	require.ErrorContains(t, p.Confirm(ctx, labels), "not yet", "new records are confirmed anew")
}
