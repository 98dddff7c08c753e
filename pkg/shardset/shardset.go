// Package shardset is the controller that keeps the per-shard controller
// Deployments in step with the shard ConfigMap. Every change that can matter
// (the ConfigMap, a source or shard Deployment, a mapped object) is brought
// back to one reconcile of the whole shard set, keyed by the ConfigMap. The
// reconcile reads the caches, has pkg/plan decide, writes what it decided,
// and reports the status; it hands placement its part of the decision
// through the types of pkg/placement.
//
// It is the daemon's own: not a supported API, and it may change in any
// release.
package shardset

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appscontrollers "github.com/rancher/wrangler/v3/pkg/generated/controllers/apps/v1"
	corecontrollers "github.com/rancher/wrangler/v3/pkg/generated/controllers/core/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/shardkeeper/shardkeeper/pkg/crossref"
	"github.com/shardkeeper/shardkeeper/pkg/expect"
	"github.com/shardkeeper/shardkeeper/pkg/placement"
	"github.com/shardkeeper/shardkeeper/pkg/plan"
	"github.com/shardkeeper/shardkeeper/pkg/render"
	"github.com/shardkeeper/shardkeeper/pkg/source"
	"github.com/shardkeeper/shardkeeper/pkg/status"
)

// mappedDelay batches bursts of mapped-object changes (a bulk relabel, the
// initial list) into one reconcile.
const mappedDelay = 500 * time.Millisecond

// rolloutDelay batches the reconciles that shard Deployments' status
// changes bring: while 100 new shards roll out, each of their hundreds of
// Deployments becomes available at its own moment, and each would
// otherwise decide the whole shard set again. Nothing waits on them
// sooner: the status is written once a second at most, and failover
// counts minutes.
const rolloutDelay = 500 * time.Millisecond

// statusInterval is the least time between two status writes: while 100
// new shards roll out, their Deployments' status changes bring hundreds of
// reconciles, and each shard turning Active would otherwise be a write of
// its own. A change within the interval is written once it has passed.
const statusInterval = time.Second

// defaultWriteParallelism bounds the writes in flight at once when
// Options.WriteParallelism is not set: the client's default burst.
const defaultWriteParallelism = 300

// Options are what Register takes besides the clients: the ConfigMap, the
// sources, and where placement's input goes.
type Options struct {
	// ConfigMap is the shard ConfigMap; its status is "<name>-status".
	ConfigMap types.NamespacedName
	// Sources are the controllers cloned for every shard.
	Sources []source.Source
	// Mover receives what placement needs after every reconcile, and the
	// new targets before a removal is confirmed (see confirmRemovals),
	// with confirm set when the plan deletes a shard: it then answers
	// whether new objects can still be born on a shard it withdrew. Nil
	// when placement is not allowed, and a placement key is then refused.
	Mover interface {
		Set(placement.State)
		Restrict(ctx context.Context, targets []string, confirm bool) error
	}
	// WriteParallelism bounds the writes in flight at once. The clients'
	// bursts, summed, are the right value: their rate limiters let that
	// many requests through at once and pace the rest at their QPS, so
	// more would only wait in the limiters, and fewer would hold a shard
	// set of the usual sizes back by a round trip.
	WriteParallelism int
	// References, when set, finds the objects whose derived objects or
	// sources are on another shard than the one that needs them, for the
	// status's warnings; nil checks none.
	References interface {
		CrossShard() []crossref.Crossed
	}
}

