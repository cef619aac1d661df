package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"paddock.dev/paddock/egress"
	"paddock.dev/paddock/guest/api"
)

// redirectPrefix starts the line the sandbox's agent writes before the
// bytes of a connection that nftables redirected to the proxy.
const redirectPrefix = api.RedirectHeader + " "

// maxRedirectLine bounds that line: the prefix, "[IPv6%zone]:port", "\r\n".
const maxRedirectLine = 128

// serveRedirected serves one redirected connection: port 80 as HTTP,
// port 443 as TLS judged by its SNI, anything else refused.
func (p *Proxy) serveRedirected(sb *sandbox, c net.Conn) {
	c.SetReadDeadline(time.Now().Add(p.cfg.HeaderTimeout))
	cc := p.newClientConn(c)
	dst, err := readRedirect(cc)
	if err != nil {
		if !quietEnd(err) {
			p.log.Warn("egress proxy: bad redirect line; closing", "sandbox", sb.id, "err", err)
		}
		return
	}
	p.serveTo(sb, cc, dst)
}

// serveTo serves a redirected connection by its original destination's
// port.
func (p *Proxy) serveTo(sb *sandbox, cc *clientConn, dst netip.AddrPort) {
	switch dst.Port() {
	case 80:
		p.serveHTTP(sb, cc, 80)
	case 443:
		p.serveRedirectedTLS(sb, cc, dst)
	default:
		t := &target{sb: sb, host: dst.Addr().String(), ip: dst.Addr(), port: int(dst.Port())}
		p.deny(t, ErrUnsupported, "", "only connections to ports 80 and 443 are redirected to the proxy")
	}
}

// ServeOriginalDst serves one sandbox's redirected connections on l
// until Close, and closes l, like ServeTransparent, except that a
// connection does not start with a line naming its original destination:
// dst tells it (the host's nftables redirected it there, and the
// connection's SO_ORIGINAL_DST says where it was going).
func (p *Proxy) ServeOriginalDst(l net.Listener, id string, pol egress.Policy, dst func(net.Conn) (netip.AddrPort, error)) error {
	return p.serve(l, id, pol, func(sb *sandbox, c net.Conn) {
		d, err := dst(c)
		if err != nil {
			p.log.Warn("egress proxy: original destination unknown; closing", "sandbox", sb.id, "err", err)
			return
		}
		c.SetReadDeadline(time.Now().Add(p.cfg.HeaderTimeout))
		p.serveTo(sb, p.newClientConn(c), d)
	})
}

// readRedirect reads "PADDOCK-REDIRECT <ip>:<port>\n" within
// maxRedirectLine bytes.
func readRedirect(cc *clientConn) (netip.AddrPort, error) {
	cc.lim.set(maxRedirectLine)
	line, err := cc.br.ReadSlice('\n')
	cc.lim.set(-1)
	if err != nil {
		if errors.Is(err, errHeadLimit) {
			return netip.AddrPort{}, errors.New("redirect line too long")
		}
		return netip.AddrPort{}, err
	}
	rest, ok := bytes.CutPrefix(line, []byte(redirectPrefix))
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("connection does not start with %q", redirectPrefix)
	}
	rest = bytes.TrimSuffix(bytes.TrimSuffix(rest, []byte("\n")), []byte("\r"))
	dst, err := netip.ParseAddrPort(string(rest))
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("redirect destination: %w", err)
	}
	return dst, nil
}

// serveRedirectedTLS judges a redirected TLS connection like a CONNECT to
// its SNI name on port 443, and relays it, ClientHello first, to the
// checked address of that name (not to the address the client dialled).
func (p *Proxy) serveRedirectedTLS(sb *sandbox, cc *clientConn, dst netip.AddrPort) {
	cc.conn.SetReadDeadline(time.Now().Add(p.cfg.HeaderTimeout))
	name, hello, err := readClientHello(cc.br)
	cc.conn.SetReadDeadline(time.Time{})
	t := &target{sb: sb, host: dst.Addr().String(), ip: dst.Addr(), port: 443, scheme: "https"}
	if err != nil {
		if !quietEnd(err) {
			p.deny(t, ErrBadRequest, "", err.Error())
		}
		return
	}
	if name == "" {
		p.deny(t, ErrBadRequest, "", "the TLS ClientHello has no server name (SNI); the proxy judges redirected TLS by it")
		return
	}
	t.host = clip(name, 255)
	canon, ip, err := p.cfg.CanonicalHost(name)
	if err != nil {
		p.deny(t, ErrBadRequest, "", fmt.Sprintf("server name %q: %v", t.host, err))
		return
	}
	t.host, t.ip = canon, ip
	tun, err := p.admitTunnel(p.ctx, t)
	if err != nil {
		return // recorded; a TLS client sees the connection close
	}
	if tun.inspect {
		p.runIntercepted(withPreface(&bufferedConn{Conn: cc.conn, br: cc.br}, hello), tun, false)
		return
	}
	p.runTunnel(&bufferedConn{Conn: cc.conn, br: cc.br}, tun, false, hello)
}
