// Command localcluster starts a local Kubernetes control plane that can run
// workloads (see package e2e/cluster) and keeps it running until it gets
// SIGINT or SIGTERM.
//
// Usage:
//
//	localcluster --bin-dir DIR --work-dir DIR [--kubeconfig-out PATH]
//
// Once the cluster is ready it prints "ready <kubeconfig path>" on standard
// output. Its PID is written to <work-dir>/localcluster.pid.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/shardkeeper/shardkeeper/e2e/cluster"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "localcluster: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) (err error) {
	fs := flag.NewFlagSet("localcluster", flag.ContinueOnError)
	binDir := fs.String("bin-dir", os.Getenv(cluster.BinDirEnv), "directory with etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and kwok-stages/ (default $"+cluster.BinDirEnv+")")
	workDir := fs.String("work-dir", "", "directory for etcd data, certificates, logs and kubeconfig (required)")
	kubeconfigOut := fs.String("kubeconfig-out", "", "also copy the admin kubeconfig to this path")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *binDir == "" {
		return fmt.Errorf("--bin-dir is required (or set $%s)", cluster.BinDirEnv)
	}
	if *workDir == "" {
		return errors.New("--work-dir is required")
	}
	if err := os.MkdirAll(*workDir, 0o750); err != nil {
		return fmt.Errorf("create work directory: %w", err)
	}

	pidFile := filepath.Join(*workDir, "localcluster.pid")
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		return fmt.Errorf("write pid file: %w", err)
	}
	defer func() {
		if rmErr := os.Remove(pidFile); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
			err = errors.Join(err, fmt.Errorf("remove pid file: %w", rmErr))
		}
	}()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	logger := log.New(os.Stderr, "", log.LstdFlags)
	c, err := cluster.Start(ctx, cluster.Options{
		BinDir:    *binDir,
		WorkDir:   *workDir,
		Workloads: true,
		Logf:      logger.Printf,
	})
	if err != nil {
		return err
	}
	defer func() {
		logger.Printf("stopping")
		if stopErr := c.Stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
	}()

	kubeconfig := c.KubeconfigPath()
	if *kubeconfigOut != "" {
		if err := copyFile(kubeconfig, *kubeconfigOut); err != nil {
			return err
		}
		kubeconfig = *kubeconfigOut
	}
	fmt.Printf("ready %s\n", kubeconfig)

	<-ctx.Done()
	return nil
}

// copyFile copies src to dst, creating dst's directory if needed.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("open kubeconfig: %w", err)
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o750); err != nil {
		return fmt.Errorf("create directory for %s: %w", dst, err)
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", dst, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return fmt.Errorf("copy kubeconfig to %s: %w", dst, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("close %s: %w", dst, err)
	}
	return nil
}
