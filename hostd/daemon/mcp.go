package daemon

import (
	"context"
	"net"
	"net/http"
	"sync"

	"paddock.dev/paddock/client"
	"paddock.dev/paddock/mcp"
)

// MCPPath is where the daemon serves the MCP server over streamable HTTP
// (docs/mcp.md). The gateway sends it to hostd like every API route.
const MCPPath = "/mcp"

// withMCP serves MCPPath with the MCP server and everything else with
// next. The MCP server is a client of the public API: each caller's tool
// calls go back into this daemon's own API with that caller's token,
// through an in-process pipe (selfListener), so the REST API's
// authentication, tenant and session-token scoping, limits and audit
// apply to them exactly as to any other client.
func (d *Daemon) withMCP(next http.Handler, allowWrite bool, version string) http.Handler {
	d.self = newSelfListener()
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.self.dial(ctx)
		},
		MaxIdleConnsPerHost: 16,
		ForceAttemptHTTP2:   false,
	}
	h := mcp.NewHTTPHandler(mcp.HTTPOptions{
		AllowWrite: allowWrite, Version: version,
		Client: func(token string) *client.Client {
			return client.New("http://paddock.self", token, client.WithTransport(tr))
		},
	})
	d.mcp = h
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == MCPPath {
			h.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// MCP is the daemon's MCP HTTP handler, for tests that look into it.
func (d *Daemon) MCP() *mcp.HTTPHandler { return d.mcp }

// selfListener is a listener whose connections are made in this process
// (net.Pipe): the MCP server's way back into the daemon's own API that
// needs no address, socket file or port.
type selfListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newSelfListener() *selfListener {
	return &selfListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *selfListener) dial(ctx context.Context) (net.Conn, error) {
	a, b := net.Pipe()
	select {
	case l.conns <- b:
		return a, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *selfListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *selfListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *selfListener) Addr() net.Addr { return selfAddr{} }

type selfAddr struct{}

func (selfAddr) Network() string { return "pipe" }
func (selfAddr) String() string  { return "paddock.self" }
