// Package dns is a sandbox's resolver: it answers A and AAAA questions for
// the names the sandbox's egress.Policy allows, and nothing else.
//
// A sandbox reaches it over a stream (its own unix socket on the host): the
// in-sandbox agent forwards the queries sent to 127.0.0.1:53, over UDP or
// TCP, as DNS-over-TCP messages (RFC 1035 §4.2.2: a 2-byte length, then the
// message). Which sandbox is asking is known from the socket, so a Server
// serves exactly one sandbox and its rate limit is that sandbox's.
//
// What it answers:
//
//   - Names the policy does not allow get NXDOMAIN, and nothing about them
//     leaves the host: no upstream lookup, no forwarded packet. A query for
//     secret-data.attacker.example is a message the sandbox can write, but
//     not one it can send.
//   - Allowed names are looked up through Config.Upstream (the host's
//     resolver), one address family per question, and answered as A or
//     AAAA records owned by the asked name, however many CNAMEs the
//     upstream followed. CNAME targets are never shown: the policy allowed
//     the name the sandbox asked for, and the proxy will judge connections
//     by that name, so the chain behind it is the host's business and
//     showing it would only tell the sandbox names it may not use.
//   - Addresses Config.Check refuses (loopback, private, metadata…) are
//     left out of the answer; if none is left the answer is NOERROR with no
//     records (NODATA), so clients give up at once instead of retrying as
//     they do on SERVFAIL or REFUSED. An answer with refused addresses is
//     a dns.deny event naming them. An allowed name the upstream does not
//     know gets NODATA too (see lookup), and an upstream failure SERVFAIL.
//   - At most 8 addresses are answered, with the TTL of Config.TTL (60 s
//     at most; the upstream's TTLs are not known through egress.Resolver).
//   - Every other query type (TXT, ANY, MX, SRV, PTR, NULL, AXFR, IXFR,
//     HTTPS…) is REFUSED, other classes than IN are REFUSED, other opcodes
//     than QUERY get NOTIMP, a query without exactly one question gets
//     FORMERR, IP literals and names that are not host names get NXDOMAIN.
//     None of them is forwarded. Without a Policy every name is denied.
//   - Over the rate limit (Config.RatePerSecond, Config.Burst) every query
//     is REFUSED.
//
// Every denial is an egress.Event of Kind "dns.deny" with the name and the
// reason, except rate-limit refusals, recorded at most once a second.
// Answers are not recorded: the proxy records the connections that follow.
//
// Responses mirror the query's ID, opcode, question, RD and CD bits. RA is
// set on every response to a QUERY: the server does recurse (through the
// host's resolver) for every name it would answer, and stub resolvers
// (Go's among them) treat an empty answer without RA or AA as a lame
// referral and fail over. EDNS0 is understood: a query with an OPT record
// gets one back (version 0, a 1232-byte payload size, the DO bit copied,
// no options echoed); a version other than 0 gets BADVERS.
package dns

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"paddock.dev/paddock/egress"
)

// Defaults for the zero values of Config.
const (
	DefaultRatePerSecond = 50
	DefaultBurst         = 100
	DefaultTTL           = 60 * time.Second
	MaxTTL               = 60 * time.Second
	DefaultMaxQueryBytes = 1024
	DefaultIdleTimeout   = 30 * time.Second
	DefaultLookupTimeout = 5 * time.Second
	DefaultMaxConns      = 64

	// maxInflight bounds the queries of one connection being answered at
	// once; the connection is not read further until one finishes.
	maxInflight = 16
	// maxAnswers bounds the addresses in one answer, so that the in-sandbox
	// agent can return any response over UDP in 512 bytes without EDNS
	// (12 + a 259-byte question + 8 AAAA of 28 bytes, compressed).
	maxAnswers = 8
	// ednsPayload is the UDP payload size advertised in responses (the
	// DNS flag day 2020 value).
	ednsPayload = 1232
	// writeTimeout bounds the write of one response.
	writeTimeout = 5 * time.Second
)

// ErrServerClosed is returned by Serve after Close. It wraps
// net.ErrClosed, so a caller that checks for a closed listener need not
// tell the two apart.
var ErrServerClosed = fmt.Errorf("dns: server closed: %w", net.ErrClosed)

