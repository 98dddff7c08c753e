package wire

import (
	"net"
	"time"

	"k8s.io/client-go/rest"
)

// http1 returns a copy of cfg whose clients speak HTTP/1.1 only, one
// connection per request in flight, dialled with keepalive unless cfg has
// a dialer of its own: the mapped objects' watches and lists are read that
// way.
//
// Over HTTP/2 every watch shares one connection, and the bulk of the
// daemon's traffic is the initial state of each mapped kind: an object per
// event, a few KiB each. The client's one read loop hands every DATA
// frame to its stream's reader, and after each read of 4 KiB or more it
// returns that much flow-control window to the API server
// (inflowMinRefresh in golang.org/x/net/http2/flow.go): a WINDOW_UPDATE
// frame, a TLS record and a write for about every second object, which
// the API server must read and account for in turn. Over HTTP/1.1 a
// watch is a plain byte stream with neither. What it gives up is
// HTTP/2's health check, client-go's ping after 30 s without a frame:
// keepalive stands in for it.
//
// client-go configures HTTP/2 only when the TLS config offers "h2"
// (allowsHTTP2 in k8s.io/apimachinery/pkg/util/net/http.go). It never
// shares a transport built around a caller's dialer, whether set here or
// by the caller: rest's TransportConfig wraps each Dial in a new
// DialHolder, which its transport cache takes into the key
// (k8s.io/client-go/rest/transport.go, transport/cache.go). So every
// client made from the returned config has a connection pool of its own,
// apart from the HTTP/2 one that the rest of the daemon shares.
func http1(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.NextProtos = []string{"http/1.1"}
	if c.Dial == nil {
		c.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAliveConfig: keepalive}).DialContext
	}
	return c
}

// keepalive gives up on a silent peer in about 30 s, 15 s idle then three
// probes 5 s apart, as HTTP/2's health check in client-go does (a ping
// after 30 s without a frame, 15 s for its answer: readIdleTimeoutSeconds
// and pingTimeoutSeconds in k8s.io/apimachinery/pkg/util/net/http.go).
// client-go's own dialer (30 s idle) keeps Go's defaults of nine probes
// 15 s apart: almost three minutes in which a watch on a dead connection
// would wait.
var keepalive = net.KeepAliveConfig{Enable: true, Idle: 15 * time.Second, Interval: 5 * time.Second, Count: 3}
