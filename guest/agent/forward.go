package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"paddock.dev/paddock/errdefs"
	"paddock.dev/paddock/guest/api"
)

// forwardDialTimeout bounds the agent's connect to the sandbox's port.
const forwardDialTimeout = 5 * time.Second

// forwardDrainTimeout bounds how long a forward stays open after one
// direction has ended: the other side gets this long to finish (a
// half-close is passed on, so an app that answers and closes promptly
// still works), then both connections are closed and the slot is freed.
// Without it an idle app on the sandbox side, after hostd has gone,
// would hold the forward for good. A variable (atomic, as forwards may
// be running) so tests can shorten it.
var forwardDrainTimeout atomic.Int64 // a time.Duration

func init() { forwardDrainTimeout.Store(int64(30 * time.Second)) }

// forwardTable counts and holds the open port forwards, so the cap holds
// and Close can end them (a hijacked connection is not the http.Server's
// any more, and Shutdown would not wait for or close it).
type forwardTable struct {
	mu     sync.Mutex
	max    int                   // 0 means api.MaxForwards
	open   map[net.Conn]struct{} // both ends of every forward
	n      int                   // forwards open, counted before their conns exist
	closed bool
}

// take reserves a forward, refusing past the cap or after Close.
func (t *forwardTable) take() (release func(), err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	limit := t.max
	if limit <= 0 {
		limit = api.MaxForwards
	}
	switch {
	case t.closed:
		return nil, fmt.Errorf("%w: the agent is shutting down", ErrConflict)
	case t.n >= limit:
		return nil, fmt.Errorf("%w: %d port forwards are open, the most the agent keeps; close one", ErrConflict, limit)
	}
	t.n++
	var once sync.Once
	return func() { once.Do(func() { t.mu.Lock(); t.n--; t.mu.Unlock() }) }, nil
}

// hold registers conns until drop; false when Close ran meanwhile (the
// caller closes them itself).
func (t *forwardTable) hold(conns ...net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	if t.open == nil {
		t.open = map[net.Conn]struct{}{}
	}
	for _, c := range conns {
		t.open[c] = struct{}{}
	}
	return true
}

func (t *forwardTable) drop(conns ...net.Conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range conns {
		delete(t.open, c)
	}
}

// close ends every open forward and refuses new ones.
func (t *forwardTable) close() {
	t.mu.Lock()
	t.closed = true
	open := t.open
	t.open = nil
	t.mu.Unlock()
	for c := range open {
		c.Close()
	}
}

// handleForward answers GET /v1/forward?port=N sent with Connection:
// Upgrade and Upgrade: paddock-tcp. It connects to 127.0.0.1:N (then
// [::1]:N when nothing listens there) in the sandbox's network namespace,
// answers 101 Switching Protocols and copies bytes both ways until both
// sides are done; end of input on one side is passed on as a half-close.
// Every refusal comes before the upgrade as a JSON api.Error: 400 for a
// bad port or a missing upgrade, 409 past api.MaxForwards, 502 when
// nothing accepts the connection.
func (s *Server) handleForward(w http.ResponseWriter, r *http.Request) error {
	if r.URL.Query().Get("port") == "" {
		return fmt.Errorf("%w: query port is required (1 to 65535)", ErrBadRequest)
	}
	port, err := queryInt(r, "port", 0, 1, 65535)
	if err != nil {
		return err
	}
	if !headerHasToken(r.Header, "Connection", "upgrade") || !strings.EqualFold(strings.TrimSpace(r.Header.Get("Upgrade")), api.ForwardProtocol) {
		return fmt.Errorf("%w: a port forward is an upgrade: send Connection: Upgrade and Upgrade: %s", ErrBadRequest, api.ForwardProtocol)
	}
	release, err := s.forwards.take()
	if err != nil {
		return err
	}
	defer release()
	up, err := dialLoopback(r.Context(), int(port))
	if err != nil {
		s.log.Debug("port forward refused", "port", port, "err", err)
		writeJSON(w, http.StatusBadGateway, api.Error{Error: err.Error(), Code: errdefs.CodeBadGateway})
		return nil
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		up.Close()
		return fmt.Errorf("port forward: take over the connection: %w", err)
	}
	_ = conn.SetDeadline(time.Time{})
	if !s.forwards.hold(conn, up) {
		conn.Close()
		up.Close()
		return nil
	}
	defer s.forwards.drop(conn, up)
	// Bytes the client sent after the request and the server had read
	// already go first.
	var early []byte
	if n := brw.Reader.Buffered(); n > 0 {
		early, _ = brw.Reader.Peek(n)
	}
	if _, err := io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+api.ForwardProtocol+"\r\n\r\n"); err != nil {
		conn.Close()
		up.Close()
		return nil
	}
	if len(early) > 0 {
		if _, err := up.Write(early); err != nil {
			conn.Close()
			up.Close()
			return nil
		}
	}
	s.log.Debug("port forward opened", "port", port)
	start := time.Now()
	pipe(conn, up)
	s.log.Debug("port forward closed", "port", port, "duration", time.Since(start))
	return nil
}

// dialLoopback connects to port on the sandbox's loopback: IPv4 first,
// then IPv6 when nothing listens on IPv4 (servers bound to "localhost"
// may have taken ::1 only).
func dialLoopback(ctx context.Context, port int) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, forwardDialTimeout)
	defer cancel()
	var d net.Dialer
	p := strconv.Itoa(port)
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", p))
	if err == nil {
		return c, nil
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		if c6, err6 := d.DialContext(ctx, "tcp", net.JoinHostPort("::1", p)); err6 == nil {
			return c6, nil
		}
		return nil, fmt.Errorf("nothing is listening on port %d in the sandbox (127.0.0.1 and ::1 refused the connection); start the server first", port)
	}
	return nil, fmt.Errorf("connect to port %d in the sandbox: %v", port, err)
}

// pipe copies a→b and b→a. When one direction ends cleanly its
// destination is half-closed, so the other can still finish, but only
// for forwardDrainTimeout: after that both are closed. An error either
// way closes both at once. It returns when both are done.
func pipe(a, b net.Conn) {
	var once sync.Once
	closeBoth := func() { once.Do(func() { a.Close(); b.Close() }) }
	defer closeBoth()
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		defer func() { done <- struct{}{} }()
		if _, err := io.Copy(dst, src); err != nil {
			closeBoth()
			return
		}
		if cw, ok := dst.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
			return
		}
		closeBoth()
	}
	go cp(b, a)
	go cp(a, b)
	<-done
	// One direction has ended: the other gets forwardDrainTimeout to
	// finish, so a peer that never writes nor closes cannot keep the
	// forward (and its slot) open.
	t := time.AfterFunc(time.Duration(forwardDrainTimeout.Load()), closeBoth)
	defer t.Stop()
	<-done
}

// headerHasToken reports whether a comma-separated header lists token
// (case-insensitively), as Connection: keep-alive, Upgrade does.
func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}
