package daemon

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rancher/lasso/pkg/cache"
	"github.com/rancher/lasso/pkg/controller"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/shardkeeper/shardkeeper/pkg/mapped"
)

// fakeFactory is a namespace's controller factory whose caches fill, or
// never do, as synced says.
type fakeFactory struct {
	controller.SharedControllerFactory
	caches fakeCaches
}

func (f fakeFactory) SharedCacheFactory() cache.SharedCacheFactory { return f.caches }

func (fakeFactory) Start(context.Context, int) error {
	return errors.New("controllers started before their caches synced")
}

type fakeCaches struct {
	cache.SharedCacheFactory
	synced map[schema.GroupVersionKind]bool
}

func (fakeCaches) Start(context.Context) error { return nil }

// WaitForCacheSync waits, as lasso's does, until the caches are filled or
// ctx ends.
func (c fakeCaches) WaitForCacheSync(ctx context.Context) map[schema.GroupVersionKind]bool {
	out := map[schema.GroupVersionKind]bool{}
	for gvk, ok := range c.synced {
		if !ok {
			<-ctx.Done()
		}
		out[gvk] = ok
	}
	return out
}

// daemonWithCaches is a Daemon whose Deployments cache in
// cattle-fleet-system never fills, for want of a Role there.
func daemonWithCaches() *Daemon {
	deployments := appsv1.SchemeGroupVersion.WithKind("Deployment")
	services := corev1.SchemeGroupVersion.WithKind("Service")
	return &Daemon{
		opts:    &Options{cacheSyncTimeout: 100 * time.Millisecond},
		tracker: mapped.New(nil, nil, nil, func() {}),
		gc:      quietGC(),
		factories: map[string]controller.SharedControllerFactory{
			"cattle-fleet-system": fakeFactory{caches: fakeCaches{synced: map[schema.GroupVersionKind]bool{deployments: false, services: true}}},
			"flux-system":         fakeFactory{caches: fakeCaches{synced: map[schema.GroupVersionKind]bool{deployments: true}}},
		},
	}
}

func TestStartFailsOnACacheThatDoesNotSync(t *testing.T) {
	d := daemonWithCaches()
	// Long enough to stand for a start that hangs.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()

	start := time.Now()
	err := d.start(ctx)

	require.EqualError(t, err, "caches of Deployment in cattle-fleet-system did not sync within 100ms: can the daemon list and watch them there?")
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.False(t, d.synced.Load())
	assert.EqualError(t, d.ready(), "caches have not synced")
}

func TestShutdownWhileCachesSyncIsNoFailure(t *testing.T) {
	d := daemonWithCaches()
	d.opts.cacheSyncTimeout = time.Minute
	ctx, cancel := context.WithCancel(t.Context())
	cancel()

	require.NoError(t, d.start(ctx))
	assert.False(t, d.synced.Load())
}

// quietGC is a startupGC that leaves the test binary's collector alone.
func quietGC() *startupGC {
	g := newStartupGC(func() bool { return false })
	g.lower = func() (func(), func()) { return func() {}, func() {} }
	return g
}
