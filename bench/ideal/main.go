// Command ideal is the convergence benchmark's ideal controller: the least
// a controller can do to keep shard Deployments in step with one ConfigMap.
// It watches the ConfigMap, and on every change creates the missing clones
// and deletes the extra ones, all at once, one goroutine each, with a
// client whose rate limiter never waits. It keeps no cache of the
// Deployments: it remembers what it wrote, so it never waits for a watch
// event nor sends a write twice. No status, no Events, no checks.
//
// The clones are the bench's (package clone), named ideal-<source>-<id>;
// the shard list is the "shards" key, IDs separated by commas ("[]" for
// none). It prints "watching" once its watch runs, and after each change a
// JSON line with its timeline, as the daemon logs its own at debug level:
// when the watch event arrived, and when it sent its first write and had
// its last answer.
//
// With --informer it is the informer reference instead: the same
// controller, but as a real one keeps a cache of what it writes, it keeps
// a client-go shared informer on the Deployments of each source's
// namespace (all of them, as the daemon's informers hold them) and decides
// from that cache what to create and delete, rather than from memory. Its
// clones are named informer-<source>-<id>. Its client, as the ideal
// controller's, speaks protobuf with compression off, as the daemon's does,
// so that each watch event costs it no more to decode than it costs the
// daemon: what the daemon spends beyond it is then the daemon's own work.
// Its informers have no event handlers: it acts on the ConfigMap alone, so
// that it sends the same writes as the ideal controller. It decides from
// the cache as it is when the ConfigMap's event arrives, with no check for
// writes it has not seen come back yet: the benchmark lets each change
// settle before the next, and the audit log would count a write sent
// twice. It prints "watching" once its informers have synced and its
// ConfigMap watch runs.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/shardkeeper/shardkeeper/bench/clone"
)

type sourceList []string

func (l *sourceList) String() string     { return strings.Join(*l, ",") }
func (l *sourceList) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "ideal:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		kubeconfig = flag.String("kubeconfig", "", "kubeconfig of the cluster")
		configMap  = flag.String("configmap", "", "namespace/name of the ConfigMap to watch")
		informer   = flag.Bool("informer", false, "be the informer reference: decide from a shared informer's cache of the Deployments of the sources' namespaces")
		sources    sourceList
	)
	flag.Var(&sources, "source", "namespace/name of a source Deployment, repeatable")
	flag.Parse()
	cmNS, cmName, ok := strings.Cut(*configMap, "/")
	if !ok || len(sources) == 0 {
		return errors.New("--configmap namespace/name and at least one --source are required")
	}
	client, err := newClient(*kubeconfig)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	var srcs []*appsv1.Deployment
	for _, s := range sources {
		ns, name, _ := strings.Cut(s, "/")
		d, err := client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("source %s: %w", s, err)
		}
		srcs = append(srcs, d)
	}
	c := &controller{client: client, sources: srcs, prefix: clone.IdealPrefix, written: map[string]*appsv1.Deployment{}}
	if *informer {
		c.prefix, c.written = clone.InformerPrefix, nil
		if c.listers, err = startInformers(ctx, client, srcs); err != nil {
			return err
		}
	}
	return c.follow(ctx, cmNS, cmName)
}

// newClient is a client without a rate limit that speaks protobuf
// without compression, as the daemon's does: a reference that spent more
// on encoding its writes than the daemon would flatter the daemon.
func newClient(kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 1e6, 1e6
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	cfg.DisableCompression = true
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return client, nil
}

// follow watches the ConfigMap ns/name, prints "watching" once the watch
// runs, and syncs on each of its changes until ctx ends.
func (c *controller) follow(ctx context.Context, ns, name string) error {
	opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()}
	for announced := false; ctx.Err() == nil; {
		w, err := c.client.CoreV1().ConfigMaps(ns).Watch(ctx, opts)
		if err != nil {
			return fmt.Errorf("watching %s/%s: %w", ns, name, err)
		}
		if !announced {
			fmt.Println("watching")
			announced = true
		}
		for ev := range w.ResultChan() {
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok {
				received := time.Now()
				opts.ResourceVersion = cm.ResourceVersion
				first, last, err := c.sync(ctx, cm.Data["shards"])
				if err != nil {
					return err
				}
				printTimeline(received, first, last)
			}
		}
	}
	return nil
}

