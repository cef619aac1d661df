// Package proxy is a sandbox's HTTP/HTTPS egress proxy.
//
// One Proxy serves many sandboxes; each sandbox reaches it through
// listeners of its own (Serve for programs that use http_proxy and
// https_proxy, ServeTransparent for connections the sandbox's nftables
// redirected), so who is asking is known from the listener, never from an
// address the sandbox could choose.
//
// For every request or tunnel the proxy canonicalises the host, asks the
// sandbox's egress.Policy, resolves the name once, checks every address,
// and dials exactly the address it checked: the transport never resolves
// again, which is what defeats DNS rebinding. Every decision is recorded.
//
// goproxy (github.com/elazarl/goproxy) carries the requests: its
// HandleConnect and OnRequest hooks hold the decisions. The connection
// front end (front.go) is the proxy's own because net/http's server drops
// the Host header of an absolute-form request, and the proxy must compare
// it with the URI.
//
// A tunnel whose host has method or path rules, or a credential grant, is
// intercepted (intercept.go) when Config.CA is set and refused when it is
// not: the proxy ends the sandbox's TLS with a leaf of that CA, serves the
// decrypted requests with the same front end, judges each, injects a
// matching grant's header, and sends it over TLS of its own to the checked
// address.
package proxy

import (
	"context"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/elazarl/goproxy"

	"paddock.dev/paddock/egress"
)

// Config is what a Proxy needs. The zero value of every field has a
// default; the function fields' defaults are simple stand-ins that the
// daemon replaces with egress/addr's and egress/rules' real ones.
type Config struct {
	// Resolver looks names up, once per request or tunnel. Default
	// net.DefaultResolver.
	Resolver egress.Resolver
	// CanonicalHost turns a host as the sandbox wrote it (no port; an
	// IPv6 literal without brackets) into the canonical form that
	// policies match; an IP literal in any spelling comes back with ip
	// valid. Default: lower case, no trailing dot, netip.ParseAddr, and
	// refuse anything that looks like an IP in an unusual spelling.
	CanonicalHost func(raw string) (host string, ip netip.Addr, err error)
	// CanonicalPath turns a request's escaped path into the path rules
	// match, or refuses an ambiguous one. Default: refuse dot segments,
	// "//", backslashes and %2e, %2f, %5c, %25 in any case.
	CanonicalPath func(raw string) (string, error)
	// CheckAddr returns nil only for an address the sandbox may reach.
	// Default: refuse loopback, private, link-local, CGNAT, multicast,
	// unspecified and reserved addresses.
	CheckAddr func(netip.Addr) error
	// Dial connects to exactly addr (never a name). Default: a
	// net.Dialer with DialTimeout. Tests map addresses to their own
	// loopback servers here.
	Dial func(ctx context.Context, addr netip.AddrPort) (net.Conn, error)
	// Record receives every decision. Default: none.
	Record egress.Recorder
	// Logger is the proxy's log. Default: discard.
	Logger *slog.Logger

	// CA issues the certificates with which the proxy intercepts TLS to
	// hosts whose decision says Inspect (or that have a credential
	// grant); egress/ca's Authority is one. Default nil: no
	// interception, and such tunnels are refused. Leave it nil rather
	// than setting a nil pointer.
	CA LeafIssuer
	// UpstreamRoots verifies upstream servers' certificates on
	// intercepted connections. Default nil: the system's roots.
	UpstreamRoots *x509.CertPool
	// Grants returns a sandbox's credential grants; the proxy sets a
	// matching grant's header on intercepted requests only, never on
	// plain http or relayed tunnels. Default nil: no grants. It is
	// called for every intercepted tunnel and request, so it must be
	// cheap and safe for concurrent use.
	Grants func(sandbox string) []egress.Grant
	// GrantApplies, when set, decides whether a live grant covers a
	// request inside intercepted TLS (Paddock's http Rego module); nil
	// matches hosts, methods and paths here. Either way a grant is only
	// ever used on port 443 inside intercepted TLS, before its expiry.
	GrantApplies func(sandbox string, g egress.Grant, r egress.Request) bool

	// DialTimeout bounds a name lookup and a dial. Default 10s.
	DialTimeout time.Duration
	// HeaderTimeout bounds reading a request head, the redirect line of
	// a transparent connection, or a TLS ClientHello. Default 10s.
	HeaderTimeout time.Duration
	// IdleTimeout ends a tunnel with no bytes either way, a keep-alive
	// connection with no next request, a stalled body or a client that
	// stopped reading, and an upstream that sends no response head.
	// Default 2m.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request head. Default 64 KiB.
	MaxHeaderBytes int
	// MaxTunnels bounds a sandbox's open tunnels (CONNECT and redirected
	// TLS), over all its listeners. Default 64.
	MaxTunnels int
	// MaxConns bounds a sandbox's open client connections, over all its
	// listeners; further ones are closed at once. Default 256.
	MaxConns int
}

