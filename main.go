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
	"path/filepath"
	"syscall"

	"github.com/sirupsen/logrus"

	"github.com/shardkeeper/shardkeeper/pkg/daemon"
	"github.com/shardkeeper/shardkeeper/pkg/statuscmd"
	"github.com/shardkeeper/shardkeeper/pkg/version"
)

const usage = `Usage:
  shardkeeper [flags]          run the daemon
  shardkeeper status [-o table|wide|yaml|json] [-n NAMESPACE] [--configmap NAME]

Flags:
`

func main() {
	if err := run(os.Args[1:]); err != nil {
		logrus.WithError(err).Error("shardkeeper failed")
		os.Exit(1)
	}
}

// run parses the command line, builds the daemon and runs it until SIGINT
// or SIGTERM; `status` is the subcommand that prints its status.
func run(args []string) error {
	if filepath.Base(os.Args[0]) == statuscmd.PluginName {
		return statuscmd.Plugin(args, daemon.DefaultNamespace(), os.Stdout, os.Stderr)
	}
	if len(args) > 0 && args[0] == "status" {
		return statuscmd.Run(args[1:], daemon.DefaultNamespace(), os.Stdout)
	}
	var o daemon.Options
	fs := flag.NewFlagSet("shardkeeper", flag.ContinueOnError)
	o.AddFlags(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return nil
	} else if err != nil {
		return err
	}
	if o.ShowVersion {
		fmt.Println(version.Version)
		return nil
	}
	if err := o.Complete(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	d, err := daemon.New(ctx, &o)
	if err != nil {
		return err
	}
	return d.Run(ctx)
}
