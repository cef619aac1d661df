package proxy

import (
	"bufio"
	"errors"
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
