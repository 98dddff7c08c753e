package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/rancher/lasso/pkg/cache"
	"github.com/rancher/lasso/pkg/controller"
	"github.com/rancher/wrangler/v3/pkg/generated/controllers/apps"
	appscontrollers "github.com/rancher/wrangler/v3/pkg/generated/controllers/apps/v1"
	"github.com/rancher/wrangler/v3/pkg/generated/controllers/core"
	corecontrollers "github.com/rancher/wrangler/v3/pkg/generated/controllers/core/v1"
	"github.com/rancher/wrangler/v3/pkg/kubeconfig"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/shardkeeper/shardkeeper/pkg/mapped"
	"github.com/shardkeeper/shardkeeper/pkg/metrics"
	"github.com/shardkeeper/shardkeeper/pkg/mover"
	"github.com/shardkeeper/shardkeeper/pkg/probe"
	"github.com/shardkeeper/shardkeeper/pkg/shardset"
	"github.com/shardkeeper/shardkeeper/pkg/stamp"
	"github.com/shardkeeper/shardkeeper/pkg/status"
	"github.com/shardkeeper/shardkeeper/pkg/version"
)

// Daemon is shardkeeper with its clients, caches and controllers built, not
// yet started.
type Daemon struct {
	opts        *Options
	cfg         *rest.Config
	kube        kubernetes.Interface
	factories   map[string]controller.SharedControllerFactory
	tracker     *mapped.Tracker
	gc          *startupGC
	ctrl        *shardset.Controller
	mover       *mover.Mover
	broadcaster record.EventBroadcaster

	// leading: this process holds the Lease (or runs without election);
	// synced: its caches are filled.
	leading, synced atomic.Bool
}

// New builds the daemon from completed options. Nothing talks to the API
// server yet but discovery clients being set up.
func New(ctx context.Context, o *Options) (*Daemon, error) {
	cfg, err := kubeconfig.GetNonInteractiveClientConfig(o.kubeconfig).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(o.qps), o.burst
	// Protobuf for the built-in kinds: a shard set's writes and their watch
	// events cost a fraction of the CPU that JSON does. The dynamic client
	// (custom resources) speaks JSON whatever this says.
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	// From 1.37 the API server gzips an informer's watch, which streams the
	// initial list (WatchListCompression), one gzip member per event for as
	// long as the watch lasts: each watch event of a burst then costs a
	// compression in the API server and a decompressor set-up here, for a
	// few hundred bytes on a link that is rarely what holds an in-cluster
	// controller back.
	cfg.DisableCompression = !o.compression
	cfg.UserAgent = "shardkeeper/" + version.Version
	cfg.Wrap(metrics.CountWrites)
	d := &Daemon{opts: o, cfg: cfg, factories: map[string]controller.SharedControllerFactory{}}

	configMaps, deployments, services, err := d.controllers()
	if err != nil {
		return nil, err
	}
	if d.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("metadata client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}

	d.broadcaster = status.NewEventBroadcaster(ctx)
	d.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: d.kube.CoreV1().Events(o.namespace)})
	recorder := d.broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "shardkeeper"})

	if err := d.track(cfg, meta, disc); err != nil {
		return nil, err
	}
	// Every namespace's Deployments and Services are written through a
	// client of their own, each with its own rate limiter (lasso makes one
	// REST client per kind and factory): that many bursts go out at once.
	writers := len(o.set.Namespaces()) + len(o.set.ServiceNamespaces())
	opts := shardset.Options{ConfigMap: o.configMap(), Sources: o.set.Sources, WriteParallelism: o.burst * writers, References: d.tracker}
	if o.allowPlacement {
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("dynamic client: %w", err)
		}
		d.mover = mover.New(meta, dyn, o.set.Mapped, d.tracker, recorder)
		if o.stamp {
			d.mover.Stamp(stamp.NewPublisher(d.kube.CoreV1(), o.namespace, o.configMapName))
		}
		opts.Mover = d.mover
	}
	d.ctrl = shardset.Register(ctx, opts, configMaps, configMaps, deployments, services, d.tracker, recorder)
	return d, nil
}

// controllers builds the wrangler controllers: the shard ConfigMap's, and the
// Deployments' and Services' of the sources' namespaces.
func (d *Daemon) controllers() (corecontrollers.ConfigMapController, map[string]appscontrollers.DeploymentController, map[string]corecontrollers.ServiceController, error) {
	o := d.opts
	cf, err := d.coreFactory(o.namespace)
	if err != nil {
		return nil, nil, nil, err
	}
	deployments := map[string]appscontrollers.DeploymentController{}
	for _, ns := range o.set.Namespaces() {
		f, err := d.factoryFor(ns)
		if err != nil {
			return nil, nil, nil, err
		}
		af, err := apps.NewFactoryFromConfigWithOptions(d.cfg, &apps.FactoryOptions{SharedControllerFactory: f})
		if err != nil {
			return nil, nil, nil, fmt.Errorf("apps factory: %w", err)
		}
		deployments[ns] = af.Apps().V1().Deployment()
	}
	services := map[string]corecontrollers.ServiceController{}
	for _, ns := range o.set.ServiceNamespaces() {
		sf, err := d.coreFactory(ns)
		if err != nil {
			return nil, nil, nil, err
		}
		services[ns] = sf.Core().V1().Service()
	}
	return cf.Core().V1().ConfigMap(), deployments, services, nil
}

func (d *Daemon) coreFactory(ns string) (*core.Factory, error) {
	f, err := d.factoryFor(ns)
	if err != nil {
		return nil, err
	}
	cf, err := core.NewFactoryFromConfigWithOptions(d.cfg, &core.FactoryOptions{SharedControllerFactory: f})
	if err != nil {
		return nil, fmt.Errorf("core factory: %w", err)
	}
	return cf, nil
}

