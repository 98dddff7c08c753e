package cluster

import (
	"context"
	"os"
	"testing"
	"time"
)

// startForTestTimeout bounds StartForTest.
const startForTestTimeout = 5 * time.Minute

// StartForTest starts a cluster for a test, logging through t.Logf. It
// fails the test with t.Fatalf if the cluster cannot start and registers a
// cleanup that stops it. An empty opts.WorkDir becomes a directory from
// t.TempDir. If the test failed, the cleanup logs the end of every process
// log before stopping.
func StartForTest(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	if opts.WorkDir == "" {
		opts.WorkDir = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), startForTestTimeout)
	defer cancel()
	c, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("start local cluster: %v", err)
		return nil
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"} {
				path := c.LogPath(name)
				if _, err := os.Stat(path); err != nil {
					continue
				}
				t.Logf("---- end of %s:\n%s", path, tailFile(path, 40, 8192))
			}
		}
		if err := c.Stop(); err != nil {
			t.Errorf("stop local cluster: %v", err)
		}
	})
	return c
}