// Config is one sandbox's resolver.
type Config struct {
	// Sandbox is the sandbox (session) id, put on every event.
	Sandbox string
	// Policy decides which names are answered. Nil answers none (every
	// name gets NXDOMAIN): a Server fails closed.
	Policy egress.Policy
	// Upstream looks allowed names up; nil means net.DefaultResolver, the
	// host's. It is asked with a fully qualified name ("example.com."), so
	// the host's search domains are never appended.
	Upstream egress.Resolver
	// Check, if set, is asked about every address before it is answered;
	// an address it returns an error for is left out and recorded. Nil
	// answers whatever Upstream returned (the proxy still checks what it
	// dials).
	Check func(netip.Addr) error
	// Record receives the dns.deny events. Nil drops them.
	Record egress.Recorder
	// Logger, nil for none; give it the sandbox's attributes. Only
	// debug lines come from what the sandbox sends, so a sandbox cannot
	// flood the host's log above debug level.
	Logger *slog.Logger

	// RatePerSecond and Burst limit the queries of the sandbox (all of
	// them, answered or not). Zero (or less) means DefaultRatePerSecond,
	// and twice the rate for Burst (DefaultBurst by default).
	RatePerSecond int
	Burst         int
	// TTL of answers, at most MaxTTL so that a policy change is seen
	// within a minute. Zero (or less) means DefaultTTL; less than a
	// second, one.
	TTL time.Duration
	// MaxQueryBytes is the largest query read; a longer length prefix
	// closes the connection. Zero (or less) means DefaultMaxQueryBytes.
	// The zero values of the durations and MaxConns below, or negative
	// ones, mean their defaults too.
	MaxQueryBytes int
	// IdleTimeout closes a connection that sends nothing for this long.
	// Zero means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// LookupTimeout bounds one upstream lookup. Zero means
	// DefaultLookupTimeout.
	LookupTimeout time.Duration
	// MaxConns bounds the connections served at once; more are closed
	// as soon as they arrive. Zero means DefaultMaxConns.
	MaxConns int
}

// Server answers one sandbox's DNS queries. Build it with New.
type Server struct {
	cfg    Config
	ttl    uint32
	log    *slog.Logger
	limit  *bucket
	now    func() time.Time // the rate limiter's clock, replaced by tests
	ctx    context.Context  // cancelled by Close
	cancel context.CancelFunc

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[net.Conn]struct{}
	wg        sync.WaitGroup // ServeConn calls
}

var _ io.Closer = (*Server)(nil)

// New fills in cfg's defaults and returns a Server. It starts nothing
// and cannot fail: what is missing is defaulted or fails closed (see
// Config). Call Serve or ServeConn.
func New(cfg Config) *Server {
	if cfg.Upstream == nil {
		cfg.Upstream = net.DefaultResolver
	}
	if cfg.RatePerSecond <= 0 {
		cfg.RatePerSecond = DefaultRatePerSecond
	}
	if cfg.Burst <= 0 {
		cfg.Burst = 2 * cfg.RatePerSecond
	}
	switch {
	case cfg.TTL <= 0:
		cfg.TTL = DefaultTTL
	case cfg.TTL > MaxTTL:
		cfg.TTL = MaxTTL
	case cfg.TTL < time.Second:
		cfg.TTL = time.Second
	}
	if cfg.MaxQueryBytes <= 0 {
		cfg.MaxQueryBytes = DefaultMaxQueryBytes
	}
	cfg.MaxQueryBytes = min(cfg.MaxQueryBytes, 0xffff)
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.LookupTimeout <= 0 {
		cfg.LookupTimeout = DefaultLookupTimeout
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		cfg:       cfg,
		ttl:       uint32(cfg.TTL / time.Second),
		log:       log,
		limit:     newBucket(cfg.RatePerSecond, cfg.Burst),
		now:       time.Now,
		ctx:       ctx,
		cancel:    cancel,
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[net.Conn]struct{}),
	}
}

