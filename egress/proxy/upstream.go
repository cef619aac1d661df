package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// connPool carries one sandbox's plain HTTP requests that have no body to
// their checked addresses, on upstream connections it keeps between
// requests, entirely in the goroutine that serves the request: write the
// request, read the response head, and hand the body straight to the
// client. http.Transport does the same with a reading and a writing
// goroutine per connection and a read always waiting on each idle one, so
// a request costs it several goroutine hand-offs and one more read; on
// the loopback benchmark that is a fifth of the proxy's time. Requests
// with a body keep going through the Transport, which writes the body
// while it reads the response (an upstream may answer before it has read
// an upload, and a single goroutine would wait on both ends).
//
// Like the Transport it keeps at most maxIdlePerAddr idle connections per
// address and maxIdle in all, drops those idle for longer than the
// proxy's IdleTimeout, and never shares a connection between sandboxes
// (each sandbox has its own pool). A kept connection that the upstream
// closed is found before it is used (a peek that does not block), and a
// request that found it closed anyway, before any byte of an answer, is
// sent once more on a new connection when it can be replayed.
type connPool struct {
	p  *Proxy
	id string // the sandbox

	mu     sync.Mutex
	idle   map[netip.AddrPort][]*upConn // most recently used last
	nidle  int
	closed bool
	reaper *time.Timer // armed while connections are kept
}

const (
	maxIdlePerAddr = 8
	maxIdle        = 64
)

func newConnPool(p *Proxy, id string) *connPool {
	return &connPool{p: p, id: id, idle: map[netip.AddrPort][]*upConn{}}
}

// upConn is one upstream connection with its buffers.
type upConn struct {
	addr   netip.AddrPort
	raw    net.Conn // as dialled: closing it ends the connection
	rd     upReader
	lim    headLimit
	br     *bufio.Reader
	bw     *bufio.Writer
	idleAt time.Time
}

// upReader reads an upstream connection within a deadline: until, while
// a response head is awaited (the whole head must come by then, as with
// the Transport's ResponseHeaderTimeout), else IdleTimeout from each read
// (a body may stream for as long as it keeps coming).
type upReader struct {
	c     net.Conn
	idle  time.Duration
	until time.Time
}

func (r *upReader) Read(p []byte) (int, error) {
	if r.until.IsZero() {
		r.c.SetReadDeadline(time.Now().Add(r.idle))
	} else {
		r.c.SetReadDeadline(r.until)
	}
	return r.c.Read(p)
}

func (p *connPool) newConn(ctx context.Context, addr netip.AddrPort) (*upConn, error) {
	c, err := p.p.dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	uc := &upConn{addr: addr, raw: c, rd: upReader{c: c, idle: p.p.cfg.IdleTimeout}}
	uc.lim = headLimit{r: &uc.rd, n: -1}
	uc.br = bufio.NewReaderSize(&uc.lim, 16<<10)
	uc.bw = bufio.NewWriterSize(&idleConn{Conn: c, idle: p.p.cfg.IdleTimeout}, 8<<10)
	return uc, nil
}

// get returns a kept connection to addr that still looks open, or nil.
func (p *connPool) get(addr netip.AddrPort) *upConn {
	now := time.Now()
	for {
		p.mu.Lock()
		cs := p.idle[addr]
		if len(cs) == 0 {
			p.mu.Unlock()
			return nil
		}
		uc := cs[len(cs)-1]
		cs[len(cs)-1] = nil
		if len(cs) == 1 {
			delete(p.idle, addr)
		} else {
			p.idle[addr] = cs[:len(cs)-1]
		}
		p.nidle--
		p.mu.Unlock()
		if now.Sub(uc.idleAt) < p.p.cfg.IdleTimeout && uc.br.Buffered() == 0 && stillOpen(uc.raw) {
			return uc
		}
		uc.raw.Close()
	}
}

// put keeps uc for another request, or closes it when the pool is full or
// closed.
func (p *connPool) put(uc *upConn) {
	uc.idleAt = time.Now()
	p.mu.Lock()
	if p.closed || p.nidle >= maxIdle || len(p.idle[uc.addr]) >= maxIdlePerAddr {
		p.mu.Unlock()
		uc.raw.Close()
		return
	}
	p.idle[uc.addr] = append(p.idle[uc.addr], uc)
	p.nidle++
	if p.reaper == nil {
		p.reaper = time.AfterFunc(p.p.cfg.IdleTimeout, p.reap)
	}
	p.mu.Unlock()
}

// reap closes the connections kept longer than IdleTimeout, and comes
// back while any are kept. An empty pool leaves the proxy's map (a
// request that still holds it only puts a connection back that the next
// reap closes).
func (p *connPool) reap() {
	cutoff := time.Now().Add(-p.p.cfg.IdleTimeout)
	var old []*upConn
	p.mu.Lock()
	if p.closed || p.reaper == nil {
		p.mu.Unlock()
		return // close took everything
	}
	for a, cs := range p.idle {
		keep := cs[:0]
		for _, uc := range cs {
			if uc.idleAt.After(cutoff) {
				keep = append(keep, uc)
			} else {
				old = append(old, uc)
			}
		}
		clear(cs[len(keep):])
		if len(keep) == 0 {
			delete(p.idle, a)
		} else {
			p.idle[a] = keep
		}
	}
	p.nidle -= len(old)
	empty := p.nidle == 0
	if empty {
		p.reaper = nil
	} else {
		p.reaper.Reset(p.p.cfg.IdleTimeout / 2)
	}
	p.mu.Unlock()
	for _, uc := range old {
		uc.raw.Close()
	}
	if empty {
		p.p.dropPool(p)
	}
}

