// Command ref is the memory reference of the benchmark: it caches GitRepos,
// HelmReleases, Bundles and BundleDeployments with full dynamic
// (unstructured) informers, as a controller without any trimming would,
// prints one line when every cache has synced, and then blocks until it is signalled. It also prints a line
// "gc N" whenever its count of completed garbage collections changes, so
// that its memory can be read after a collection, as the daemon's is (from
// its go_gc_duration_seconds_count); it never triggers one itself.
//
// With --list it is the start-up reference instead: a bare paged LIST of
// the same kinds' metadata, the kinds in parallel, pages of --page-size
// and no client rate limit, with nothing kept; it prints "listed N objects"
// and exits.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster")
	list := flag.Bool("list", false, "list the objects' metadata, page by page, and exit")
	pageSize := flag.Int64("page-size", 500, "objects per page of --list")
	flag.Parse()
	var err error
	if *list {
		err = listAll(*kubeconfig, *pageSize)
	} else {
		err = run(*kubeconfig)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ref:", err)
		os.Exit(1)
	}
}

// kinds are the mapped kinds the bench creates.
var kinds = []schema.GroupVersionResource{testfixture.GitRepos, testfixture.HelmReleases, testfixture.Bundles, testfixture.BundleDeployments}

// listAll lists the kinds' metadata in pages of pageSize, in parallel, as
// the daemon's metadata client would (protobuf, uncompressed), and prints
// the count.
func listAll(kubeconfig string, pageSize int64) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = -1, 0 // no client-side rate limit: the bare LIST
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.DisableCompression = true // as the daemon's client (--kube-api-compression=false)
	client, err := metadata.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var (
		total atomic.Int64
		wg    sync.WaitGroup
	)
	errs := make([]error, len(kinds))
	for i, gvr := range kinds {
		wg.Go(func() {
			opts := metav1.ListOptions{Limit: pageSize}
			for {
				page, err := client.Resource(gvr).List(ctx, opts)
				if err != nil {
					errs[i] = fmt.Errorf("listing %s: %w", gvr.Resource, err)
					return
				}
				total.Add(int64(len(page.Items)))
				if page.Continue == "" {
					return
				}
				opts.Continue = page.Continue
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Printf("listed %d objects\n", total.Load())
	return nil
}

func run(kubeconfig string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 50, 100
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	factory := dynamicinformer.NewDynamicSharedInformerFactory(client, 0)
	var informers []cache.SharedIndexInformer
	for _, gvr := range kinds {
		informers = append(informers, factory.ForResource(gvr).Informer())
	}
	go reportGC(ctx)
	began := time.Now()
	factory.Start(ctx.Done())
	for gvr, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("cache of %s did not sync", gvr.Resource)
		}
	}
	n := 0
	for _, inf := range informers {
		n += len(inf.GetStore().ListKeys())
	}
	fmt.Printf("synced %d objects in %s\n", n, time.Since(began).Round(time.Millisecond))
	<-ctx.Done()
	return nil
}

// reportGC prints "gc N" when the number of completed GC cycles changes.
func reportGC(ctx context.Context) {
	sample := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	last := uint64(0)
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		metrics.Read(sample)
		if n := sample[0].Value.Uint64(); n != last {
			last = n
			fmt.Printf("gc %d\n", n)
		}
	}
}
