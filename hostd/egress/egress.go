// Package egress is hostd's side of sandbox networking: for each sandbox
// with a network policy it serves three unix sockets in the sandbox's own
// directory (the sandbox's agent forwards its proxy, resolver and
// redirected connections to them; see guest/egressfwd), with one shared
// proxy (egress/proxy) and a resolver per sandbox (egress/dns), all
// judged by the sandbox's compiled policy and the host's address checks
// (egress/addr).
package egress

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"paddock.dev/paddock/egress"
	"paddock.dev/paddock/egress/addr"
	"paddock.dev/paddock/egress/ca"
	"paddock.dev/paddock/egress/dns"
	"paddock.dev/paddock/egress/proxy"
	"paddock.dev/paddock/egress/rules"
	"paddock.dev/paddock/guest/api"
)

// Config configures the host's egress.
type Config struct {
	// Resolver looks allowed names up (default: the host's resolver).
	Resolver egress.Resolver
	// AllowCIDRs are private ranges sandboxes may reach (on-premises
	// services); loopback, metadata and the host's own addresses never.
	AllowCIDRs []netip.Prefix
	// Dial connects to exactly the checked address (default: a dialer).
	// Tests send it to their own servers.
	Dial func(ctx context.Context, a netip.AddrPort) (net.Conn, error)
	// CA, when set, lets the proxy intercept TLS to hosts with method or
	// path rules (or a credential grant) and judge each request; sandboxes
	// must trust it (TrustPEM). Without it such HTTPS is refused.
	CA *ca.Authority
	// UpstreamRoots verify upstream servers of intercepted TLS (nil: the
	// host's roots).
	UpstreamRoots *x509.CertPool
	// Links gives sandboxes whose backend asks for it (AttachLink) a veth
	// pair to the daemon's egress namespace instead of the loopback
	// redirect, when the kernel can make one (Links says).
	Links  bool
	Logger *slog.Logger
}

// Host serves every sandbox's egress. It implements session.Egress.
type Host struct {
	log     *slog.Logger
	proxy   *proxy.Proxy
	checker *addr.Checker
	cfg     Config
	// grants is the source of credential grants (SetGrants); nil: none.
	grants atomic.Pointer[grantSource]

	// opening serialises Open and Close, so two opens of one sandbox
	// cannot leave a second set of listeners behind.
	opening sync.Mutex

	mu    sync.Mutex
	boxes map[string]*box
	linkState
}

type box struct {
	listeners []net.Listener
	dns       *dns.Server
	rec       egress.Recorder
	pol       egress.Policy
}

// New returns the host's egress; it serves nothing until Open.
func New(cfg Config) *Host {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	h := &Host{log: log, cfg: cfg, boxes: map[string]*box{}, linkState: linkState{links: map[string]*link{}},
		checker: &addr.Checker{AllowCIDRs: cfg.AllowCIDRs, HostAddrs: hostAddrs}}
	pc := proxy.Config{
		Resolver:      cfg.Resolver,
		CanonicalHost: canonicalHost,
		CanonicalPath: rules.CanonicalPath,
		CheckAddr:     h.checker.Check,
		Dial:          cfg.Dial,
		Record:        h.record,
		UpstreamRoots: cfg.UpstreamRoots,
		Grants:        h.grantsFor,
		GrantApplies:  h.grantApplies,
		Logger:        log.With("part", "egress-proxy"),
	}
	if cfg.CA != nil { // a nil *Authority in the interface would count as set
		pc.CA = cfg.CA
	}
	h.proxy = proxy.New(pc)
	return h
}

type grantSource struct{ egress.GrantSource }

// SetGrants gives the proxy its source of credential grants. The host is
// made before the session manager and the grants service that holds the
// grants (the manager needs the host), so the source is set afterwards;
// until then no sandbox has grants.
func (h *Host) SetGrants(src egress.GrantSource) {
	if src == nil {
		h.grants.Store(nil)
		return
	}
	h.grants.Store(&grantSource{src})
}

func (h *Host) grantsFor(sandbox string) []egress.Grant {
	if g := h.grants.Load(); g != nil {
		return g.GrantsFor(sandbox)
	}
	return nil
}

func (h *Host) grantApplies(sandbox string, gr egress.Grant, r egress.Request) bool {
	g := h.grants.Load()
	return g != nil && g.GrantApplies(sandbox, gr, r)
}

func canonicalHost(raw string) (string, netip.Addr, error) {
	ho, err := addr.CanonicalHost(raw)
	if err != nil {
		return "", netip.Addr{}, err
	}
	return ho.String(), ho.IP, nil
}