// close closes every kept connection; later ones are closed when done.
func (p *connPool) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.nidle, p.closed = map[netip.AddrPort][]*upConn{}, 0, true
	if p.reaper != nil {
		p.reaper.Stop()
		p.reaper = nil
	}
	p.mu.Unlock()
	for _, cs := range idle {
		for _, uc := range cs {
			uc.raw.Close()
		}
	}
}

// stillOpen reports whether a kept connection is neither closed by its
// peer nor holding bytes nobody asked for, without blocking.
func stillOpen(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true // cannot tell: a request that finds it closed is retried
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := false
	var b [1]byte
	if err := rc.Read(func(fd uintptr) bool {
		n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		open = n < 0 && errors.Is(err, unix.EAGAIN) // nothing to read, and not the end
		return true
	}); err != nil {
		return false
	}
	return open
}

// errBeforeAnswer marks a connection that the upstream closed (or
// reset) before any byte of an answer came: on a kept connection, one it
// closed while it was idle. A timeout is not one: the upstream may be
// working on the request.
var errBeforeAnswer = errors.New("the connection ended before any answer")

// beforeAnswer wraps err in errBeforeAnswer when it says the connection
// was closed or reset.
func beforeAnswer(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return fmt.Errorf("%w: %w", errBeforeAnswer, err)
	}
	return err
}

// roundTrip sends req (which has no body) to addr and returns the
// response; its body, read to the end, gives the connection back.
func (p *connPool) roundTrip(req *http.Request, addr netip.AddrPort) (*http.Response, error) {
	ctx := req.Context()
	for try := 0; ; try++ {
		var uc *upConn
		if try == 0 {
			uc = p.get(addr)
		} // a retry goes on a new connection
		kept := uc != nil
		if !kept {
			var err error
			if uc, err = p.newConn(ctx, addr); err != nil {
				return nil, err
			}
		}
		// Ending the request (the client went away, the proxy closes)
		// ends the connection, and whatever waits on it.
		stop := context.AfterFunc(ctx, func() { uc.raw.Close() })
		resp, err := p.exchange(uc, req)
		if err == nil {
			b := &upBody{rc: resp.Body, uc: uc, pool: p, stop: stop, keep: !resp.Close}
			if resp.Body == http.NoBody {
				b.release(true) // nothing to read: the connection is free now
			} else {
				resp.Body = b
			}
			return resp, nil
		}
		stop()
		uc.raw.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if kept && try == 0 && errors.Is(err, errBeforeAnswer) && replayable(req) {
			continue
		}
		return nil, err
	}
}

// exchange writes req on uc and reads the response head (skipping 1xx
// interim answers), within the proxy's limits on head size and time.
func (p *connPool) exchange(uc *upConn, req *http.Request) (*http.Response, error) {
	if err := req.Write(uc.bw); err != nil {
		return nil, beforeAnswer(err)
	}
	if err := uc.bw.Flush(); err != nil {
		return nil, beforeAnswer(err)
	}
	uc.rd.until = time.Now().Add(p.p.cfg.IdleTimeout) // for the whole head
	defer func() { uc.rd.until = time.Time{} }()
	if _, err := uc.br.Peek(1); err != nil {
		return nil, beforeAnswer(err)
	}
	for range 8 {
		uc.lim.set(maxResponseHeaderBytes)
		resp, err := http.ReadResponse(uc.br, req)
		hit := uc.lim.hit
		uc.lim.set(-1)
		if err != nil {
			if hit {
				return nil, fmt.Errorf("the upstream's response head is over %d bytes", maxResponseHeaderBytes)
			}
			return nil, err
		}
		switch {
		case resp.StatusCode >= 200:
			return resp, nil
		case resp.StatusCode == http.StatusSwitchingProtocols:
			// The proxy drops Upgrade: nothing asked to switch.
			return nil, errors.New("the upstream switched protocols (101) unasked")
		}
	}
	return nil, errors.New("the upstream sent more than 8 interim (1xx) answers")
}

// maxResponseHeaderBytes bounds an upstream's response head, as the
// Transport's MaxResponseHeaderBytes does for requests with a body.
const maxResponseHeaderBytes = 1 << 20

// replayable reports whether a request may be sent again after its kept
// connection turned out closed: what net/http's Transport would retry.
func replayable(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return req.Header.Get("Idempotency-Key") != "" || req.Header.Get("X-Idempotency-Key") != ""
}

// upBody is a response body read straight from its upstream connection.
// At its end the connection goes back to the pool (when both sides keep
// it alive); closed before its end, the connection is closed.
type upBody struct {
	rc   io.ReadCloser
	uc   *upConn
	pool *connPool
	stop func() bool
	keep bool
	done bool
}

func (b *upBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.release(true)
	} else if err != nil {
		b.release(false)
	}
	return n, err
}

func (b *upBody) Close() error {
	b.release(false)
	return nil
}

// release ends the body once: at its end (complete) the connection is
// kept if it may be, otherwise closed.
func (b *upBody) release(complete bool) {
	if b.done {
		return
	}
	b.done = true
	if !b.stop() || !complete || !b.keep || b.uc.br.Buffered() > 0 {
		b.uc.raw.Close() // first: closing an unfinished body would read the rest
		b.rc.Close()
		return
	}
	b.rc.Close()
	b.pool.put(b.uc)
}
