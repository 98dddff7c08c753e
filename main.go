// Command shardkeeper keeps the per-shard controller Deployments of Fleet
// and Flux in step with a ConfigMap that lists the shard IDs, and refuses to
// delete a shard that still has objects mapped to it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/shardkeeper/shardkeeper/pkg/mapped"
	"github.com/shardkeeper/shardkeeper/pkg/metrics"
	"github.com/shardkeeper/shardkeeper/pkg/placer"
	"github.com/shardkeeper/shardkeeper/pkg/probe"
	"github.com/shardkeeper/shardkeeper/pkg/shardset"
	"github.com/shardkeeper/shardkeeper/pkg/source"
	"github.com/shardkeeper/shardkeeper/pkg/statuscmd"
	"github.com/shardkeeper/shardkeeper/pkg/version"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	if err := run(); err != nil {
		logrus.WithError(err).Error("shardkeeper failed")
		os.Exit(1)
	}
}

func run() error {
	defaultNS := os.Getenv("POD_NAMESPACE")
	if defaultNS == "" {
		defaultNS = "cattle-fleet-system"
	}
	if len(os.Args) > 1 && os.Args[1] == "status" {
		return statuscmd.Run(os.Args[2:], defaultNS, os.Stdout)
	}
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage:\n  shardkeeper [flags]          run the daemon\n  shardkeeper status [-o table|wide|yaml|json] [-n NAMESPACE] [--configmap NAME]\n\nFlags:\n")
		flag.PrintDefaults()
	}
	var (
		kubeconfigPath = flag.String("kubeconfig", "", "kubeconfig file (default $KUBECONFIG, else the in-cluster config)")
		namespace      = flag.String("namespace", defaultNS, "namespace of the shard ConfigMap (default $POD_NAMESPACE, else cattle-fleet-system)")
		configMap      = flag.String("configmap", "shardkeeper", "name of the shard ConfigMap; its status goes to <name>-status")
		presets        = flag.String("preset", source.PresetFleet, "controllers cloned for every shard: fleet, flux, or fleet,flux; empty for none")
		fleetNS        = flag.String("fleet-namespace", "cattle-fleet-system", "namespace of Fleet's fleet-controller, gitjob and helmops")
		fluxNS         = flag.String("flux-namespace", "flux-system", "namespace of Flux's helm-controller")
		qps            = flag.Float64("kube-api-qps", 50, "client requests per second to the API server")
		burst          = flag.Int("kube-api-burst", 300, "client request burst to the API server")
		logLevel       = flag.String("log-level", "info", "log level: debug, info, warn, error")
		logFormat      = flag.String("log-format", "text", "log format: text or json")
		leaderElect    = flag.Bool("leader-elect", false, "elect a leader on a Lease, so that only one of several replicas writes")
		leaderNS       = flag.String("leader-election-namespace", "", "namespace of the Lease (default: --namespace)")
		leaseDuration  = flag.Duration("leader-elect-lease-duration", 15*time.Second, "how long a standby waits before it takes over a Lease that was not renewed")
		renewDeadline  = flag.Duration("leader-elect-renew-deadline", 10*time.Second, "how long the leader retries renewing before it gives up leadership")
		retryPeriod    = flag.Duration("leader-elect-retry-period", 2*time.Second, "how often candidates try to acquire or renew the Lease")
		metricsAddr    = flag.String("metrics-bind-address", ":8080", "address of the Prometheus /metrics endpoint; 0 disables it")
		probeAddr      = flag.String("health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints; 0 disables them")
		showVersion    = flag.Bool("version", false, "print the version and exit")
		allowPlacement = flag.Bool("allow-placement", false, "let a \"placement\" key in the ConfigMap relabel the mapped objects (needs patch on them)")
		custom, mapKs  listFlag
		svcFlags, reqs listFlag
	)
	flag.Var(&custom, "source", "another controller to clone, repeatable: NAMESPACE/NAME[:CONTAINER]=--flag=...{shard}...")
	flag.Var(&svcFlags, "source-metrics-service", "the metrics Service of a source, copied for every shard, repeatable: NAMESPACE/NAME=SERVICE")
	flag.Var(&reqs, "source-required-arg", "an argument a source's main controller must run with before its shard copies are created, repeatable: NAMESPACE/NAME=--flag=value")
	flag.Var(&mapKs, "mapped-kind", "a kind whose label maps objects to shards, repeatable: RESOURCE.VERSION.GROUP=LABEL (default: the presets' kinds)")
	flag.Parse()

	if *showVersion {
		fmt.Println(version.Version)
		return nil
	}
	if err := setupLogging(*logLevel, *logFormat); err != nil {
		return err
	}
	set, err := source.Build(source.Options{
		Presets:         strings.Split(*presets, ","),
		FleetNamespace:  *fleetNS,
		FluxNamespace:   *fluxNS,
		Custom:          custom,
		Mapped:          mapKs,
		MetricsServices: svcFlags,
		RequiredArgs:    reqs,
	})
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	cfg, err := kubeconfig.GetNonInteractiveClientConfig(*kubeconfigPath).ClientConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(*qps), *burst
	cfg.UserAgent = "shardkeeper/" + version.Version
	cfg.Wrap(metrics.CountWrites)

	ref := types.NamespacedName{Namespace: *namespace, Name: *configMap}
	cmGVK := corev1.SchemeGroupVersion.WithKind("ConfigMap")

	// One controller factory per namespace: the daemon's rights are Roles in
	// those namespaces, so every informer is namespaced.
	factories := map[string]controller.SharedControllerFactory{}
	factoryFor := func(ns string) (controller.SharedControllerFactory, error) {
		if f, ok := factories[ns]; ok {
			return f, nil
		}
		opts := &cache.SharedCacheFactoryOptions{DefaultNamespace: ns, KindTweakList: map[schema.GroupVersionKind]cache.TweakListOptionsFunc{}}
		if ns == ref.Namespace {
			opts.KindTweakList[cmGVK] = func(o *metav1.ListOptions) {
				o.FieldSelector = fields.OneTermEqualSelector("metadata.name", ref.Name).String()
			}
		}
		f, err := controller.NewSharedControllerFactoryFromConfigWithOptions(cfg, scheme.Scheme, &controller.SharedControllerFactoryOptions{CacheOptions: opts})
		if err != nil {
			return nil, fmt.Errorf("controller factory for %s: %w", ns, err)
		}
		factories[ns] = f
		return f, nil
	}

	cmFactory, err := factoryFor(ref.Namespace)
	if err != nil {
		return err
	}
	coreFactory, err := core.NewFactoryFromConfigWithOptions(cfg, &core.FactoryOptions{SharedControllerFactory: cmFactory})
	if err != nil {
		return fmt.Errorf("core factory: %w", err)
	}
	configMaps := coreFactory.Core().V1().ConfigMap()

	deployments := map[string]appscontrollers.DeploymentController{}
	for _, ns := range set.Namespaces() {
		f, err := factoryFor(ns)
		if err != nil {
			return err
		}
		af, err := apps.NewFactoryFromConfigWithOptions(cfg, &apps.FactoryOptions{SharedControllerFactory: f})
		if err != nil {
			return fmt.Errorf("apps factory: %w", err)
		}
		deployments[ns] = af.Apps().V1().Deployment()
	}

	services := map[string]corecontrollers.ServiceController{}
	for _, ns := range set.ServiceNamespaces() {
		f, err := factoryFor(ns)
		if err != nil {
			return err
		}
		cf, err := core.NewFactoryFromConfigWithOptions(cfg, &core.FactoryOptions{SharedControllerFactory: f})
		if err != nil {
			return fmt.Errorf("core factory: %w", err)
		}
		services[ns] = cf.Core().V1().Service()
	}

	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("metadata client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("discovery client: %w", err)
	}

	broadcaster := shardset.NewEventBroadcaster(ctx)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events(ref.Namespace)})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "shardkeeper"})

	var ctrl *shardset.Controller
	var placing *placer.Placer
	tracker := mapped.New(meta, disc, set.Mapped, func() {
		ctrl.MappedChanged()
		if placing != nil {
			placing.Wake()
		}
	})
	opts := shardset.Options{ConfigMap: ref, Sources: set.Sources}
	if *allowPlacement {
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return fmt.Errorf("dynamic client: %w", err)
		}
		placing = placer.New(meta, dyn, set.Mapped, tracker, recorder)
		opts.Placer = placing
	}
	ctrl = shardset.Register(ctx, opts, configMaps, configMaps, deployments, services, tracker, recorder)

	// run starts the caches and the controllers. With leader election only
	// the leader runs it: a standby holds no cache and makes no request
	// beyond trying for the Lease.
	var leading, synced atomic.Bool
	run := func(ctx context.Context) error {
		leading.Store(true)
		if err := tracker.Start(ctx); err != nil {
			return err
		}
		// Every namespace's cache is filled before any handler runs: a
		// reconcile that saw one namespace's Deployments and not another's
		// would report shards as half there.
		for ns, f := range factories {
			if err := f.SharedCacheFactory().Start(ctx); err != nil {
				return fmt.Errorf("starting caches in %s: %w", ns, err)
			}
		}
		for _, f := range factories {
			f.SharedCacheFactory().WaitForCacheSync(ctx)
		}
		synced.Store(true)
		for ns, f := range factories {
			if err := f.Start(ctx, 1); err != nil {
				return fmt.Errorf("starting controllers in %s: %w", ns, err)
			}
		}
		ctrl.Started()
		if placing != nil {
			go placing.Run(ctx)
		}
		logrus.WithFields(logrus.Fields{"configmap": ref.String(), "sources": len(set.Sources), "mappedKinds": len(set.Mapped)}).Info("controllers started")
		return nil
	}
	ready := func() error {
		if *leaderElect && !leading.Load() {
			return nil // a healthy standby
		}
		if !synced.Load() {
			return errors.New("caches have not synced")
		}
		return ctrl.Ready()
	}
	if err := probe.Serve(ctx, *probeAddr, probe.Handler(ready)); err != nil {
		return err
	}
	if err := probe.Serve(ctx, *metricsAddr, probe.MetricsHandler(metrics.Registry)); err != nil {
		return err
	}
	logrus.WithFields(logrus.Fields{"version": version.Version, "leaderElect": *leaderElect}).Info("shardkeeper started")

	if !*leaderElect {
		if err := run(ctx); err != nil {
			return err
		}
		<-ctx.Done()
		logrus.Info("shutting down")
		return nil
	}
	return elect(ctx, kube, *leaderNS, ref.Namespace, *leaseDuration, *renewDeadline, *retryPeriod, run)
}

