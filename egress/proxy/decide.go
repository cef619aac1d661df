package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/elazarl/goproxy"

	"paddock.dev/paddock/egress"
)

// Event kinds this package records.
const (
	kindAllow = "egress.allow"
	kindDeny  = "egress.deny"
)

// target is what one request or tunnel asks for, as the front end
// understood it.
type target struct {
	sb     *sandbox
	host   string     // canonical host, or as written when it could not be canonicalised
	ip     netip.Addr // valid when host is an IP literal
	port   int
	scheme string        // "http" or "https"
	method string        // "" for a tunnel
	path   string        // canonical path; "" for a tunnel
	icpt   *interception // set for a request read inside intercepted TLS
	grant  string        // the id of the grant injected into the request
}

// hostport is the target as messages and the ledger name it.
func (t *target) hostport() string {
	if t.host == "" {
		return ""
	}
	if t.port == 0 {
		return t.host
	}
	return net.JoinHostPort(t.host, strconv.Itoa(t.port))
}

// hostHeader is the Host header sent upstream: canonical, with the port
// only when it is not the scheme's.
func (t *target) hostHeader() string {
	if t.port == 80 && t.scheme == "http" || t.port == 443 && t.scheme == "https" {
		if t.ip.Is6() {
			return "[" + t.host + "]"
		}
		return t.host
	}
	return t.hostport()
}

type targetKey struct{}
type pinnedKey struct{}

func targetFrom(ctx context.Context) *target {
	t, _ := ctx.Value(targetKey{}).(*target)
	return t
}

// newGoproxy is the goproxy server: CONNECT is judged by judgeConnect (and
// refused by the last handler if it ever returned nothing), plain requests
// by judgeRequest, and transport failures turned into 502s by
// upstreamFailure. Its built-in CA is never used.
func (p *Proxy) newGoproxy() *goproxy.ProxyHttpServer {
	gp := goproxy.NewProxyHttpServer()
	gp.Tr = p.transport
	gp.ConnectDial = nil // tunnels dial through runTunnel only
	gp.ConnectDialWithReq = nil
	gp.Logger = goproxyLogger{p}
	gp.KeepAcceptEncoding = true
	gp.NonproxyHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The front end makes every URL absolute; this is only a backstop.
		http.Error(w, refusalBody(&refusal{err: ErrBadRequest, reason: "not a proxy request"}), http.StatusBadRequest)
	})
	gp.OnRequest().HandleConnectFunc(p.judgeConnect)
	gp.OnRequest().HandleConnectFunc(func(host string, ctx *goproxy.ProxyCtx) (*goproxy.ConnectAction, string) {
		return rejectConnect, host // deny by default
	})
	gp.OnRequest().DoFunc(p.judgeRequest)
	gp.OnResponse().DoFunc(p.upstreamFailure)
	return gp
}

var rejectConnect = &goproxy.ConnectAction{Action: goproxy.ConnectReject}

// judgeRequest decides one plain HTTP request: the policy on the canonical
// host, method and path, then the address. An allowed request leaves with
// its URL pointing at the checked address, so the transport neither
// resolves nor can reach anything else.
func (p *Proxy) judgeRequest(r *http.Request, ctx *goproxy.ProxyCtx) (*http.Request, *http.Response) {
	t := targetFrom(r.Context())
	if t == nil {
		return nil, p.refusalResponse(r, &refusal{err: ErrBadRequest, reason: "request did not come through the front end"})
	}
	d := t.sb.pol.Decide(egress.Request{
		Sandbox: t.sb.id, Host: t.host, Port: t.port, Scheme: t.scheme, Method: t.method, Path: t.path,
	})
	if !d.Allow {
		return nil, p.refusalResponse(r, p.deny(t, ErrDenied, d.Rule, denyReason(t, d)))
	}
	if t.icpt != nil {
		return p.forwardIntercepted(r, ctx, t, d)
	}
	addr, err := p.resolve(r.Context(), t)
	if err != nil {
		return nil, p.refusalResponse(r, err)
	}
	p.allow(t, d.Rule)

	out := r.WithContext(context.WithValue(r.Context(), pinnedKey{}, addr))
	u := *r.URL
	u.Host = addr.String()
	out.URL = &u
	out.Host = t.hostHeader()
	removeHopByHop(out.Header)
	out.Header.Del("Expect") // the front end answers 100-continue itself
	// Connection is hop-by-hop: a client closing its own connection
	// after this request says nothing about the upstream one.
	out.Close = false
	// The sandbox's own pools: an upstream connection is never shared
	// with another sandbox. A request without a body goes in this
	// goroutine (connPool); one with a body through the Transport.
	if out.Body == nil || out.Body == http.NoBody {
		cp := p.poolFor(t.sb.id)
		ctx.RoundTripper = goproxy.RoundTripperFunc(func(req *http.Request, _ *goproxy.ProxyCtx) (*http.Response, error) {
			return cp.roundTrip(req, addr)
		})
		return out, nil
	}
	tr := p.transportFor(t.sb.id)
	ctx.RoundTripper = goproxy.RoundTripperFunc(func(req *http.Request, _ *goproxy.ProxyCtx) (*http.Response, error) {
		return tr.RoundTrip(req)
	})
	return out, nil
}