// factoryFor returns the controller factory of ns. There is one per
// namespace because the daemon's rights are Roles in those namespaces, so
// every informer is namespaced; in the ConfigMap's namespace, ConfigMaps
// are watched through a field selector on the shard ConfigMap's name.
func (d *Daemon) factoryFor(ns string) (controller.SharedControllerFactory, error) {
	if f, ok := d.factories[ns]; ok {
		return f, nil
	}
	cm := d.opts.configMap()
	opts := &cache.SharedCacheFactoryOptions{DefaultNamespace: ns, KindTweakList: map[schema.GroupVersionKind]cache.TweakListOptionsFunc{}}
	if ns == cm.Namespace {
		opts.KindTweakList[corev1.SchemeGroupVersion.WithKind("ConfigMap")] = func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", cm.Name).String()
		}
	}
	f, err := controller.NewSharedControllerFactoryFromConfigWithOptions(d.cfg, scheme.Scheme, &controller.SharedControllerFactoryOptions{CacheOptions: opts})
	if err != nil {
		return nil, fmt.Errorf("controller factory for %s: %w", ns, err)
	}
	d.factories[ns] = f
	return f, nil
}

// track builds the caches of the mapped objects, and the collector's
// pacing that follows how far they have come.
func (d *Daemon) track(cfg *rest.Config, meta metadata.Interface, disc discovery.DiscoveryInterface) error {
	d.tracker = mapped.New(meta, disc, d.opts.set.Mapped, d.mappedChanged)
	d.tracker.SetInitialList(d.opts.initialList)
	d.gc = newStartupGC(d.tracker.Synced)
	// The kinds that derive objects or refer to sources are read whole, for
	// the cross-shard warnings; the others metadata-only.
	read := d.tracker.ReadThrough
	if d.opts.mappedReader == readerStock {
		read = d.tracker.ReadStock
	}
	if err := read(cfg); err != nil {
		return fmt.Errorf("mapped objects: %w", err)
	}
	return nil
}

// mappedChanged is called by the mapped-object caches once they run.
func (d *Daemon) mappedChanged() {
	d.gc.changed()
	d.ctrl.MappedChanged()
	if d.mover != nil {
		d.mover.Wake()
	}
}

// Run serves the probes and metrics and runs the controllers until ctx
// ends: at once, or, with leader election, while this process leads.
func (d *Daemon) Run(ctx context.Context) error {
	defer d.broadcaster.Shutdown()
	if err := probe.Serve(ctx, d.opts.probeAddr, probe.Handler(d.ready)); err != nil {
		return err
	}
	if err := probe.Serve(ctx, d.opts.metricsAddr, probe.MetricsHandler(metrics.Registry, d.opts.profiling)); err != nil {
		return err
	}
	logrus.WithFields(logrus.Fields{"version": version.Version, "leaderElect": d.opts.leaderElect}).Info("shardkeeper started")
	if d.opts.leaderElect {
		return elect(ctx, d.kube, d.opts, d.start)
	}
	if err := d.start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	logrus.Info("shutting down")
	return nil
}

// start starts the caches and the controllers. Every namespace's cache is
// filled before any handler runs: a reconcile that saw one namespace's
// Deployments and not another's would report shards as half there.
func (d *Daemon) start(ctx context.Context) error {
	d.leading.Store(true)
	metrics.Leader.Set(1)
	d.gc.start(ctx)
	if err := d.tracker.Start(ctx); err != nil {
		return err
	}
	for ns, f := range d.factories {
		if err := f.SharedCacheFactory().Start(ctx); err != nil {
			return fmt.Errorf("starting caches in %s: %w", ns, err)
		}
	}
	if err := d.waitForCaches(ctx); err != nil {
		if ctx.Err() != nil {
			return nil //nolint:nilerr // shutting down while the caches fill is no failure
		}
		return err
	}
	d.synced.Store(true)
	for ns, f := range d.factories {
		if err := f.Start(ctx, 1); err != nil {
			return fmt.Errorf("starting controllers in %s: %w", ns, err)
		}
	}
	d.ctrl.Started()
	if d.mover != nil {
		go d.mover.Run(ctx)
	}
	logrus.WithFields(logrus.Fields{"configmap": d.opts.configMap().String(), "sources": len(d.opts.set.Sources),
		"mappedKinds": len(d.opts.set.Mapped)}).Info("controllers started")
	return nil
}

// waitForCaches waits until every namespace's caches are filled, for at
// most --cache-sync-timeout: a cache that cannot fill, for want of a Role
// in its namespace, would otherwise hold readiness off for good with no
// more than client-go's retries in the log.
func (d *Daemon) waitForCaches(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, d.opts.cacheSyncTimeout)
	defer cancel()
	var unsynced []string
	for ns, f := range d.factories {
		for gvk, ok := range f.SharedCacheFactory().WaitForCacheSync(ctx) {
			if !ok {
				unsynced = append(unsynced, gvk.Kind+" in "+ns)
			}
		}
	}
	if len(unsynced) == 0 {
		return nil
	}
	slices.Sort(unsynced)
	return fmt.Errorf("caches of %s did not sync within %s: can the daemon list and watch them there?",
		strings.Join(unsynced, ", "), d.opts.cacheSyncTimeout)
}

// ready is /readyz: caches synced and a reconcile done, or a healthy
// standby.
func (d *Daemon) ready() error {
	if d.opts.leaderElect && !d.leading.Load() {
		return nil
	}
	if !d.synced.Load() {
		return errors.New("caches have not synced")
	}
	return d.ctrl.Ready()
}
