//go:build e2e

package e2e

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/shardkeeper/shardkeeper/pkg/status"
)

// slowWatches makes the scenario's daemon reach the API server through a
// proxy that holds back every watch response by delay (of the given
// resources only, such as "gitrepos", if any are given) and passes every
// other request at once: the daemon's caches then lag behind the API server
// by delay, as they do behind a loaded one. The daemon still acts as the
// chart's ServiceAccount.
func (s *scenario) slowWatches(delay time.Duration, resources ...string) {
	s.t.Helper()
	s.leastPrivilege()
	cfg, err := clientcmd.LoadFromFile(s.kubeconfig)
	require.NoError(s.t, err)
	proxy := slowWatchProxy(s.t, delay, resources)
	for _, c := range cfg.Clusters {
		c.Server, c.CertificateAuthority, c.CertificateAuthorityData = proxy, "", nil
	}
	// The proxy authenticates as the admin; the daemon only says whom it
	// impersonates.
	for _, a := range cfg.AuthInfos {
		a.ClientCertificate, a.ClientCertificateData, a.ClientKey, a.ClientKeyData = "", nil, "", nil
		a.Token, a.TokenFile = "", ""
	}
	s.kubeconfig = filepath.Join(s.t.TempDir(), "slow-watches.kubeconfig")
	require.NoError(s.t, clientcmd.WriteToFile(*cfg, s.kubeconfig))
}

// slowWatchProxy serves a plain-HTTP proxy to the test cluster's API
// server, with the admin's credentials, and returns its URL. It holds back
// the watches of resources, or of every resource if there are none.
func slowWatchProxy(t *testing.T, delay time.Duration, resources []string) string {
	t.Helper()
	target, err := url.Parse(env.Config().Host)
	require.NoError(t, err)
	transport, err := rest.TransportFor(env.Config())
	require.NoError(t, err)
	p := httputil.NewSingleHostReverseProxy(target)
	p.Transport = transport
	p.FlushInterval = -1 // a watch event goes on as soon as it is due
	p.ModifyResponse = func(resp *http.Response) error {
		u := resp.Request.URL
		if u.Query().Get("watch") == "true" && (len(resources) == 0 || slices.Contains(resources, path.Base(u.Path))) {
			resp.Body = delayed(resp.Body, delay)
		}
		return nil
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return srv.URL
}

// delayedBody passes on what it reads from its source delay after it
// arrived: a constant lag, whatever the rate.
type delayedBody struct {
	chunks chan chunk
	cur    []byte
	err    error
	src    io.Closer
}

type chunk struct {
	data []byte
	due  time.Time
	err  error
}

func delayed(src io.ReadCloser, delay time.Duration) io.ReadCloser {
	d := &delayedBody{chunks: make(chan chunk, 4096), src: src}
	go func() {
		defer close(d.chunks)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			d.chunks <- chunk{data: buf[:n], due: time.Now().Add(delay), err: err}
			if err != nil {
				return
			}
		}
	}()
	return d
}

func (d *delayedBody) Read(p []byte) (int, error) {
	for len(d.cur) == 0 {
		if d.err != nil {
			return 0, d.err
		}
		c, ok := <-d.chunks
		if !ok {
			return 0, io.EOF
		}
		time.Sleep(time.Until(c.due))
		d.cur, d.err = c.data, c.err
	}
	n := copy(p, d.cur)
	d.cur = d.cur[n:]
	return n, nil
}

func (d *delayedBody) Close() error { return d.src.Close() }

// TestRemovalWaitsForALaggingCache removes a shard just after a GitRepo was
// labelled with it, while the daemon's watch of GitRepos lags behind the
// API server: when the removal arrives the caches show nothing on the
// shard, and the API server's answer keeps it until they do. The shard IDs
// are the test's own, since GitRepos of every namespace count and other
// tests leave theirs on "one" and "two".
func TestRemovalWaitsForALaggingCache(t *testing.T) {
	s := newScenario(t, "lagremoval", true)
	s.createConfigMap("keep,late")
	s.slowWatches(3*time.Second, "gitrepos")
	s.start()
	s.waitShards("keep", "late")
	s.waitState("late", status.StateActive)

	s.object(gitRepos, "payments", fleetLabel, "late")
	s.setShards("keep")

	s.waitState("late", status.StateBlocked)
	s.waitEvent(status.ReasonShardDeletionBlocked, "shard late")
	s.waitShards("keep", "late")
	deletes, err := s.daemon.metric(`shardkeeper_api_writes_total{resource="deployments",verb="delete"}`)
	require.NoError(t, err)
	assert.Zero(t, deletes, "no Deployment of shard late was deleted")
	held, err := s.daemon.metric("shardkeeper_removal_cache_waits_total")
	require.NoError(t, err)
	assert.Positive(t, held, "the removal reached the daemon before the GitRepo did")
	for _, e := range s.events(status.ReasonUnknownShard) {
		assert.NotContains(t, e, `shard ID "late"`, "the GitRepo was left on a shard that no longer exists")
	}
}
