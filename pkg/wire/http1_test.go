//go:build linux

package wire

import (
	"context"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
)

// protoServer is a TLS server that offers HTTP/2 and records the protocol
// of each request it answers.
func protoServer(t *testing.T) (*rest.Config, func() []string) {
	t.Helper()
	var (
		mu     sync.Mutex
		protos []string
	)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		protos = append(protos, r.Proto)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{},"items":[]}`))
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
	return cfg, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), protos...)
	}
}

func get(t *testing.T, c rest.Interface) {
	t.Helper()
	_, err := c.Get().AbsPath("/apis/fleet.cattle.io/v1alpha1/gitrepos").DoRaw(context.Background())
	require.NoError(t, err)
}

// The mapped objects are read over HTTP/1.1 even where the API server
// offers HTTP/2, which the same config otherwise speaks.
func TestReadThroughSpeaksHTTP1(t *testing.T) {
	cfg, protos := protoServer(t)

	plain, err := metaClientFor(cfg)
	require.NoError(t, err)
	get(t, plain)
	require.Equal(t, []string{"HTTP/2.0"}, protos(), "the server offers HTTP/2 and a plain client takes it")

	c, err := NewClients(cfg)
	require.NoError(t, err)
	get(t, c.meta)
	get(t, c.spec)
	assert.Equal(t, []string{"HTTP/2.0", "HTTP/1.1", "HTTP/1.1"}, protos())
	assert.Empty(t, cfg.NextProtos, "the caller's config is left as it was")
}

// The connections of those clients give up on a silent peer as soon as
// HTTP/2's health check would.
func TestReadThroughKeepalive(t *testing.T) {
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	// The kernel completes the handshake from the listen backlog: nothing
	// need accept.

	cfg := http1(&rest.Config{Host: "https://" + ln.Addr().String()})
	require.NotNil(t, cfg.Dial)
	conn, err := cfg.Dial(context.Background(), "tcp", ln.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	raw, err := conn.(*net.TCPConn).SyscallConn()
	require.NoError(t, err)
	got := map[string]int{}
	require.NoError(t, raw.Control(func(fd uintptr) {
		for name, opt := range map[string]int{"idle": syscall.TCP_KEEPIDLE, "interval": syscall.TCP_KEEPINTVL, "count": syscall.TCP_KEEPCNT} {
			v, err := syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, opt)
			require.NoError(t, err)
			got[name] = v
		}
		on, err := syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_KEEPALIVE)
		require.NoError(t, err)
		got["on"] = on
	}))
	assert.Equal(t, map[string]int{"on": 1, "idle": 15, "interval": 5, "count": 3}, got)

	custom := func(context.Context, string, string) (net.Conn, error) { return nil, net.ErrClosed }
	_, err = http1(&rest.Config{Dial: custom}).Dial(context.Background(), "tcp", ln.Addr().String())
	assert.ErrorIs(t, err, net.ErrClosed, "a dialer of the caller's own is kept")
}
