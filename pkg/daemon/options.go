// Package daemon builds shardkeeper from its options and runs it: the
// clients, the per-namespace controller factories, the mapped-object caches,
// the shard-set controller, placement, the probes and leader election, in
// the order they must start.
package daemon

import (
	"flag"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/shardkeeper/shardkeeper/pkg/source"
)

// DefaultNamespace is where the shard ConfigMap is looked for: the pod's
// namespace in a cluster ($POD_NAMESPACE), else Fleet's.
func DefaultNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return "cattle-fleet-system"
}

// Options are the daemon's command-line settings.
type Options struct {
	Kubeconfig             string
	Namespace, ConfigMap   string
	Presets                string
	FleetNamespace         string
	FluxNamespace          string
	Sources, MappedKinds   listFlag
	MetricsServices        listFlag
	RequiredArgs           listFlag
	CacheSyncTimeout       time.Duration
	QPS                    float64
	Burst                  int
	LogLevel, LogFormat    string
	LeaderElect            bool
	LeaderNamespace        string
	LeaseDuration          time.Duration
	RenewDeadline          time.Duration
	RetryPeriod            time.Duration
	MetricsAddr, ProbeAddr string
	AllowPlacement         bool
	Profiling              bool
	ShowVersion            bool

	// Set is the sources and mapped kinds, built by Complete.
	Set source.Set
}

// listFlag is a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// AddFlags registers the options on fs with their defaults.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file (default $KUBECONFIG, else the in-cluster config)")
	fs.StringVar(&o.Namespace, "namespace", DefaultNamespace(), "namespace of the shard ConfigMap (default $POD_NAMESPACE, else cattle-fleet-system)")
	fs.StringVar(&o.ConfigMap, "configmap", "shardkeeper", "name of the shard ConfigMap; its status goes to <name>-status")
	fs.StringVar(&o.Presets, "preset", source.PresetFleet, "controllers cloned for every shard: fleet, flux, or fleet,flux; empty for none")
	fs.StringVar(&o.FleetNamespace, "fleet-namespace", "cattle-fleet-system", "namespace of Fleet's fleet-controller, gitjob and helmops")
	fs.StringVar(&o.FluxNamespace, "flux-namespace", "flux-system", "namespace of Flux's helm-controller")
	fs.Var(&o.Sources, "source", "another controller to clone, repeatable: NAMESPACE/NAME[:CONTAINER]=--flag=...{shard}...")
	fs.Var(&o.MetricsServices, "source-metrics-service", "the metrics Service of a source, copied for every shard, repeatable: NAMESPACE/NAME=SERVICE")
	fs.Var(&o.RequiredArgs, "source-required-arg", "an argument a source's main controller must run with before its shard copies are created, repeatable: NAMESPACE/NAME=--flag=value")
	fs.Var(&o.MappedKinds, "mapped-kind", "a kind whose label maps objects to shards, repeatable: RESOURCE.VERSION.GROUP=LABEL (default: the presets' kinds)")
	fs.DurationVar(&o.CacheSyncTimeout, "cache-sync-timeout", 2*time.Minute, "how long the caches may take to fill at start before the daemon exits with an error naming those that did not")
	fs.Float64Var(&o.QPS, "kube-api-qps", 50, "client requests per second to the API server")
	fs.IntVar(&o.Burst, "kube-api-burst", 300, "client request burst to the API server")
	fs.StringVar(&o.LogLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&o.LogFormat, "log-format", "text", "log format: text or json")
	fs.BoolVar(&o.LeaderElect, "leader-elect", false, "elect a leader on a Lease, so that only one of several replicas writes")
	fs.StringVar(&o.LeaderNamespace, "leader-election-namespace", "", "namespace of the Lease (default: --namespace)")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a standby waits before it takes over a Lease that was not renewed")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader retries renewing before it gives up leadership")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", 2*time.Second, "how often candidates try to acquire or renew the Lease")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus /metrics endpoint; 0 disables it")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints; 0 disables them")
	fs.BoolVar(&o.AllowPlacement, "allow-placement", false, "let a \"placement\" key in the ConfigMap relabel the mapped objects (needs patch on them)")
	fs.BoolVar(&o.Profiling, "profiling", false, "serve Go's profiles at /debug/pprof/ on the metrics address")
	fs.BoolVar(&o.ShowVersion, "version", false, "print the version and exit")
}

// Complete checks the options, fills in what derives from others, sets up
// logging and builds the sources and mapped kinds.
func (o *Options) Complete() error {
	if err := setupLogging(o.LogLevel, o.LogFormat); err != nil {
		return err
	}
	if o.LeaderNamespace == "" {
		o.LeaderNamespace = o.Namespace
	}
	set, err := source.Build(source.Options{
		Presets:         strings.Split(o.Presets, ","),
		FleetNamespace:  o.FleetNamespace,
		FluxNamespace:   o.FluxNamespace,
		Custom:          o.Sources,
		Mapped:          o.MappedKinds,
		MetricsServices: o.MetricsServices,
		RequiredArgs:    o.RequiredArgs,
	})
	if err != nil {
		return err
	}
	o.Set = set
	return nil
}

// configMap is the shard ConfigMap.
func (o *Options) configMap() types.NamespacedName {
	return types.NamespacedName{Namespace: o.Namespace, Name: o.ConfigMap}
}