func (c Config) withDefaults() Config {
	if c.Resolver == nil {
		c.Resolver = net.DefaultResolver
	}
	if c.CanonicalHost == nil {
		c.CanonicalHost = basicCanonicalHost
	}
	if c.CanonicalPath == nil {
		c.CanonicalPath = basicCanonicalPath
	}
	if c.CheckAddr == nil {
		c.CheckAddr = basicCheckAddr
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = 10 * time.Second
	}
	if c.HeaderTimeout <= 0 {
		c.HeaderTimeout = 10 * time.Second
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 2 * time.Minute
	}
	if c.MaxHeaderBytes <= 0 {
		c.MaxHeaderBytes = 64 << 10
	}
	if c.MaxTunnels <= 0 {
		c.MaxTunnels = 64
	}
	if c.MaxConns <= 0 {
		c.MaxConns = 256
	}
	if c.Dial == nil {
		d := &net.Dialer{Timeout: c.DialTimeout}
		c.Dial = func(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", addr.String())
		}
	}
	if c.Record == nil {
		c.Record = func(egress.Event) {}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Proxy is the egress proxy for any number of sandboxes.
type Proxy struct {
	cfg       Config
	log       *slog.Logger
	gp        *goproxy.ProxyHttpServer
	transport *http.Transport
	// sbTransports: each sandbox's own connection pool (clones of
	// transport), so no upstream connection is shared between sandboxes.
	sbTransports map[string]*http.Transport
	// sbPools: each sandbox's connections for requests without a body
	// (connPool), kept apart the same way.
	sbPools map[string]*connPool

	ctx    context.Context // cancelled by Close: ends lookups, dials and round trips
	cancel context.CancelFunc

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[net.Conn]string // client connections (→ their sandbox) and tunnel upstreams (→ "")
	open      map[string]int      // sandbox → open client connections
	tunnels   map[string]int      // sandbox → open tunnels
	wg        sync.WaitGroup
}

// ErrClosed is what Serve and ServeTransparent return once Close was called.
var ErrClosed = errors.New("egress proxy closed")

// New returns a proxy that serves nothing until Serve or ServeTransparent
// is called.
func New(cfg Config) *Proxy {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		cfg:       cfg,
		log:       cfg.Logger,
		ctx:       ctx,
		cancel:    cancel,
		listeners: map[net.Listener]struct{}{},
		conns:     map[net.Conn]string{},
		open:      map[string]int{},
		tunnels:   map[string]int{},
	}
	p.transport = &http.Transport{
		Proxy:                  nil, // never another proxy from the environment
		DialContext:            p.dialPinned,
		DisableCompression:     true, // pass the client's Accept-Encoding through, decode nothing
		MaxIdleConns:           64,
		MaxIdleConnsPerHost:    8,
		IdleConnTimeout:        cfg.IdleTimeout,
		ResponseHeaderTimeout:  cfg.IdleTimeout,
		MaxResponseHeaderBytes: 1 << 20,
		ReadBufferSize:         16 << 10,
		WriteBufferSize:        8 << 10,
	}
	p.gp = p.newGoproxy()
	return p
}

// sandbox is one listener's sandbox: who is asking, and its policy.
type sandbox struct {
	id  string
	pol egress.Policy
}

// Serve serves the forward proxy (absolute-form and origin-form HTTP,
// CONNECT) for one sandbox on l until Close, and closes l. Every
// connection accepted on l speaks for that sandbox.
func (p *Proxy) Serve(l net.Listener, sandbox string, pol egress.Policy) error {
	return p.serve(l, sandbox, pol, p.serveForward)
}

// ServeTransparent serves one sandbox's redirected connections on l until
// Close, and closes l. Each connection starts with the line
// "PADDOCK-REDIRECT <ip>:<port>\n" naming its original destination,
// written by the sandbox's agent, then the client's own bytes: HTTP for
// port 80, TLS for port 443 (judged by its SNI); other ports are refused.
func (p *Proxy) ServeTransparent(l net.Listener, sandbox string, pol egress.Policy) error {
	return p.serve(l, sandbox, pol, p.serveRedirected)
}

func (p *Proxy) serve(l net.Listener, id string, pol egress.Policy, handle func(*sandbox, net.Conn)) error {
	if !p.addListener(l) {
		l.Close()
		return ErrClosed
	}
	defer p.removeListener(l)
	s := &sandbox{id: id, pol: pol}
	var backoff time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if p.isClosed() {
				return ErrClosed
			}
			var ne interface{ Temporary() bool }
			if errors.As(err, &ne) && ne.Temporary() {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				p.log.Warn("egress proxy: accept failed; retrying", "sandbox", id, "err", err, "in", backoff)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		if !p.addConn(id, c) {
			c.Close()
			continue
		}
		go func() {
			defer p.removeConn(id, c)
			defer func() {
				if r := recover(); r != nil {
					p.log.Error("egress proxy: connection handler panicked", "sandbox", id, "panic", r)
				}
			}()
			handle(s, c)
		}()
	}
}

// Close stops every listener, connection and tunnel, and returns when
// every handler has finished. Serve and ServeTransparent return ErrClosed.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		for l := range p.listeners {
			l.Close()
		}
		for c := range p.conns {
			c.Close()
		}
	}
	trs, pools := p.sbTransports, p.sbPools
	p.sbTransports, p.sbPools = nil, nil
	p.mu.Unlock()
	for _, cp := range pools {
		cp.close()
	}
	p.cancel()
	p.transport.CloseIdleConnections()
	p.wg.Wait()
	p.transport.CloseIdleConnections()
	for _, tr := range trs {
		tr.CloseIdleConnections()
	}
	return nil
}