// upstreamFailure turns a failed round trip into a 502 naming the host.
func (p *Proxy) upstreamFailure(resp *http.Response, ctx *goproxy.ProxyCtx) *http.Response {
	if resp != nil || ctx.Error == nil {
		return resp
	}
	name := ctx.Req.Host
	if t := targetFrom(ctx.Req.Context()); t != nil {
		name = t.hostport()
	}
	p.log.Info("egress proxy: upstream failed", "host", name, "err", ctx.Error)
	return p.refusalResponse(ctx.Req, &refusal{err: ErrUpstream, target: name, reason: ctx.Error.Error()})
}

// judgeConnect decides a CONNECT tunnel before any byte is relayed.
func (p *Proxy) judgeConnect(host string, ctx *goproxy.ProxyCtx) (*goproxy.ConnectAction, string) {
	t := targetFrom(ctx.Req.Context())
	if t == nil {
		ctx.Resp = p.refusalResponse(ctx.Req, &refusal{err: ErrBadRequest, reason: "request did not come through the front end"})
		return rejectConnect, host
	}
	tun, err := p.admitTunnel(ctx.Req.Context(), t)
	if err != nil {
		ctx.Resp = p.refusalResponse(ctx.Req, err)
		return rejectConnect, host
	}
	return &goproxy.ConnectAction{
		Action: goproxy.ConnectHijack,
		Hijack: func(_ *http.Request, client net.Conn, _ *goproxy.ProxyCtx) {
			if tun.inspect {
				p.runIntercepted(client, tun, true)
				return
			}
			p.runTunnel(client, tun, true, nil)
		},
	}, host
}

// A tunnel is an admitted connection: its checked address and a slot of
// its sandbox's MaxTunnels, which runTunnel gives back.
type tunnel struct {
	t       *target
	addr    netip.AddrPort
	inspect bool // TLS is intercepted and judged per request
}

// admitTunnel decides a tunnel to t (a CONNECT, or a redirected TLS
// connection): policy, interception, address, and the tunnel limit. Every
// outcome is recorded.
func (p *Proxy) admitTunnel(ctx context.Context, t *target) (*tunnel, error) {
	d := t.sb.pol.Tunnel(t.host, t.port)
	if !d.Allow {
		return nil, p.deny(t, ErrDenied, d.Rule, denyReason(t, d))
	}
	grant := p.anyGrant(t)
	inspect := d.Inspect || grant
	if inspect {
		if err := p.intercept(t, d, grant); err != nil {
			return nil, err
		}
	}
	addr, err := p.resolve(ctx, t)
	if err != nil {
		return nil, err
	}
	if !p.acquireTunnel(t.sb.id) {
		return nil, p.deny(t, ErrTooManyTunnels, d.Rule,
			fmt.Sprintf("the sandbox already has %d open tunnels; close some and retry", p.cfg.MaxTunnels))
	}
	p.allow(t, d.Rule)
	return &tunnel{t: t, addr: addr, inspect: inspect}, nil
}

// intercept decides whether a tunnel that must be intercepted (its host
// has method or path rules, or a credential grant) can be: only with a CA
// configured (Paddock's own, never goproxy's). Without one it fails
// closed here, for CONNECT and redirected TLS alike.
func (p *Proxy) intercept(t *target, d egress.Decision, grant bool) error {
	if p.cfg.CA != nil {
		return nil
	}
	why := " has method or path rules, which HTTPS can only meet"
	if grant && !d.Inspect {
		why = " has a credential grant, which HTTPS can only carry"
	}
	return p.deny(t, ErrNeedsInterception, d.Rule,
		t.host+why+" with TLS interception, and this proxy has no CA to intercept TLS with")
}

