// Command demoseed fills a fresh local control plane with what `make demo`
// shows: Fleet's and Flux's controllers (stand-ins shaped exactly like the
// real Deployments, with their ServiceAccounts and Fleet's metrics
// Services), the mapped-object CRDs and a few GitRepos and HelmReleases.
// The chart installs shardkeeper itself.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/shardkeeper/shardkeeper/e2e/seed"
	"github.com/shardkeeper/shardkeeper/pkg/source"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the local control plane")
	impersonate := flag.String("impersonate", "", "a ServiceAccount NAMESPACE/NAME: write a kubeconfig that acts as it")
	out := flag.String("impersonating-kubeconfig", "", "where to write the kubeconfig for --impersonate")
	flag.Parse()
	if err := fill(*kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, "demoseed:", err)
		os.Exit(1)
	}
	if *impersonate != "" {
		if err := writeImpersonating(*kubeconfig, *impersonate, *out); err != nil {
			fmt.Fprintln(os.Stderr, "demoseed:", err)
			os.Exit(1)
		}
	}
}

// writeImpersonating copies the admin kubeconfig and makes it act as the
// ServiceAccount, so that every request of a daemon run with it is checked
// against the chart's RBAC.
func writeImpersonating(kubeconfig, sa, out string) error {
	ns, name, ok := strings.Cut(sa, "/")
	if !ok || out == "" {
		return errors.New("--impersonate wants NAMESPACE/NAME and --impersonating-kubeconfig a path")
	}
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	for _, auth := range cfg.AuthInfos {
		auth.Impersonate = "system:serviceaccount:" + ns + ":" + name
		auth.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	}
	if err := clientcmd.WriteToFile(*cfg, out); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	return nil
}

// fill creates, in order, what each next step needs: the namespaces, the
// CRDs, the controllers, and once the CRDs are served, the mapped objects.
// What exists already is left as it is, so that a second run is harmless.
func fill(kubeconfig string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building the client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building the dynamic client: %w", err)
	}
	if err := seed.Namespaces(ctx, kube, fleetNS, fluxNS, objectsNS); err != nil {
		return err
	}
	for _, gvr := range mappedKinds() {
		if err := seed.IgnoreExists(dyn.Resource(testfixture.CRDs).Create(ctx, testfixture.CRD(gvr), metav1.CreateOptions{})); err != nil {
			return fmt.Errorf("CRD %s: %w", gvr.Resource, err)
		}
	}
	if err := seed.Controllers(ctx, kube, fleetNS, fluxNS); err != nil {
		return err
	}
	if err := waitServed(ctx, dyn); err != nil {
		return err
	}
	return createObjects(ctx, dyn)
}

// The namespaces the demo fills: Fleet's and Flux's own, and the one of
// the mapped objects.
const fleetNS, fluxNS, objectsNS = "cattle-fleet-system", "flux-system", "fleet-default"

// waitServed waits until every mapped kind can be listed: the CRDs are
// served a moment after they are created.
func waitServed(ctx context.Context, dyn dynamic.Interface) error {
	for _, gvr := range mappedKinds() {
		for {
			if _, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1}); err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("waiting for %s to be served: %w", gvr.Resource, ctx.Err())
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

// createObjects creates a few GitRepos and HelmReleases on two shards, each
// with the label its controllers shard by.
func createObjects(ctx context.Context, dyn dynamic.Interface) error {
	objects := []struct {
		kind        int
		name, shard string
	}{
		{0, "frontend", "shard0"}, {0, "backend", "shard0"}, {0, "payments", "shard1"},
		{2, "ingress-nginx", "shard1"}, {2, "cert-manager", "shard0"},
	}
	for _, o := range objects {
		gvr := mappedKinds()[o.kind]
		label := source.FleetShardRefLabel
		if gvr == testfixture.HelmReleases {
			label = source.FluxShardKeyLabel
		}
		if err := seed.IgnoreExists(dyn.Resource(gvr).Namespace(objectsNS).Create(ctx, testfixture.Object(gvr, objectsNS, o.name, label, o.shard), metav1.CreateOptions{})); err != nil {
			return fmt.Errorf("%s %s: %w", gvr.Resource, o.name, err)
		}
	}
	return nil
}

func mappedKinds() []schema.GroupVersionResource {
	return []schema.GroupVersionResource{testfixture.GitRepos, testfixture.HelmOps, testfixture.HelmReleases}
}
