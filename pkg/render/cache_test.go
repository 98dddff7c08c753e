package render

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
	"github.com/shardkeeper/shardkeeper/pkg/source"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

// cached returns a fleet preset's source, its live Deployment as read from
// the API server (with a UID and a resourceVersion), and an empty Cache.
func cached(t *testing.T, name string) (source.Source, *appsv1.Deployment, *Cache) {
	t.Helper()
	live := map[string]*appsv1.Deployment{
		"fleet-controller": testfixture.FleetController("cattle-fleet-system"),
		"gitjob":           testfixture.Gitjob("cattle-fleet-system"),
	}[name]
	require.NotNil(t, live, name)
	live.UID, live.ResourceVersion = "uid-"+types.UID(name), "10"
	return sources(t, "fleet")[name], live, NewCache()
}

func TestCacheRender(t *testing.T) {
	src, live, c := cached(t, "fleet-controller")

	a, err := c.Render(src, live, shardconfig.Shard{ID: "a"})
	require.NoError(t, err)
	again, err := c.Render(src, live, shardconfig.Shard{ID: "a"})
	require.NoError(t, err)
	assert.Same(t, a, again, "same source version and settings: remembered")
	want, err := Render(src, live, shardconfig.Shard{ID: "a"})
	require.NoError(t, err)
	assert.Equal(t, want, a)

	more, err := c.Render(src, live, shardconfig.Shard{ID: "a", Replicas: ptr.To[int32](3)})
	require.NoError(t, err)
	assert.NotSame(t, a, more, "other settings")
	assert.Equal(t, int32(3), *more.Spec.Replicas)

	changed := live.DeepCopy()
	changed.ResourceVersion = "11"
	changed.Spec.Template.Spec.Containers[0].Image = "rancher/fleet:next"
	next, err := c.Render(src, changed, shardconfig.Shard{ID: "a"})
	require.NoError(t, err)
	assert.Equal(t, "rancher/fleet:next", next.Spec.Template.Spec.Containers[0].Image, "a new source version renders again")

	unversioned := changed.DeepCopy()
	unversioned.ResourceVersion = ""
	x, err := c.Render(src, unversioned, shardconfig.Shard{ID: "a"})
	require.NoError(t, err)
	y, err := c.Render(src, unversioned, shardconfig.Shard{ID: "a"})
	require.NoError(t, err)
	assert.NotSame(t, x, y, "a source without a version is never remembered")

	var none *Cache
	d, err := none.Render(src, live, shardconfig.Shard{ID: "a"})
	require.NoError(t, err)
	assert.Equal(t, want, d, "a nil Cache renders")
}

// renderedA is gitjob's render for shard a through a new Cache, and a copy
// of it as the API server holds it (a UID, generation 1).
func renderedA(t *testing.T) (c *Cache, rendered, stored *appsv1.Deployment) {
	t.Helper()
	src, live, c := cached(t, "gitjob")
	rendered, err := c.Render(src, live, shardconfig.Shard{ID: "a"})
	require.NoError(t, err)
	stored = rendered.DeepCopy()
	stored.UID, stored.Generation = "uid-a", 1
	return c, rendered, stored
}

func TestCacheUpToDate(t *testing.T) {
	c, rendered, existing := renderedA(t)
	assert.True(t, c.UpToDate(rendered, existing))

	// A change of the spec comes with a new generation.
	edited := existing.DeepCopy()
	edited.Spec.Replicas = ptr.To[int32](5)
	edited.Generation = 2
	assert.False(t, c.UpToDate(rendered, edited))
	assert.False(t, deploymentUpToDate(rendered, edited))

	// The labels are checked on every call, as they change without one.
	relabelled := existing.DeepCopy()
	relabelled.Labels[ShardLabel] = "b"
	assert.False(t, c.UpToDate(rendered, relabelled))
	assert.True(t, c.UpToDate(rendered, existing))
}

func TestCacheSweep(t *testing.T) {
	src, live, c := cached(t, "gitjob")
	a, err := c.Render(src, live, shardconfig.Shard{ID: "a"})
	require.NoError(t, err)
	_, err = c.Render(src, live, shardconfig.Shard{ID: "b"})
	require.NoError(t, err)
	require.Equal(t, 2, c.size())

	c.Sweep() // both were used since the start
	require.Equal(t, 2, c.size())
	again, err := c.Render(src, live, shardconfig.Shard{ID: "a"})
	require.NoError(t, err)
	assert.Same(t, a, again)
	c.Sweep() // b was not used since the last sweep: a removed shard
	assert.Equal(t, 1, c.size())
	c.Sweep()
	assert.Equal(t, 0, c.size())
}

// What this process wrote is up to date at the generation the API server
// answered with, even where an admission webhook changed a rendered field:
// rewriting it would only bring the change back.
func TestCacheWroteIsUpToDate(t *testing.T) {
	c, rendered, written := renderedA(t)
	written.Spec.Template.Spec.Containers[0].Image = "mirror.example/rancher/fleet:x"
	require.False(t, deploymentUpToDate(rendered, written), "the answer differs from the render")

	c.Wrote(rendered, written)
	assert.True(t, c.UpToDate(rendered, written))

	// A change by hand comes with a new generation, compared again.
	edited := written.DeepCopy()
	edited.Generation = 2
	assert.False(t, c.UpToDate(rendered, edited))
	// So does another render (a new hash).
	other := rendered.DeepCopy()
	other.Annotations[SpecHashAnnotation] = "other"
	written.Annotations[SpecHashAnnotation] = "other"
	assert.False(t, c.UpToDate(other, written))

	var none *Cache
	none.Wrote(rendered, written) // a nil Cache remembers nothing
	fresh := NewCache()
	fresh.Wrote(rendered, &appsv1.Deployment{}) // an answer without a UID is no object
	fresh.Wrote(rendered, nil)
	assert.Zero(t, fresh.size())
}
