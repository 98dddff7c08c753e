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
// none). It prints "watching" once its watch runs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

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
				opts.ResourceVersion = cm.ResourceVersion
				c.sync(ctx, cm.Data["shards"])
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

// sync writes the difference between the shard list and what it created.
func (c *controller) sync(ctx context.Context, shards string) {
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
	var wg sync.WaitGroup
	policy := metav1.DeletePropagationBackground
	for _, key := range creates {
		d := want[key]
		wg.Go(func() {
			_, err := c.client.AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{})
			report("create", key, err)
		})
	}
	for _, key := range deletes {
		d := c.have[key]
		wg.Go(func() {
			err := c.client.AppsV1().Deployments(d.Namespace).Delete(ctx, d.Name, metav1.DeleteOptions{PropagationPolicy: &policy})
			report("delete", key, err)
		})
	}
	wg.Wait()
	for _, key := range creates {
		c.have[key] = want[key]
	}
	for _, key := range deletes {
		delete(c.have, key)
	}
}

func report(verb, key string, err error) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s %s: %v\n", verb, key, err)
	}
}
