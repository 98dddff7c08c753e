// Package daemon builds shardkeeper from its options and runs it: the
// clients, the per-namespace controller factories, the mapped-object caches,
// the shard-set controller, placement, the probes and leader election, in
// the order they must start.
//
// It is the shardkeeper command's own: not a supported API, and it may
// change in any release.
package daemon

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/shardkeeper/shardkeeper/pkg/source"
	"github.com/shardkeeper/shardkeeper/pkg/wire"
)

// DefaultNamespace is where the shard ConfigMap is looked for: the pod's
// namespace in a cluster ($POD_NAMESPACE), else Fleet's.
func DefaultNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return "cattle-fleet-system"
}

// Options are the daemon's command-line settings, set by the flags that
// AddFlags registers and checked by Complete.
type Options struct {
	kubeconfig               string
	namespace, configMapName string
	presets                  string
	fleetNamespace           string
	fluxNamespace            string
	fluxShardKey             string
	sources, mappedKinds     listFlag
	metricsServices          listFlag
	requiredArgs             listFlag
	cacheSyncTimeout         time.Duration
	qps                      float64
	burst                    int
	compression              bool
	initialListFlag          string
	mappedReader             string
	logLevel, logFormat      string
	leaderElect              bool
	leaderNamespace          string
	leaseDuration            time.Duration
	renewDeadline            time.Duration
	retryPeriod              time.Duration
	metricsAddr, probeAddr   string
	allowPlacement           bool
	stamp                    bool
	profiling                bool
	// ShowVersion is --version: print the version and exit.
	ShowVersion bool

	// set is the sources and mapped kinds, built by Complete.
	set source.Set
	// initialList is --initial-list, parsed by Complete.
	initialList wire.InitialList
}

// The values of --mapped-reader.
const (
	readerSkim  = "skim"
	readerStock = "stock"
)

