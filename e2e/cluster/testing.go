package cluster

import (
	"context"
	"os"
	"testing"
	"time"
)

// startForTestTimeout bounds StartForTest.
const startForTestTimeout = 5 * time.Minute

// StartForTest starts a cluster for a test, logging through tb.Logf. It
// fails the test with tb.Fatalf if the cluster cannot start and registers a
// cleanup that stops it. An empty opts.WorkDir becomes a directory from
// tb.TempDir. If the test failed, the cleanup logs the end of every process
// log before stopping.
func StartForTest(tb testing.TB, opts Options) *Cluster {
	tb.Helper()
	if opts.Logf == nil {
		opts.Logf = tb.Logf
	}
	if opts.WorkDir == "" {
		opts.WorkDir = tb.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), startForTestTimeout)
	defer cancel()
	c, err := Start(ctx, opts)
	if err != nil {
		tb.Fatalf("start local cluster: %v", err)
		return nil
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"} {
				path := c.LogPath(name)
				if _, err := os.Stat(path); err != nil {
					continue
				}
				tb.Logf("---- end of %s:\n%s", path, tailFile(path, 40, 8192))
			}
		}
		if err := c.Stop(); err != nil {
			tb.Errorf("stop local cluster: %v", err)
		}
	})
	return c
}