// startInformers starts one shared informer factory per namespace of the
// sources, each with a Deployment informer, as the daemon's informers are
// namespaced, and returns their listers once every cache has synced.
func startInformers(ctx context.Context, client kubernetes.Interface, sources []*appsv1.Deployment) (map[string]appslisters.DeploymentLister, error) {
	listers := map[string]appslisters.DeploymentLister{}
	var factories []informers.SharedInformerFactory
	for _, s := range sources {
		if _, ok := listers[s.Namespace]; ok {
			continue
		}
		f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(s.Namespace))
		listers[s.Namespace] = f.Apps().V1().Deployments().Lister()
		factories = append(factories, f)
	}
	for _, f := range factories {
		f.StartWithContext(ctx)
	}
	for _, f := range factories {
		if err := f.WaitForCacheSyncWithContext(ctx).AsError(); err != nil {
			return nil, fmt.Errorf("syncing the Deployment informers: %w", err)
		}
	}
	return listers, nil
}

type controller struct {
	client  kubernetes.Interface
	sources []*appsv1.Deployment
	prefix  string
	// written are the Deployments it created, by namespace/name: what the
	// ideal controller remembers. Nil for the informer reference, which
	// reads them from listers, by namespace.
	written map[string]*appsv1.Deployment
	listers map[string]appslisters.DeploymentLister
}

// have returns its Deployments, by namespace/name: those it remembers
// writing, or those of its clones that its informers' caches hold.
func (c *controller) have() (map[string]*appsv1.Deployment, error) {
	if c.listers == nil {
		return c.written, nil
	}
	sel := labels.SelectorFromSet(labels.Set{clone.Label: strings.TrimSuffix(c.prefix, "-")})
	out := map[string]*appsv1.Deployment{}
	for ns, l := range c.listers {
		ds, err := l.Deployments(ns).List(sel)
		if err != nil {
			return nil, fmt.Errorf("listing the cached Deployments of %s: %w", ns, err)
		}
		for _, d := range ds {
			out[d.Namespace+"/"+d.Name] = d
		}
	}
	return out, nil
}

// sync writes the difference between the shard list and what it has, and
// returns when it sent the first write and had the last answer (zero
// without writes).
func (c *controller) sync(ctx context.Context, shards string) (first, last time.Time, err error) {
	var ids []string
	for id := range strings.SplitSeq(strings.Trim(strings.TrimSpace(shards), "[]"), ",") {
		if id = strings.TrimSpace(id); id != "" {
			ids = append(ids, id)
		}
	}
	want := map[string]*appsv1.Deployment{}
	for _, d := range clone.Deployments(c.sources, c.prefix, ids) {
		want[d.Namespace+"/"+d.Name] = d
	}
	have, err := c.have()
	if err != nil {
		return first, last, err
	}
	var creates, deletes []*appsv1.Deployment
	for key, d := range want {
		if _, ok := have[key]; !ok {
			creates = append(creates, d)
		}
	}
	for key, d := range have {
		if _, ok := want[key]; !ok {
			deletes = append(deletes, d)
		}
	}
	first, last = c.write(ctx, creates, deletes)
	if c.written != nil {
		for _, d := range creates {
			c.written[d.Namespace+"/"+d.Name] = d
		}
		for _, d := range deletes {
			delete(c.written, d.Namespace+"/"+d.Name)
		}
	}
	return first, last, nil
}

// write creates the Deployments creates and deletes the Deployments
// deletes, all at once, and returns when it sent the first request and had
// the last answer (zero without any).
func (c *controller) write(ctx context.Context, creates, deletes []*appsv1.Deployment) (first, last time.Time) {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		done = func() {
			now := time.Now()
			mu.Lock()
			if now.After(last) {
				last = now
			}
			mu.Unlock()
		}
	)
	policy := metav1.DeletePropagationBackground
	if len(creates)+len(deletes) > 0 {
		first = time.Now()
	}
	for _, d := range creates {
		wg.Go(func() {
			_, err := c.client.AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{})
			done()
			report("create", d, err)
		})
	}
	for _, d := range deletes {
		wg.Go(func() {
			err := c.client.AppsV1().Deployments(d.Namespace).Delete(ctx, d.Name, metav1.DeleteOptions{PropagationPolicy: &policy})
			done()
			report("delete", d, err)
		})
	}
	wg.Wait()
	return first, last
}

// printTimeline prints a change's timeline in the shape of the daemon's
// debug line "reconcile timeline": its start, and each step as
// "step=+milliseconds".
func printTimeline(start, first, last time.Time) {
	var steps []string
	for _, s := range []struct {
		step string
		at   time.Time
	}{{"first-write", first}, {"last-answer", last}} {
		if !s.at.IsZero() {
			steps = append(steps, fmt.Sprintf("%s=+%.3f", s.step, float64(s.at.Sub(start))/float64(time.Millisecond)))
		}
	}
	b, _ := json.Marshal(map[string]string{"msg": "reconcile timeline", "start": start.UTC().Format(time.RFC3339Nano), "steps": strings.Join(steps, " ")})
	fmt.Println(string(b))
}

func report(verb string, d *appsv1.Deployment, err error) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s %s/%s: %v\n", verb, d.Namespace, d.Name, err)
	}
}
