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
	"k8s.io/client-go/kubernetes"
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
		sources    sourceList
	)
	flag.Var(&sources, "source", "namespace/name of a source Deployment, repeatable")
	flag.Parse()
	cmNS, cmName, ok := strings.Cut(*configMap, "/")
	if !ok || len(sources) == 0 {
		return errors.New("--configmap namespace/name and at least one --source are required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 1e6, 1e6
	client, err := kubernetes.NewForConfig(cfg)
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
			return err
		}
		srcs = append(srcs, d)
	}
	c := &controller{client: client, sources: srcs, have: map[string]*appsv1.Deployment{}}
	opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", cmName).String()}
	for announced := false; ctx.Err() == nil; {
		w, err := client.CoreV1().ConfigMaps(cmNS).Watch(ctx, opts)
		if err != nil {
			return err
		}
		if !announced {
			fmt.Println("watching")
			announced = true
		}
		for ev := range w.ResultChan() {
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok {
				received := time.Now()
				opts.ResourceVersion = cm.ResourceVersion
				first, last := c.sync(ctx, cm.Data["shards"])
				printTimeline(received, first, last)
			}
		}
	}
	return nil
}

type controller struct {
	client  kubernetes.Interface
	sources []*appsv1.Deployment
	// have are the Deployments it created, by namespace/name.
	have map[string]*appsv1.Deployment
}

// sync writes the difference between the shard list and what it created,
// and returns when it sent the first write and had the last answer (zero
// without writes).
func (c *controller) sync(ctx context.Context, shards string) (first, last time.Time) {
	var ids []string
	for id := range strings.SplitSeq(strings.Trim(strings.TrimSpace(shards), "[]"), ",") {
		if id = strings.TrimSpace(id); id != "" {
			ids = append(ids, id)
		}
	}
	want := map[string]*appsv1.Deployment{}
	for _, d := range clone.Deployments(c.sources, clone.IdealPrefix, ids) {
		want[d.Namespace+"/"+d.Name] = d
	}
	var creates, deletes []string
	for key := range want {
		if _, ok := c.have[key]; !ok {
			creates = append(creates, key)
		}
	}
	for key := range c.have {
		if _, ok := want[key]; !ok {
			deletes = append(deletes, key)
		}
	}
	first, last = c.write(ctx, creates, deletes, want)
	for _, key := range creates {
		c.have[key] = want[key]
	}
	for _, key := range deletes {
		delete(c.have, key)
	}
	return first, last
}

// write creates the Deployments creates (keys of want) and deletes the
// ones deletes (keys of have), all at once, and returns when it sent the
// first request and had the last answer (zero without any).
func (c *controller) write(ctx context.Context, creates, deletes []string, want map[string]*appsv1.Deployment) (first, last time.Time) {
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
	for _, key := range creates {
		d := want[key]
		wg.Go(func() {
			_, err := c.client.AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{})
			done()
			report("create", key, err)
		})
	}
	for _, key := range deletes {
		d := c.have[key]
		wg.Go(func() {
			err := c.client.AppsV1().Deployments(d.Namespace).Delete(ctx, d.Name, metav1.DeleteOptions{PropagationPolicy: &policy})
			done()
			report("delete", key, err)
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

func report(verb, key string, err error) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s %s: %v\n", verb, key, err)
	}
}
