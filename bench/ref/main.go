// Command ref is the memory reference of the benchmark: it caches GitRepos,
// HelmReleases, Bundles and BundleDeployments with full dynamic
// (unstructured) informers, as a controller without any trimming would,
// prints one line when every cache has synced, and then blocks until it is signalled. It also prints a line
// "gc N" whenever its count of completed garbage collections changes, so
// that its memory can be read after a collection, as the daemon's is (from
// its go_gc_duration_seconds_count); it never triggers one itself.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/metrics"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster")
	flag.Parse()
	if err := run(*kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, "ref:", err)
		os.Exit(1)
	}
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
	for _, gvr := range []schema.GroupVersionResource{testfixture.GitRepos, testfixture.HelmReleases, testfixture.Bundles, testfixture.BundleDeployments} {
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
