package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/elazarl/goproxy"
	"golang.org/x/net/http/httpguts"

	"paddock.dev/paddock/egress"
	"paddock.dev/paddock/egress/rules"
)

// TLS interception: a tunnel whose host has method or path rules, or a
// credential grant, is not relayed as bytes. The proxy ends the sandbox's
// TLS with a leaf of its own CA for the tunnel's host, reads HTTP/1.1
// requests from the decrypted stream with the same front end as plain
// HTTP, judges each one (the Host header must name the tunnel's host),
// and sends it upstream over a TLS connection of its own to the address
// the tunnel checked, verifying the upstream's certificate for the host.

// LeafIssuer issues the certificate the proxy presents to a sandbox for a
// host (a canonical name or IP literal). egress/ca's Authority is one.
type LeafIssuer interface {
	Leaf(host string) (*tls.Certificate, error)
}

// An interception is one intercepted tunnel: the tunnel, and the
// transport that carries its requests to the checked address and nowhere
// else.
type interception struct {
	tun *tunnel
	tr  *http.Transport
}

var _ goproxy.RoundTripper = (*interception)(nil)

// RoundTrip sends one judged request upstream; judgeRequest points
// goproxy at it.
func (in *interception) RoundTrip(req *http.Request, _ *goproxy.ProxyCtx) (*http.Response, error) {
	return in.tr.RoundTrip(req)
}

// runIntercepted terminates the client's TLS for tun's host and serves the
// requests inside it until the client is done, idles, or the proxy
// closes. For a CONNECT it answers 200 first (or an error, if no
// certificate can be had). It gives the tunnel slot back and closes
// client.
func (p *Proxy) runIntercepted(client net.Conn, tun *tunnel, connect bool) {
	defer p.releaseTunnel(tun.t.sb.id)
	defer client.Close()
	t := tun.t

	leaf, err := p.cfg.CA.Leaf(t.host)
	if err != nil {
		p.log.Error("egress proxy: no interception certificate", "sandbox", t.sb.id, "host", t.host, "err", err)
		if connect {
			refused := &refusal{err: ErrUpstream, target: t.hostport(), reason: "the proxy could not issue a certificate for this host"}
			client.SetWriteDeadline(time.Now().Add(p.cfg.HeaderTimeout))
			client.Write(refusalResponse(refused, true))
		}
		return
	}
	if connect {
		client.SetWriteDeadline(time.Now().Add(p.cfg.HeaderTimeout))
		if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			return
		}
	}

	var sni string
	tc := tls.Server(client, &tls.Config{
		Certificates: []tls.Certificate{*leaf},
		NextProtos:   []string{"http/1.1"},
		MinVersion:   tls.VersionTLS12,
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			sni = h.ServerName
			if sni == "" {
				return nil, nil
			}
			if canon, _, err := p.cfg.CanonicalHost(sni); err != nil || canon != t.host {
				return nil, fmt.Errorf("server name %q is not %s, the host this tunnel was opened to", clip(sni, 255), t.host)
			}
			return nil, nil
		},
	})
	tc.SetDeadline(time.Now().Add(p.cfg.HeaderTimeout))
	if err := tc.HandshakeContext(p.ctx); err != nil {
		if !quietEnd(err) {
			p.deny(t, ErrBadRequest, "", "TLS with the sandbox failed (is Paddock's CA in its trust store?): "+clip(err.Error(), 200))
		}
		return
	}
	tc.SetDeadline(time.Now().Add(p.cfg.HeaderTimeout))

	in := &interception{tun: tun, tr: p.upstreamTransport(tun)}
	defer in.tr.CloseIdleConnections()
	cc := p.newClientConn(tc)
	cc.icpt = in
	p.serveHTTP(t.sb, cc, 0)
}

// upstreamTransport carries an intercepted tunnel's requests: each new
// connection goes to the tunnel's checked address, with TLS verified for
// the tunnel's host against UpstreamRoots. HTTP/2 is not spoken.
func (p *Proxy) upstreamTransport(tun *tunnel) *http.Transport {
	want := tun.t.hostport()
	return &http.Transport{
		Proxy: nil,
		DialTLSContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			if addr != want {
				return nil, fmt.Errorf("%w: refusing to dial %q inside a tunnel to %s", ErrUpstream, addr, want)
			}
			raw, err := p.dial(ctx, tun.addr)
			if err != nil {
				return nil, err
			}
			if !p.track(raw) {
				raw.Close()
				return nil, ErrClosed
			}
			tc := tls.Client(&trackedConn{Conn: &idleConn{Conn: raw, idle: p.cfg.IdleTimeout}, p: p, raw: raw}, &tls.Config{
				ServerName: tun.t.host,
				RootCAs:    p.cfg.UpstreamRoots,
				NextProtos: []string{"http/1.1"},
				MinVersion: tls.VersionTLS12,
			})
			if err := tc.HandshakeContext(ctx); err != nil {
				tc.Close()
				return nil, fmt.Errorf("TLS with %s at %s: %w", want, tun.addr, err)
			}
			return tc, nil
		},
		TLSNextProto:           map[string]func(string, *tls.Conn) http.RoundTripper{},
		DisableCompression:     true,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        p.cfg.IdleTimeout,
		ResponseHeaderTimeout:  p.cfg.IdleTimeout,
		MaxResponseHeaderBytes: 1 << 20,
		ReadBufferSize:         16 << 10,
		WriteBufferSize:        8 << 10,
	}
}

