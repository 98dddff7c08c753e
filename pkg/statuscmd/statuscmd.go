// Package statuscmd is the `shardkeeper status` subcommand: it prints the
// status ConfigMap that the daemon writes, with the current kubeconfig.
//
// It is the shardkeeper command's own: not a supported API, and it may
// change in any release.
package statuscmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/rancher/wrangler/v3/pkg/kubeconfig"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/shardkeeper/shardkeeper/pkg/status"
)

// PluginName is the name kubectl finds the binary by on the PATH: run as
// kubectl-shardkeeper, it is `kubectl shardkeeper`, whose one command is
// status.
const PluginName = "kubectl-shardkeeper"

const pluginUsage = `Usage:
  kubectl shardkeeper status [-o table|wide|yaml|json] [-n NAMESPACE] [--configmap NAME] [--kubeconfig FILE]
`

// Plugin runs the kubectl plugin: args are the words after
// "kubectl shardkeeper".
func Plugin(args []string, defaultNamespace string, out, errOut io.Writer) error {
	if len(args) > 0 && args[0] == "status" {
		return Run(args[1:], defaultNamespace, out)
	}
	fmt.Fprint(errOut, pluginUsage)
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		return nil
	}
	return fmt.Errorf("unknown command %q", args[0])
}

// Run parses args (the words after "status") and prints the status to out.
func Run(args []string, defaultNamespace string, out io.Writer) error {
	fs := flag.NewFlagSet("shardkeeper status", flag.ContinueOnError)
	path := fs.String("kubeconfig", "", "kubeconfig file (default $KUBECONFIG, else ~/.kube/config)")
	namespace := fs.String("namespace", "", "namespace of the shard ConfigMap (default: the kubeconfig context's, else "+defaultNamespace+")")
	fs.StringVar(namespace, "n", "", "shorthand for --namespace")
	configMap := fs.String("configmap", "shardkeeper", "name of the shard ConfigMap")
	output := fs.String("output", "table", "output format: table, wide, yaml or json")
	fs.StringVar(output, "o", "table", "shorthand for --output")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return nil // the usage is printed; asking for it is no failure
	} else if err != nil {
		return err
	}
	loader := kubeconfig.GetNonInteractiveClientConfig(*path)
	cfg, err := loader.ClientConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	ns := *namespace
	if ns == "" {
		if ctxNS, overridden, err := loader.Namespace(); err == nil && overridden {
			ns = ctxNS
		} else {
			ns = defaultNamespace
		}
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, *configMap+"-status", metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading the status of %s/%s (is shardkeeper running?): %w", ns, *configMap, err)
	}
	return status.Print(out, status.Decode(cm.Data), *output)
}
