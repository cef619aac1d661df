package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// runTunnel dials tun's checked address and relays between it and client
// until either side is done, the tunnel idles for IdleTimeout, or the proxy
// closes. For a CONNECT it answers 200 (or 502) first; preface is client
// bytes already read (a peeked ClientHello) that go upstream first. It
// gives the tunnel slot back and closes client.
func (p *Proxy) runTunnel(client net.Conn, tun *tunnel, connect bool, preface []byte) {
	defer p.releaseTunnel(tun.t.sb.id)
	defer client.Close()

	up, err := p.dial(p.ctx, tun.addr)
	if err != nil {
		p.log.Info("egress proxy: tunnel dial failed", "sandbox", tun.t.sb.id, "host", tun.t.host, "addr", tun.addr, "err", err)
		if connect {
			refused := &refusal{err: ErrUpstream, target: tun.t.hostport(), reason: err.Error()}
			client.SetWriteDeadline(time.Now().Add(p.cfg.HeaderTimeout))
			client.Write(refusalResponse(refused, true))
		}
		return
	}
	if !p.track(up) {
		up.Close()
		return
	}
	defer p.untrack(up)

	if connect {
		client.SetWriteDeadline(time.Now().Add(p.cfg.HeaderTimeout))
		if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			return
		}
		// A redirected connection was judged by its ClientHello already;
		// a CONNECT was judged by its name, which the ClientHello must
		// repeat.
		client = &serverNameConn{Conn: client, p: p, t: tun.t}
	}
	if len(preface) > 0 {
		up.SetWriteDeadline(time.Now().Add(p.cfg.IdleTimeout))
		if _, err := up.Write(preface); err != nil {
			return
		}
	}
	client.SetDeadline(time.Time{})
	up.SetDeadline(time.Time{})
	relay(client, up, p.cfg.IdleTimeout)
}

// relay copies both ways between a and b until both directions end. A
// direction that reaches EOF half-closes its destination; an error, or
// idle seconds with no byte either way, closes both.
func relay(a, b net.Conn, idle time.Duration) {
	w := newWatchdog(idle, func() { a.Close(); b.Close() })
	defer w.stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		pipe(b, a, w)
	}()
	pipe(a, b, w)
	<-done
}

var relayBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// pipe copies src to dst, telling w of every read.
func pipe(dst, src net.Conn, w *watchdog) {
	bp := relayBuffers.Get().(*[]byte)
	defer relayBuffers.Put(bp)
	buf := *bp
	for {
		n, err := src.Read(buf)
		if n > 0 {
			w.touch()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				dst.Close()
				src.Close()
				return
			}
		}
		if errors.Is(err, io.EOF) {
			closeWrite(dst)
			return
		}
		if err != nil {
			dst.Close()
			src.Close()
			return
		}
	}
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
		return
	}
	c.Close()
}

// A watchdog calls fire once nothing touched it for idle.
type watchdog struct {
	idle  time.Duration
	start time.Time
	last  atomic.Int64 // time.Since(start) of the last touch
	timer *time.Timer
	fire  func()
	done  atomic.Bool
}

func newWatchdog(idle time.Duration, fire func()) *watchdog {
	w := &watchdog{idle: idle, start: time.Now(), fire: fire}
	w.timer = time.AfterFunc(idle, w.check)
	return w
}

func (w *watchdog) touch() { w.last.Store(int64(time.Since(w.start))) }

func (w *watchdog) check() {
	if w.done.Load() {
		return
	}
	quiet := time.Since(w.start) - time.Duration(w.last.Load())
	if quiet >= w.idle {
		w.fire()
		return
	}
	w.timer.Reset(w.idle - quiet)
}

func (w *watchdog) stop() {
	w.done.Store(true)
	w.timer.Stop()
}

// A bufferedConn reads what a bufio.Reader still holds before reading the
// connection itself.
type bufferedConn struct {
	net.Conn
	br *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) {
	if c.br != nil && c.br.Buffered() > 0 {
		return c.br.Read(p)
	}
	return c.Conn.Read(p)
}

func (c *bufferedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// idleConn gives every read and write IdleTimeout, so that an upstream
// that stalls mid-response cannot hold a request (and its client) forever.
type idleConn struct {
	net.Conn
	idle time.Duration
}

func (c *idleConn) Read(p []byte) (int, error) {
	c.Conn.SetReadDeadline(time.Now().Add(c.idle))
	return c.Conn.Read(p)
}

func (c *idleConn) Write(p []byte) (int, error) {
	c.Conn.SetWriteDeadline(time.Now().Add(c.idle))
	return c.Conn.Write(p)
}

// tlsHandshakeRecord is the first byte of a TLS record that carries a
// handshake message, a ClientHello among them.
const tlsHandshakeRecord = 0x16

// alertAccessDenied is a fatal TLS access_denied alert: what a TLS client
// is told when its ClientHello names another server than the tunnel's.
var alertAccessDenied = []byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 49}

// A serverNameConn is the sandbox's side of a CONNECT tunnel that is not
// intercepted. Its first read checks what the sandbox sends first: when
// it is a TLS ClientHello, the server name (SNI) in it must be the host
// the CONNECT named and the policy allowed, or the tunnel ends before a
// byte reaches upstream (recorded as a denial, the sandbox told with a TLS
// access_denied alert). Without the check, a CONNECT to an allowed host
// could carry a ClientHello naming another site the same server hosts (a
// CDN), a path-limited or an unlisted one, and be served that site.
//
// A ClientHello without a server name passes: the server then serves the
// default site of the address checked for the CONNECT name, which the
// sandbox cannot choose (IP literals cannot be sent as SNI at all).
// Bytes that are not a TLS handshake record pass as they are: there is no
// server name in them to compare (a plain HTTP request in a tunnel is
// judged by the CONNECT name alone: a known gap, docs/STATUS.md). Reads in the other
// direction are not held up, so a server that speaks first is answered.
type serverNameConn struct {
	net.Conn
	p       *Proxy
	t       *target
	checked bool
	pending []byte // what the check read, not yet returned
}

func (c *serverNameConn) Read(b []byte) (int, error) {
	if !c.checked {
		c.checked = true
		if err := c.check(); err != nil {
			return 0, err
		}
	}
	if len(c.pending) > 0 {
		n := copy(b, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}

// check reads the first bytes and, for a TLS handshake, the ClientHello.
func (c *serverNameConn) check() error {
	var first [1]byte
	n, err := c.Conn.Read(first[:])
	if n == 0 {
		if err == nil {
			err = io.ErrNoProgress
		}
		return err
	}
	if first[0] != tlsHandshakeRecord {
		c.pending = first[:]
		return nil
	}
	name, hello, err := readClientHello(io.MultiReader(bytes.NewReader(first[:]), c.Conn))
	if err != nil {
		if !quietEnd(err) {
			c.Conn.Write(alertAccessDenied)
			return c.p.deny(c.t, ErrBadRequest, "", "the tunnel did not start with a TLS ClientHello the proxy could read, so its server name could not be checked: "+clip(err.Error(), 200))
		}
		return err
	}
	if name != "" {
		canon, _, cerr := c.p.cfg.CanonicalHost(name)
		if cerr != nil || canon != c.t.host {
			c.Conn.Write(alertAccessDenied)
			return c.p.deny(c.t, ErrDenied, "", fmt.Sprintf("the TLS server name (SNI) %q is not %s, the host this tunnel was opened to and the policy judged; CONNECT to the host you name in the ClientHello",
				clip(name, 255), c.t.host))
		}
	}
	c.pending = hello
	return nil
}

func (c *serverNameConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}