// Controller reconciles the shard set.
type Controller struct {
	// ctx is the daemon's: the API server reads of a reconcile end with
	// it, so that shutdown does not wait for them. wrangler's handlers
	// take no context of their own.
	ctx        context.Context
	opts       Options
	configMaps shardConfigMap
	statusMaps statusStore
	// deployments and services are keyed by namespace: a write goes
	// through the client of the namespace of the object it writes.
	deployments map[string]deploymentAccess
	services    map[string]serviceAccess
	mapped      mappedObjects
	recorder    record.EventRecorder

	// statusMu guards the three fields below. Only report takes it, and
	// holds it across the status ConfigMap's requests, so that mu, which
	// the parallel writers take, never waits on one.
	statusMu sync.Mutex
	// reported is what the status ConfigMap says, nil until read (again
	// after a failed write).
	reported *reportedStatus
	// seen is the last status decided, written or not: the Events are
	// derived from its changes. It is nil until the status ConfigMap has
	// been read once, and is not read again: a failed write must not bring
	// back, as news, changes whose Events were emitted.
	seen *status.Status
	// lastStatusWrite paces the status writes.
	lastStatusWrite time.Time

	// stampWaits paces the rechecks of a removal that waits for the
	// stamp. Only the reconcile uses it, and the workqueue never runs two
	// reconciles of the one key at once.
	stampWaits stampWaits

	mu sync.Mutex
	// now is the clock of the pacing and of failover; tests set it.
	now func() time.Time
	// availability is what this process has seen of the shards'
	// Deployments, for failover; it starts empty with the process, so a
	// new leader waits a full failoverAfter before it calls a shard down.
	availability plan.Availability
	// writes are this process's writes that its caches have not shown
	// yet: a reconcile waits for them rather than send them again.
	writes *expect.Writes
	// forceDeleted are the shards this process force-deleted.
	forceDeleted map[string]bool
	// announce are the Events of writes made, held until the caches show
	// the writes (see announceSeen).
	announce []announcement
	// renders are the decisions' renders, remembered between them.
	renders *render.Cache
	// sigs are the relevant Deployments as decisions read them, so that
	// a change they do not read brings no reconcile.
	sigs deploymentSigs

	// started: the controllers run, so enqueued keys are processed.
	started atomic.Bool
	// reconciled: a reconcile has completed without error.
	reconciled atomic.Bool
	// mappedSynced: MappedChanged has seen every mapped kind synced.
	mappedSynced atomic.Bool
}

// Register wires the controller: the ConfigMap handler, and the Deployment
// and Service handlers of every source namespace (keyed by namespace in
// deployments and services), which bring changes of the sources and of the
// shards' copies back to the ConfigMap. Each namespace's Deployment and
// Service controllers are also the cache and the client for the objects of
// that namespace.
func Register(ctx context.Context, opts Options,
	configMaps corecontrollers.ConfigMapController,
	statusMaps corecontrollers.ConfigMapClient,
	deployments map[string]appscontrollers.DeploymentController,
	services map[string]corecontrollers.ServiceController,
	mapped mappedObjects,
	recorder record.EventRecorder,
) *Controller {
	deploymentsByNS := make(map[string]deploymentAccess, len(deployments))
	for ns, dc := range deployments {
		deploymentsByNS[ns] = deploymentAccess{cache: dc.Cache(), client: dc, live: dc}
	}
	servicesByNS := make(map[string]serviceAccess, len(services))
	for ns, sc := range services {
		// No live read: nothing but their owner writes the metrics
		// Services, so their deletes never race a status update, and the
		// daemon is granted no get on Services.
		servicesByNS[ns] = serviceAccess{cache: sc.Cache(), client: sc}
	}
	c := newController(opts, configMaps, statusMaps, deploymentsByNS, servicesByNS, mapped, recorder)
	c.ctx = ctx
	for _, dc := range deployments {
		dc.OnChange(ctx, "shardkeeper-deployment", c.onDeployment)
	}
	for _, sc := range services {
		sc.OnChange(ctx, "shardkeeper-service", c.onService)
	}
	configMaps.OnChange(ctx, "shardkeeper-shards", c.onConfigMap)
	return c
}

// newController builds the Controller from the narrow interfaces, without
// wiring any handler: Register wires them, the tests call it with fakes.
// deployments and services are keyed by namespace.
func newController(opts Options,
	configMaps shardConfigMap,
	statusMaps statusStore,
	deployments map[string]deploymentAccess,
	services map[string]serviceAccess,
	mapped mappedObjects,
	recorder record.EventRecorder,
) *Controller {
	return &Controller{
		ctx:          context.Background(),
		opts:         opts,
		configMaps:   configMaps,
		statusMaps:   statusMaps,
		deployments:  deployments,
		services:     services,
		mapped:       mapped,
		recorder:     recorder,
		forceDeleted: map[string]bool{},
		writes:       expect.New(expect.DefaultTTL),
		renders:      render.NewCache(),
		now:          time.Now,
	}
}