// elect runs run while this process holds the Lease. Losing the Lease ends
// the process (it may have writes in flight that a new leader must not race);
// on shutdown the Lease is released so a standby takes over at once.
func elect(ctx context.Context, kube kubernetes.Interface, namespace, fallback string, lease, renew, retry time.Duration, run func(context.Context) error) error {
	if namespace == "" {
		namespace = fallback
	}
	id, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("leader election identity: %w", err)
	}
	id += "_" + string(uuid.NewUUID())
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: namespace, Name: "shardkeeper"},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	var runErr error
	lost := false
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   lease,
		RenewDeadline:   renew,
		RetryPeriod:     retry,
		ReleaseOnCancel: true,
		Name:            "shardkeeper",
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				logrus.WithField("identity", id).Info("became leader")
				if runErr = run(ctx); runErr != nil {
					return
				}
				<-ctx.Done()
			},
			OnStoppedLeading: func() {
				if ctx.Err() == nil {
					lost = true
				}
			},
			OnNewLeader: func(leader string) {
				if leader != id {
					logrus.WithField("leader", leader).Info("standing by")
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	le.Run(ctx)
	if runErr != nil {
		return runErr
	}
	if lost {
		return errors.New("lost the leader Lease")
	}
	logrus.Info("shutting down")
	return nil
}

func setupLogging(level, format string) error {
	l, err := logrus.ParseLevel(level)
	if err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	logrus.SetLevel(l)
	switch format {
	case "text":
		logrus.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	case "json":
		logrus.SetFormatter(&logrus.JSONFormatter{})
	default:
		return fmt.Errorf("--log-format %q: want text or json", format)
	}
	return nil
}