// Serve accepts connections on l (a stream listener: the sandbox's unix
// socket) and serves each in its own goroutine until Close, after which
// it returns ErrServerClosed. Any other accept error is returned as is.
// l is closed when Serve returns.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.Close()
		return ErrServerClosed
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
		l.Close()
	}()

	var backoff time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if s.isClosed() {
				return ErrServerClosed
			}
			if retryable(err) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed, retrying", slog.Any("error", err), slog.Duration("backoff", backoff))
				select {
				case <-time.After(backoff):
				case <-s.ctx.Done():
				}
				continue
			}
			return err
		}
		backoff = 0
		go s.ServeConn(c)
	}
}

// ServeConn serves one connection until the peer closes it, it stays idle
// for Config.IdleTimeout, it breaks the framing, or Close is called; then
// it closes c. Queries are answered concurrently (up to 16 at a time), so
// responses may come back out of order (RFC 7766 §6.2.1.1): match them
// by ID.
func (s *Server) ServeConn(c net.Conn) {
	s.mu.Lock()
	if s.closed || len(s.conns) >= s.cfg.MaxConns {
		full := !s.closed
		s.mu.Unlock()
		if full {
			// Debug: the sandbox controls how often this happens.
			s.log.Debug("too many dns connections, closing one", slog.Int("max_conns", s.cfg.MaxConns))
		}
		c.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		s.wg.Done()
	}()
	s.serveConn(c)
}

func (s *Server) serveConn(c net.Conn) {
	var (
		wmu      sync.Mutex // one response written at a time
		inflight sync.WaitGroup
		sem      = make(chan struct{}, maxInflight)
	)
	defer func() {
		inflight.Wait()
		c.Close()
	}()
	bodyTimeout := min(s.cfg.IdleTimeout, 5*time.Second)
	var prefix [2]byte
	for {
		c.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout))
		if _, err := io.ReadFull(c, prefix[:]); err != nil {
			if !errors.Is(err, io.EOF) && !s.isClosed() {
				s.log.Debug("dns connection ended", slog.Any("error", err))
			}
			return
		}
		n := int(binary.BigEndian.Uint16(prefix[:]))
		if n == 0 || n > s.cfg.MaxQueryBytes {
			s.log.Debug("dns query length out of range, closing connection",
				slog.Int("length", n), slog.Int("max", s.cfg.MaxQueryBytes))
			return
		}
		query := make([]byte, n)
		c.SetReadDeadline(time.Now().Add(bodyTimeout))
		if _, err := io.ReadFull(c, query); err != nil {
			s.log.Debug("dns query cut short, closing connection", slog.Any("error", err))
			return
		}
		select {
		case sem <- struct{}{}:
		case <-s.ctx.Done():
			return
		}
		inflight.Add(1)
		go func() {
			defer func() {
				<-sem
				inflight.Done()
			}()
			resp := s.handle(s.ctx, query)
			if resp == nil {
				return
			}
			frame := make([]byte, 2+len(resp))
			binary.BigEndian.PutUint16(frame, uint16(len(resp)))
			copy(frame[2:], resp)
			wmu.Lock()
			defer wmu.Unlock()
			c.SetWriteDeadline(time.Now().Add(writeTimeout))
			if _, err := c.Write(frame); err != nil {
				// The reader will fail next and end the connection.
				s.log.Debug("dns response not written", slog.Any("error", err))
				c.Close()
			}
		}()
	}
}

// Close stops every Serve (which return ErrServerClosed), closes every
// connection, cancels lookups in flight and waits for the connections'
// goroutines to end. It can be called more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.cancel()
	var err error
	for l := range s.listeners {
		if e := l.Close(); e != nil && !errors.Is(e, net.ErrClosed) && err == nil {
			err = e
		}
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

// retryable reports whether an accept error will pass: a timeout, or
// running out of file descriptors for a while.
func retryable(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() ||
		errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ECONNABORTED)
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// deny records a denial in the ledger (and the debug log).
func (s *Server) deny(name, reason string) {
	s.log.Debug("dns query denied", slog.String("name", name), slog.String("reason", reason))
	if s.cfg.Record != nil {
		s.cfg.Record(egress.Event{Sandbox: s.cfg.Sandbox, Kind: "dns.deny", Host: name, Reason: reason})
	}
}