func (c *Controller) enqueue() {
	c.configMaps.Enqueue(c.opts.ConfigMap.Namespace, c.opts.ConfigMap.Name)
}

// onDeployment enqueues the shard set when a source or a possible shard
// Deployment changes in what decisions read of it, after rolloutDelay when
// only its status did; the other Deployments of the namespace, and the
// status updates that change nothing read, are ignored. A deleted one arrives as nil, with its key only: it counts if
// it was seen (a managed copy under a name no source's prefix matches,
// such as a legacy one) or if its name is relevant.
func (c *Controller) onDeployment(key string, d *appsv1.Deployment) (*appsv1.Deployment, error) {
	ns, name, _ := strings.Cut(key, "/")
	if d == nil {
		if c.sigs.forget(key) || c.relevant(ns, name) {
			c.enqueue()
		}
		return d, nil
	}
	if !render.IsManaged(d) && !c.relevant(ns, name) {
		return d, nil
	}
	switch c.sigs.changed(key, d) {
	case sigObject:
		c.enqueue()
	case sigStatus:
		c.configMaps.EnqueueAfter(c.opts.ConfigMap.Namespace, c.opts.ConfigMap.Name, rolloutDelay)
	case sigSame:
	}
	return d, nil
}

// relevant reports whether a Deployment so named is a source or could be
// one's copy: the source's name, or its copies' prefix (Fleet's
// "-shard-", Flux's "-"), or the prefix of an earlier release's names.
func (c *Controller) relevant(namespace, name string) bool {
	for _, s := range c.opts.Sources {
		if namespace != s.Namespace {
			continue
		}
		legacy := s.LegacyCloneName("")
		if name == s.Name || strings.HasPrefix(name, s.CloneName("")) || (legacy != "" && strings.HasPrefix(name, legacy)) {
			return true
		}
	}
	return false
}

// onService enqueues the shard set when a source's metrics Service or a
// possible shard copy of one changes.
func (c *Controller) onService(key string, svc *corev1.Service) (*corev1.Service, error) {
	ns, name, _ := strings.Cut(key, "/")
	for _, s := range c.opts.Sources {
		if s.MetricsService != "" && ns == s.Namespace && (name == s.MetricsService || strings.HasPrefix(name, s.ServiceCloneName(""))) {
			c.enqueue()
			break
		}
	}
	return svc, nil
}

// statusName is the status ConfigMap's name.
func (c *Controller) statusName() string { return c.opts.ConfigMap.Name + "-status" }

type reportedStatus struct {
	status          status.Status
	data            map[string]string
	exists          bool
	resourceVersion string
}

// MappedChanged is the callback for mapped-object changes: a delayed
// enqueue, so that a burst of changes (a bulk relabel, the initial list) is
// one reconcile. The call that first finds every kind synced enqueues at
// once: its reconcile is the first that may report the counts and delete
// a shard, and no burst follows an initial list. Before Started it does
// nothing: the first reconcile reads every count anyway, and keys queued
// before the start would pile up.
func (c *Controller) MappedChanged() {
	if !c.started.Load() {
		return
	}
	if c.mapped.Synced() && c.mappedSynced.CompareAndSwap(false, true) {
		c.enqueue()
		return
	}
	c.configMaps.EnqueueAfter(c.opts.ConfigMap.Namespace, c.opts.ConfigMap.Name, mappedDelay)
}

// Started is called once the controllers run. It enqueues the first
// reconcile, which also runs when the ConfigMap does not exist.
func (c *Controller) Started() {
	c.started.Store(true)
	c.enqueue()
}

// Ready reports an error until a reconcile has completed without error.
func (c *Controller) Ready() error {
	if !c.reconciled.Load() {
		return errors.New("the shard set has not been reconciled yet")
	}
	return nil
}