// resolve looks t's host up once (an IP literal is not looked up), checks
// every answer, and returns the first address that passed, with t's port.
// A refusal is recorded.
func (p *Proxy) resolve(ctx context.Context, t *target) (netip.AddrPort, error) {
	var addrs []netip.Addr
	if t.ip.IsValid() {
		addrs = []netip.Addr{t.ip}
	} else {
		lctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
		// Fully qualified, so the host's search domains are never tried
		// (a name would otherwise be looked up under an internal one).
		found, err := p.cfg.Resolver.LookupNetIP(lctx, "ip", t.host+".")
		cancel()
		if err != nil {
			return netip.AddrPort{}, p.deny(t, ErrUnresolvable, "", fmt.Sprintf("looking %s up failed: %v", t.host, err))
		}
		if len(found) == 0 {
			return netip.AddrPort{}, p.deny(t, ErrUnresolvable, "", t.host+" has no addresses")
		}
		addrs = found
	}
	var why []string
	for _, a := range addrs {
		err := p.cfg.CheckAddr(a)
		if err == nil && a.Zone() == "" {
			return netip.AddrPortFrom(a, uint16(t.port)), nil
		}
		if err == nil {
			err = errors.New("a zoned address")
		}
		if len(why) < 3 {
			w := err.Error()
			if !strings.Contains(w, a.String()) {
				w = a.String() + ": " + w
			}
			why = append(why, w)
		}
	}
	reason := strings.Join(why, "; ")
	if len(addrs) > len(why) {
		reason += fmt.Sprintf(" (and %d more refused)", len(addrs)-len(why))
	}
	if !t.ip.IsValid() {
		reason = t.host + " resolves only to refused addresses: " + reason
	}
	return netip.AddrPort{}, p.deny(t, ErrAddressRefused, "", reason)
}

// dialPinned is the transport's only way out: it dials the address that
// judgeRequest checked and put in the request, and nothing else. A host
// name never reaches it, so the transport can never resolve.
func (p *Proxy) dialPinned(ctx context.Context, network, addr string) (net.Conn, error) {
	pinned, _ := ctx.Value(pinnedKey{}).(netip.AddrPort)
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !pinned.IsValid() || ap != pinned {
		return nil, fmt.Errorf("%w: refusing to dial %q, which is not the checked address", ErrUpstream, addr)
	}
	c, err := p.dial(ctx, ap)
	if err != nil {
		return nil, err
	}
	return &idleConn{Conn: c, idle: p.cfg.IdleTimeout}, nil
}

// dial connects to exactly addr, within DialTimeout.
func (p *Proxy) dial(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
	defer cancel()
	return p.cfg.Dial(dctx, addr)
}

func denyReason(t *target, d egress.Decision) string {
	if d.Reason != "" {
		return d.Reason
	}
	return "no rule allows " + t.host
}

// deny records a refusal and returns it.
func (p *Proxy) deny(t *target, kind error, rule, reason string) error {
	p.record(kindDeny, t, rule, reason)
	p.log.Info("egress denied", "sandbox", t.sb.id, "host", t.host, "port", t.port,
		"method", t.method, "why", kind, "reason", reason)
	return &refusal{err: kind, target: t.hostport(), reason: reason}
}

func (p *Proxy) allow(t *target, rule string) {
	p.record(kindAllow, t, rule, "")
	p.log.Debug("egress allowed", "sandbox", t.sb.id, "host", t.host, "port", t.port, "method", t.method, "rule", rule)
}

// record sends one decision to the ledger: never a header or a body.
func (p *Proxy) record(kind string, t *target, rule, reason string) {
	p.cfg.Record(egress.Event{
		Sandbox: t.sb.id,
		Kind:    kind,
		Host:    clip(t.host, 255),
		Port:    t.port,
		Method:  clip(t.method, 32),
		Path:    clip(t.path, 1024),
		Rule:    rule,
		Reason:  clip(reason, 1024),
		Grant:   t.grant,
	})
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// refusalResponse is err as a goproxy response to r.
func (p *Proxy) refusalResponse(r *http.Request, err error) *http.Response {
	resp := goproxy.NewResponse(r, "text/plain; charset=utf-8", statusOf(err), refusalBody(err))
	resp.Header.Set("X-Content-Type-Options", "nosniff")
	resp.Header.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	return resp
}

// hopByHop are the headers that belong to one connection, not the request.
var hopByHop = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// removeHopByHop deletes h's hop-by-hop headers, and those its Connection
// header names.
func removeHopByHop(h http.Header) {
	for _, v := range h.Values("Connection") {
		for f := range strings.SplitSeq(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, k := range hopByHop {
		h.Del(k)
	}
}

// goproxyLogger sends goproxy's warnings to the proxy's log.
type goproxyLogger struct{ p *Proxy }

func (l goproxyLogger) Printf(format string, v ...any) {
	l.p.log.Debug("goproxy: " + strings.TrimSpace(fmt.Sprintf(format, v...)))
}