// listFlag is a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// AddFlags registers the options on fs with their defaults.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default $KUBECONFIG, else the in-cluster config)")
	fs.StringVar(&o.namespace, "namespace", DefaultNamespace(), "namespace of the shard ConfigMap (default $POD_NAMESPACE, else cattle-fleet-system)")
	fs.StringVar(&o.configMapName, "configmap", "shardkeeper", "name of the shard ConfigMap; its status goes to <name>-status")
	fs.StringVar(&o.presets, "preset", source.PresetFleet, "controllers cloned for every shard: fleet, flux, or fleet,flux; empty for none")
	fs.StringVar(&o.fleetNamespace, "fleet-namespace", "cattle-fleet-system", "namespace of Fleet's fleet-controller, gitjob and helmops")
	fs.StringVar(&o.fluxNamespace, "flux-namespace", "flux-system", "namespace of Flux's controllers")
	fs.StringVar(&o.fluxShardKey, "flux-shard-key", source.FluxShardKeyLabel, "the label that maps Flux's objects to a shard (FluxInstance.spec.sharding.key)")
	fs.Var(&o.sources, "source", "another controller to clone, repeatable: NAMESPACE/NAME[:CONTAINER]=--flag=...{shard}...")
	fs.Var(&o.metricsServices, "source-metrics-service", "the metrics Service of a source, copied for every shard, repeatable: NAMESPACE/NAME=SERVICE")
	fs.Var(&o.requiredArgs, "source-required-arg", "an argument a source's main controller must run with before its shard copies are created, repeatable: NAMESPACE/NAME=--flag=value")
	fs.Var(&o.mappedKinds, "mapped-kind", "a kind whose label maps objects to shards, repeatable: RESOURCE.VERSION.GROUP=LABEL (default: the presets' kinds); a preset's kind keeps the preset's meaning (Bundles are never placed, ...) and must have its label")
	fs.DurationVar(&o.cacheSyncTimeout, "cache-sync-timeout", 2*time.Minute, "how long the caches may take to fill at start before the daemon exits with an error naming those that did not")
	fs.Float64Var(&o.qps, "kube-api-qps", 50, "client requests per second to the API server")
	fs.IntVar(&o.burst, "kube-api-burst", 300, "client request burst to the API server")
	fs.BoolVar(&o.compression, "kube-api-compression", false, "accept gzip-compressed responses from the API server (large LISTs and, from Kubernetes 1.37, every event of a watch that streams its initial list); off, neither side spends CPU on compression, which next to the API server costs more than it saves")
	fs.StringVar(&o.mappedReader, "mapped-reader", readerSkim, "how the mapped objects are decoded: skim, the daemon's own readers of the few fields it keeps, or stock, client-go's metadata and dynamic clients and its reflector (more memory and CPU at many objects; --initial-list does not apply)")
	fs.StringVar(&o.initialListFlag, "initial-list", string(wire.InitialListAuto), "how the mapped objects are read at start: pages (a paged list, 500 objects a page), stream (a watch that sends the initial state, falling back to pages before Kubernetes 1.32), or auto: pages from Kubernetes 1.34, whose API server serves every page from its watch cache, but stream for a kind of more than 50,000 objects and on older API servers")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader on a Lease, so that only one of several replicas writes")
	fs.StringVar(&o.leaderNamespace, "leader-election-namespace", "", "namespace of the Lease (default: --namespace)")
	fs.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a standby waits before it takes over a Lease that was not renewed")
	fs.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader retries renewing before it gives up leadership")
	fs.DurationVar(&o.retryPeriod, "leader-elect-retry-period", 2*time.Second, "how often candidates try to acquire or renew the Lease")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus /metrics endpoint; 0 disables it")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints; 0 disables them")
	fs.BoolVar(&o.allowPlacement, "allow-placement", false, "let a \"placement\" key in the ConfigMap relabel the mapped objects (needs patch on them)")
	fs.BoolVar(&o.stamp, "stamp", false, "with --allow-placement, publish in the ConfigMap <configmap>-stamp the shard a new object is born on, for the chart's MutatingAdmissionPolicy (needs get and update on it)")
	fs.BoolVar(&o.profiling, "profiling", false, "serve Go's profiles at /debug/pprof/ on the metrics address")
	fs.BoolVar(&o.ShowVersion, "version", false, "print the version and exit")
}

// Complete checks the options, fills in what derives from others, sets up
// logging and builds the sources and mapped kinds, logging Build's
// warnings.
func (o *Options) Complete() error {
	if err := setupLogging(o.logLevel, o.logFormat); err != nil {
		return err
	}
	if o.leaderNamespace == "" {
		o.leaderNamespace = o.namespace
	}
	if o.stamp && !o.allowPlacement {
		return errors.New("--stamp publishes placement's choices: it needs --allow-placement")
	}
	initialList, err := wire.ParseInitialList(o.initialListFlag)
	if err != nil {
		return fmt.Errorf("--initial-list: %w", err)
	}
	o.initialList = initialList
	if o.mappedReader != readerSkim && o.mappedReader != readerStock {
		return fmt.Errorf("--mapped-reader %q: want %s or %s", o.mappedReader, readerSkim, readerStock)
	}
	set, err := source.Build(source.Options{
		Presets:         strings.Split(o.presets, ","),
		FleetNamespace:  o.fleetNamespace,
		FluxNamespace:   o.fluxNamespace,
		FluxShardKey:    o.fluxShardKey,
		Custom:          o.sources,
		Mapped:          o.mappedKinds,
		MetricsServices: o.metricsServices,
		RequiredArgs:    o.requiredArgs,
	})
	if err != nil {
		return err
	}
	// What Build set aside is told once, at start, where the operator
	// looks when a command line changes meaning after an upgrade.
	for _, w := range set.Warnings {
		logrus.Warn(w)
	}
	o.set = set
	return nil
}

// configMap is the shard ConfigMap.
func (o *Options) configMap() types.NamespacedName {
	return types.NamespacedName{Namespace: o.namespace, Name: o.configMapName}
}