// transportFor is sandbox id's connection pool for plain HTTP upstreams.
func (p *Proxy) transportFor(id string) *http.Transport {
	p.mu.Lock()
	defer p.mu.Unlock()
	if tr, ok := p.sbTransports[id]; ok {
		return tr
	}
	tr := p.transport.Clone()
	if p.sbTransports == nil {
		p.sbTransports = map[string]*http.Transport{}
	}
	if !p.closed {
		p.sbTransports[id] = tr
	}
	return tr
}

// poolFor is sandbox id's pool for plain HTTP requests without a body.
func (p *Proxy) poolFor(id string) *connPool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cp, ok := p.sbPools[id]; ok {
		return cp
	}
	cp := newConnPool(p, id)
	if p.closed {
		cp.closed = true
		return cp
	}
	if p.sbPools == nil {
		p.sbPools = map[string]*connPool{}
	}
	p.sbPools[id] = cp
	return cp
}

// dropPool forgets cp, an empty pool, unless it was replaced already.
func (p *Proxy) dropPool(cp *connPool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sbPools[cp.id] == cp {
		delete(p.sbPools, cp.id)
	}
}

func (p *Proxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

func (p *Proxy) addListener(l net.Listener) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.listeners[l] = struct{}{}
	p.wg.Add(1)
	return true
}

func (p *Proxy) removeListener(l net.Listener) {
	l.Close()
	p.mu.Lock()
	delete(p.listeners, l)
	p.mu.Unlock()
	p.wg.Done()
}

// addConn admits a client connection of sandbox id, within MaxConns.
func (p *Proxy) addConn(id string, c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	if p.open[id] >= p.cfg.MaxConns {
		p.log.Warn("egress proxy: too many connections; closing a new one", "sandbox", id, "max", p.cfg.MaxConns)
		return false
	}
	p.open[id]++
	p.conns[c] = id
	p.wg.Add(1)
	return true
}

// CloseSandbox ends every client connection of sandbox id (its tunnels
// and keep-alive connections end with them), so a policy replaced or a
// sandbox let go stops applying at once, not when they go idle. Its
// listeners are the caller's to close.
func (p *Proxy) CloseSandbox(id string) {
	p.mu.Lock()
	tr, cp := p.sbTransports[id], p.sbPools[id]
	delete(p.sbTransports, id)
	delete(p.sbPools, id)
	var cs []net.Conn
	for c, sb := range p.conns {
		if sb == id {
			cs = append(cs, c)
		}
	}
	p.mu.Unlock()
	for _, c := range cs {
		c.Close()
	}
	if tr != nil {
		tr.CloseIdleConnections()
	}
	if cp != nil {
		cp.close()
	}
}

func (p *Proxy) removeConn(id string, c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	if p.open[id]--; p.open[id] <= 0 {
		delete(p.open, id)
	}
	p.mu.Unlock()
	p.wg.Done()
}

// track registers an upstream connection so that Close ends it.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = ""
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// acquireTunnel takes one of sandbox id's MaxTunnels slots.
func (p *Proxy) acquireTunnel(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tunnels[id] >= p.cfg.MaxTunnels {
		return false
	}
	p.tunnels[id]++
	return true
}

func (p *Proxy) releaseTunnel(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tunnels[id]--; p.tunnels[id] <= 0 {
		delete(p.tunnels, id)
	}
}