// hostAddrs lists the host's own addresses, which no sandbox may reach;
// the list is read again at most every 10 s (it is asked for every
// address checked).
var hostAddrs = func() func() []netip.Addr {
	var mu sync.Mutex
	var cached []netip.Addr
	var at time.Time
	return func() []netip.Addr {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(at) < 10*time.Second {
			return cached
		}
		as, err := net.InterfaceAddrs()
		if err != nil {
			return cached
		}
		cached = cached[:0:0]
		for _, a := range as {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				cached = append(cached, p.Addr())
			}
		}
		at = time.Now()
		return cached
	}
}()

// Intercepts reports whether HTTPS to hosts with method or path rules is
// judged per request (a CA is set) rather than refused.
func (h *Host) Intercepts() bool { return h.cfg.CA != nil }

// TrustPEM is the certificate sandboxes must trust for interception (nil
// without a CA).
func (h *Host) TrustPEM() []byte {
	if h.cfg.CA == nil {
		return nil
	}
	return h.cfg.CA.CertPEM()
}

// record routes an event to the recorder of the sandbox it is about.
func (h *Host) record(ev egress.Event) {
	h.mu.Lock()
	b := h.boxes[ev.Sandbox]
	h.mu.Unlock()
	if b != nil && b.rec != nil {
		b.rec(ev)
	}
}

// Open implements session.Egress: it (re)makes the sandbox's sockets in
// dir and serves them under pol.
func (h *Host) Open(sandbox, dir string, pol egress.Policy, rec egress.Recorder) error {
	h.opening.Lock()
	defer h.opening.Unlock()
	h.close(sandbox)
	b := &box{pol: pol, rec: func(ev egress.Event) {
		ev.Sandbox = sandbox
		if rec != nil {
			rec(ev)
		}
	}}
	listen := func(name string) (net.Listener, error) {
		p := filepath.Join(dir, name)
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		l, err := net.Listen("unix", p)
		if err != nil {
			return nil, fmt.Errorf("egress socket %s: %w", p, err)
		}
		os.Chmod(p, 0o600)
		b.listeners = append(b.listeners, l)
		return l, nil
	}
	fail := func(err error) error {
		for _, l := range b.listeners {
			l.Close()
		}
		return err
	}
	pl, err := listen(api.EgressProxySocket)
	if err != nil {
		return fail(err)
	}
	rl, err := listen(api.EgressRedirectSocket)
	if err != nil {
		return fail(err)
	}
	dl, err := listen(api.EgressDNSSocket)
	if err != nil {
		return fail(err)
	}
	b.dns = dns.New(dns.Config{Sandbox: sandbox, Policy: pol, Upstream: h.cfg.Resolver, Check: h.checker.Check,
		Record: b.rec, Logger: h.log.With("part", "egress-dns", "sandbox", sandbox)})
	h.mu.Lock()
	h.boxes[sandbox] = b
	lk := h.links[sandbox]
	h.mu.Unlock()
	if lk != nil {
		if err := h.serveLink(sandbox, b, lk); err != nil {
			h.close(sandbox)
			return err
		}
	}
	go h.serve("proxy", sandbox, func() error { return h.proxy.Serve(pl, sandbox, pol) })
	go h.serve("redirect", sandbox, func() error { return h.proxy.ServeTransparent(rl, sandbox, pol) })
	go h.serve("dns", sandbox, func() error { return b.dns.Serve(dl) })
	return nil
}

func (h *Host) serve(what, sandbox string, fn func() error) {
	if err := fn(); err != nil && !errors.Is(err, net.ErrClosed) {
		h.log.Debug("egress listener ended", "listener", what, "sandbox", sandbox, "err", err)
	}
}

// Close implements session.Egress: the sandbox's sockets and its link
// go.
func (h *Host) Close(sandbox string) {
	h.opening.Lock()
	defer h.opening.Unlock()
	h.close(sandbox)
	h.dropLink(sandbox)
}

func (h *Host) close(sandbox string) {
	h.mu.Lock()
	b := h.boxes[sandbox]
	delete(h.boxes, sandbox)
	h.mu.Unlock()
	if b == nil {
		return
	}
	for _, l := range b.listeners {
		l.Close()
	}
	// Connections already open end too: they were judged by the policy
	// being closed or replaced.
	h.proxy.CloseSandbox(sandbox)
	if b.dns != nil {
		b.dns.Close()
	}
}

// Shutdown stops everything.
func (h *Host) Shutdown() {
	h.mu.Lock()
	ids := make([]string, 0, len(h.boxes))
	for id := range h.boxes {
		ids = append(ids, id)
	}
	h.mu.Unlock()
	for _, id := range ids {
		h.Close(id)
	}
	h.opening.Lock()
	h.mu.Lock()
	ids = ids[:0]
	for id := range h.links {
		ids = append(ids, id)
	}
	h.mu.Unlock()
	for _, id := range ids {
		h.dropLink(id)
	}
	h.shut = true
	if h.lns != nil {
		h.lns.close()
		h.lns = nil
	}
	h.opening.Unlock()
	h.proxy.Close()
}