// trackedConn is an upstream connection that the proxy's Close ends; its
// own Close forgets it.
type trackedConn struct {
	net.Conn
	p    *Proxy
	raw  net.Conn
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() { c.p.untrack(c.raw) })
	return nil
}

// forwardIntercepted finishes judging an allowed request read inside
// intercepted TLS: a matching credential grant sets its header, and the
// request goes to the tunnel's transport, never the plain one.
func (p *Proxy) forwardIntercepted(r *http.Request, ctx *goproxy.ProxyCtx, t *target, d egress.Decision) (*http.Request, *http.Response) {
	out := r.WithContext(r.Context())
	u := *r.URL
	u.Scheme, u.Host = "https", t.hostport()
	out.URL = &u
	out.Host = t.hostHeader()
	removeHopByHop(out.Header)
	out.Header.Del("Expect") // the front end answers 100-continue itself
	if g, ok := p.matchGrant(t, time.Now()); ok {
		out.Header.Set(grantHeader(g), g.Value) // replaces whatever the sandbox sent
		t.grant = g.ID
	}
	p.allow(t, d.Rule)
	ctx.RoundTripper = t.icpt
	return out, nil
}

// grantHeader is the header a grant sets.
func grantHeader(g egress.Grant) string {
	if g.Header == "" {
		return "Authorization"
	}
	return g.Header
}

// grantCovers reports whether g is live at now and names host.
func grantCovers(g egress.Grant, host string, port int, ip bool, now time.Time) bool {
	// A grant is for the host's HTTPS service: another port of the same
	// name is another service, which never gets the credential.
	if port != 443 || !now.Before(g.ExpiresAt) {
		return false
	}
	for _, h := range g.Hosts {
		if hostMatches(h, host, ip) {
			return true
		}
	}
	return false
}

// hostMatches matches a grant's host pattern like a policy's: an exact
// name or IP literal, or "*.suffix" for names below suffix (not suffix
// itself, never an IP).
func hostMatches(pattern, host string, ip bool) bool {
	pat := strings.TrimSuffix(strings.ToLower(pattern), ".")
	if suffix, ok := strings.CutPrefix(pat, "*."); ok {
		return !ip && suffix != "" && strings.HasSuffix(host, "."+suffix)
	}
	if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(pat, "["), "]")); err == nil {
		return ip && a.Zone() == "" && a.Unmap().String() == host
	}
	return !ip && pat == host
}

// anyGrant reports whether t's sandbox has a live grant for t's host: such
// a host is intercepted whatever the policy says, so that the grant can
// only ever be carried inside TLS.
func (p *Proxy) anyGrant(t *target) bool {
	if p.cfg.Grants == nil {
		return false
	}
	now := time.Now()
	for _, g := range p.cfg.Grants(t.sb.id) {
		if grantCovers(g, t.host, t.port, t.ip.IsValid(), now) {
			return true
		}
	}
	return false
}

// matchGrant returns the first of t's sandbox's grants that covers t's
// request: live, for its host, and within its methods and paths (matched
// like egress/rules' limits). A path that is not canonical matches none,
// and a grant whose limits or header do not check out matches nothing.
func (p *Proxy) matchGrant(t *target, now time.Time) (egress.Grant, bool) {
	if p.cfg.Grants == nil || t.icpt == nil {
		return egress.Grant{}, false
	}
	if c, err := rules.CanonicalPath(t.path); err != nil || c != t.path {
		return egress.Grant{}, false
	}
	for _, g := range p.cfg.Grants(t.sb.id) {
		if !grantCovers(g, t.host, t.port, t.ip.IsValid(), now) {
			continue
		}
		if p.cfg.GrantApplies != nil {
			if !p.cfg.GrantApplies(t.sb.id, g, egress.Request{Sandbox: t.sb.id, Host: t.host, Port: t.port, Scheme: "https", Method: t.method, Path: t.path}) {
				continue
			}
		} else {
			lim, err := rules.NewLimits(g.Methods, g.Paths)
			if err != nil {
				p.log.Warn("egress proxy: a grant's limits are invalid; it matches nothing", "sandbox", t.sb.id, "grant", g.ID, "err", err)
				continue
			}
			if !lim.Allows(t.method, t.path) {
				continue
			}
		}
		if g.Value == "" || !httpguts.ValidHeaderFieldName(grantHeader(g)) || !httpguts.ValidHeaderFieldValue(g.Value) {
			p.log.Warn("egress proxy: a grant's header or value is unusable; it matches nothing", "sandbox", t.sb.id, "grant", g.ID)
			continue
		}
		return g, true
	}
	return egress.Grant{}, false
}

// replayConn replays a ClientHello the proxy already read before the rest
// of the connection.
type replayConn struct {
	net.Conn
	r io.Reader
}

func (c *replayConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// withPreface is c reading preface first.
func withPreface(c net.Conn, preface []byte) net.Conn {
	if len(preface) == 0 {
		return c
	}
	return &replayConn{Conn: c, r: io.MultiReader(bytes.NewReader(preface), c)}
}
