// Package vmchan is the agent channel of a virtual machine: one byte
// stream between the host and the guest agent (a virtio-serial port the
// host reaches through a unix socket QEMU serves, or a vsock connection
// the host dials where /dev/vhost-vsock exists), a short line-based
// handshake on it, then a yamux session that carries many streams at once.
//
// The handshake exists because the stream outlives either end's idea of
// it. A VM restored from a memory checkpoint wakes up in the middle of
// whatever session it had when it was saved, and a daemon that restarts
// finds a guest mid-session too. So every connection starts the same way:
//
//	host  → guest   Reset             ("\xffPADDOCK-RESET\n": not a yamux frame,
//	                                   so a guest still in an old session drops it)
//	guest → host    PADDOCK-WAITING <boot id>\n   (every 250 ms until it hears hello)
//	host  → guest   PADDOCK-HELLO <json Hello>\n  (to the first waiting line; again
//	                                   only if no answer came in 5 s)
//	guest → host    PADDOCK-READY <nonce>\n       (after it applied the hello)
//	both            yamux: the host is the client, the guest the server
//
// Each side skips what it does not expect (stale frames of an old session,
// repeated waiting lines) with every line length bounded. The host opens
// streams to reach the agent's HTTP API; the guest opens streams to reach
// the host's egress sockets, each starting with "EGRESS <socket name>\n".
package vmchan

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/yamux"

	"paddock.dev/paddock/guest/api"
)

// PortName is the virtserialport name; the guest opens PortPath.
const (
	PortName = "paddock.agent"
	PortPath = "/dev/virtio-ports/" + PortName
	// VsockPort is the agent's port when the channel is vsock (on hosts
	// with /dev/vhost-vsock): the host dials the guest's CID there, and
	// each connection begins with the same handshake. Ports below 1024
	// need CAP_NET_BIND_SERVICE, so only the guest's PID 1 can bind it,
	// never a command the agent runs.
	VsockPort = 700
	// CmdlineKey and CmdlineVsock: "paddock.chan=vsock" on the kernel
	// command line says the channel is vsock (else virtio-serial).
	CmdlineKey   = "paddock.chan"
	CmdlineVsock = "vsock"
)

// Wire tokens.
const (
	Reset         = "\xffPADDOCK-RESET\n"
	waitingPrefix = "PADDOCK-WAITING "
	helloPrefix   = "PADDOCK-HELLO "
	readyPrefix   = "PADDOCK-READY "
	failedPrefix  = "PADDOCK-FAILED "
	egressPrefix  = "EGRESS "
)

// Limits.
const (
	// MaxHello bounds the hello line (its largest part is TrustPEM).
	MaxHello = 1 << 20
	// maxSkip bounds the stale bytes either side skips before giving up.
	maxSkip        = 64 << 20
	waitingEvery   = 250 * time.Millisecond
	helloRetry     = 5 * time.Second
	maxStreamLine  = 256
	MaxTrustPEM    = 256 << 10
	MaxEnv         = 256
	maxEnvEntry    = 32 << 10
	maxHostnameLen = 64
)

// Hello is what the host tells the guest at every connection. The first
// one a booted guest hears configures it; later ones (after a restore, a
// fork, a daemon restart) reset only its identity and clock, and only
// when Identity changed.
type Hello struct {
	Nonce string `json:"nonce"`
	// Identity names this machine's incarnation: a fork child or a
	// restored machine gets a new one, and the guest then takes Hostname,
	// MachineID and Seed afresh.
	Identity  string `json:"identity"`
	Hostname  string `json:"hostname"`
	MachineID string `json:"machine_id"` // 32 hex digits
	// Seed is 32 random bytes mixed into the guest's entropy pool, so
	// children of one memory snapshot do not share a random state.
	Seed []byte `json:"seed"`
	// TimeUnixNano is the host's clock; the guest sets its own from it (a
	// restored VM wakes up at its checkpoint's time).
	TimeUnixNano int64 `json:"time_unix_nano"`

	// Set once, at the first hello of a boot.
	GuestUser string   `json:"guest_user,omitempty"`
	GuestHome string   `json:"guest_home,omitempty"`
	Env       []string `json:"env,omitempty"`
	Network   string   `json:"network,omitempty"` // "offline", "proxy", "transparent"
	TrustPEM  string   `json:"trust_pem,omitempty"`
	// Overlays are copy-on-write views of image directories, mounted by
	// the guest's PID 1 at each boot (their writes live on the disk).
	Overlays []Overlay `json:"overlays,omitempty"`
}

// Overlay is one view: Lower, a directory of the image, shown at Target
// with the agent's writes kept apart.
type Overlay struct {
	Lower  string `json:"lower"`
	Target string `json:"target"`
}

// MaxOverlays bounds Hello.Overlays (the host allows fewer).
const MaxOverlays = 8

// cleanAbs says whether p is a clean absolute path of plain characters
// (overlayfs options use ':' and ',' as separators).
func cleanAbs(p string) bool {
	if p == "" || p == "/" || !strings.HasPrefix(p, "/") || len(p) > 1024 || strings.ContainsAny(p, ":,\\\x00\n") {
		return false
	}
	for _, part := range strings.Split(p[1:], "/") {
		if part == "" || part == "." || part == ".." {
			return false
		}
	}
	return true
}

// Validate checks what a guest must not take on trust even from its host.
func (h *Hello) Validate() error {
	switch {
	case h.Nonce == "" || len(h.Nonce) > 64:
		return errors.New("hello: bad nonce")
	case h.Identity == "" || len(h.Identity) > 64:
		return errors.New("hello: bad identity")
	case h.Hostname == "" || len(h.Hostname) > maxHostnameLen || strings.ContainsAny(h.Hostname, "/\x00 \n"):
		return fmt.Errorf("hello: bad hostname %q", h.Hostname)
	case len(h.MachineID) != 32 || !isHex(h.MachineID):
		return errors.New("hello: machine_id must be 32 hex digits")
	case len(h.Seed) > 512:
		return errors.New("hello: seed too long")
	case len(h.TrustPEM) > MaxTrustPEM:
		return errors.New("hello: trust_pem too long")
	case h.GuestHome != "" && (!strings.HasPrefix(h.GuestHome, "/") || len(h.GuestHome) > 256):
		return errors.New("hello: guest_home must be an absolute path")
	case len(h.Env) > MaxEnv:
		return errors.New("hello: too many env entries")
	}
	if len(h.Overlays) > MaxOverlays {
		return errors.New("hello: too many overlays")
	}
	for _, o := range h.Overlays {
		if !cleanAbs(o.Lower) || !cleanAbs(o.Target) {
			return fmt.Errorf("hello: overlay %q on %q: paths must be clean and absolute", o.Lower, o.Target)
		}
	}
	for _, e := range h.Env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" || len(e) > maxEnvEntry {
			return fmt.Errorf("hello: env %q is not KEY=VALUE", e)
		}
	}
	switch h.Network {
	case "", "offline", "proxy", "transparent":
	default:
		return fmt.Errorf("hello: unknown network %q", h.Network)
	}
	return nil
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}

// NewNonce returns a fresh random token.
func NewNonce() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Config is the yamux configuration both sides use: keepalives far apart
// enough for a guest under software emulation, writes that may take a
// while when the guest is paused for a checkpoint.
func Config() *yamux.Config {
	c := yamux.DefaultConfig()
	c.AcceptBacklog = 256
	c.KeepAliveInterval = 15 * time.Second
	c.ConnectionWriteTimeout = 30 * time.Second
	c.StreamOpenTimeout = 30 * time.Second
	c.StreamCloseTimeout = 2 * time.Minute
	c.LogOutput = io.Discard
	return c
}

// bufConn reads through the bufio.Reader that has already consumed the
// handshake (and maybe the first bytes after it).
type bufConn struct {
	r *bufio.Reader
	io.ReadWriteCloser
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// readLine returns the next line without its newline, or ErrLineTooLong
// (after skipping the rest of it) when it exceeds max.
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		frag, err := r.ReadSlice('\n')
		if len(line)+len(frag) > max+1 {
			// Skip the rest of this line.
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = r.ReadSlice('\n')
			}
			if err != nil {
				return nil, err
			}
			return nil, errLineTooLong
		}
		line = append(line, frag...)
		if err == nil {
			return bytes.TrimSuffix(line, []byte("\n")), nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, err
		}
	}
}

var errLineTooLong = errors.New("line too long")

// lineAfter finds prefix in a line (stale binary may precede it on the
// same line) and returns what follows it.
func lineAfter(line []byte, prefix string) (string, bool) {
	i := bytes.LastIndex(line, []byte(prefix))
	if i < 0 {
		return "", false
	}
	return string(line[i+len(prefix):]), true
}

// Host runs the host's side of the handshake on conn (connected to the
// VM's channel socket) and returns the yamux client session. ctx bounds
// the handshake (a guest that is still booting answers once its agent
// runs); on failure conn is closed.
func Host(ctx context.Context, conn net.Conn, hello Hello) (*yamux.Session, error) {
	if hello.Nonce == "" {
		hello.Nonce = NewNonce()
	}
	if err := hello.Validate(); err != nil {
		conn.Close()
		return nil, err
	}
	msg, err := json.Marshal(hello)
	if err != nil {
		conn.Close()
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	fail := func(err error) (*yamux.Session, error) {
		conn.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("vm channel handshake: %w (last: %v)", ctx.Err(), err)
		}
		return nil, fmt.Errorf("vm channel handshake: %w", err)
	}
	if _, err := io.WriteString(conn, Reset); err != nil {
		return fail(err)
	}
	r := bufio.NewReaderSize(conn, 4096)
	var skipped int
	var sent time.Time
	for {
		line, err := readLine(r, 4096)
		if errors.Is(err, errLineTooLong) {
			skipped += 4096
		} else if err != nil {
			return fail(err)
		}
		skipped += len(line)
		if skipped > maxSkip {
			return fail(errors.New("no handshake from the guest"))
		}
		if _, ok := lineAfter(line, waitingPrefix); ok {
			// Answer the first waiting line, and another only when no
			// answer came for a while (the hello was lost to a guest
			// that reopened its port): a second hello reaching a guest
			// that has already switched to yamux would break the
			// session.
			if time.Since(sent) < helloRetry {
				continue
			}
			if _, err := conn.Write(append(append([]byte(helloPrefix), msg...), '\n')); err != nil {
				return fail(err)
			}
			sent = time.Now()
			continue
		}
		if msg, ok := lineAfter(line, failedPrefix); ok && sent != (time.Time{}) {
			return fail(&GuestError{Msg: msg})
		}
		if nonce, ok := lineAfter(line, readyPrefix); ok && nonce == hello.Nonce {
			break
		}
	}
	stop()
	conn.SetDeadline(time.Time{})
	if ctx.Err() != nil {
		return fail(ctx.Err())
	}
	s, err := yamux.Client(&bufConn{r: r, ReadWriteCloser: conn}, Config())
	if err != nil {
		return fail(err)
	}
	return s, nil
}

// GuestPort is the guest's end of one open of the port. It says it is
// waiting (every 250 ms, from one goroutine for the port's life) while
// Accept runs. Close it when a session on it ends and open the port
// again: that also ends a read the old session may still have blocked.
type GuestPort struct {
	rw      io.ReadWriteCloser
	r       *bufio.Reader
	mu      sync.Mutex // one writer at a time; waiting changes under it
	waiting bool
	wake    chan struct{}
	closed  chan struct{}
	once    sync.Once
}

// NewGuestPort wraps an open port; bootID names this boot in the waiting
// lines (for the host's logs).
func NewGuestPort(rw io.ReadWriteCloser, bootID string) *GuestPort {
	p := &GuestPort{rw: rw, r: bufio.NewReaderSize(rw, 64<<10), wake: make(chan struct{}, 1), closed: make(chan struct{})}
	go p.sayWaiting(bootID)
	return p
}

func (p *GuestPort) sayWaiting(bootID string) {
	t := time.NewTicker(waitingEvery)
	defer t.Stop()
	for {
		p.mu.Lock()
		var err error
		if p.waiting {
			// Blocks while no host is connected; a host that connects
			// is what Accept waits for, so nothing waits on this lock
			// in the meantime.
			_, err = io.WriteString(p.rw, waitingPrefix+bootID+"\n")
		}
		p.mu.Unlock()
		if err != nil {
			return
		}
		select {
		case <-p.closed:
			return
		case <-p.wake:
		case <-t.C:
		}
	}
}

// Close closes the port.
func (p *GuestPort) Close() error {
	var err error
	p.once.Do(func() { close(p.closed); err = p.rw.Close() })
	return err
}

// Pending is a connection that has heard its hello; Ready answers it.
type Pending struct {
	Hello Hello
	p     *GuestPort
}

// Accept waits for a valid hello. End-of-file (no host connected yet, or
// it went away) is waited out; ctx ends the wait.
func (p *GuestPort) Accept(ctx context.Context) (*Pending, error) {
	p.mu.Lock()
	p.waiting = true
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	var skipped int
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		line, err := readLine(p.r, MaxHello+len(helloPrefix)+4096)
		switch {
		case errors.Is(err, errLineTooLong):
			skipped += MaxHello
		case errors.Is(err, io.EOF):
			select {
			case <-ctx.Done():
			case <-p.closed:
				return nil, net.ErrClosed
			case <-time.After(50 * time.Millisecond):
			}
			continue
		case err != nil:
			return nil, err
		}
		skipped += len(line)
		if skipped > maxSkip {
			skipped = 0 // a host that sends junk is still the only host
		}
		body, ok := lineAfter(line, helloPrefix)
		if !ok {
			continue
		}
		var h Hello
		dec := json.NewDecoder(strings.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&h); err != nil {
			continue
		}
		if err := h.Validate(); err != nil {
			continue
		}
		p.mu.Lock()
		p.waiting = false
		p.mu.Unlock()
		return &Pending{Hello: h, p: p}, nil
	}
}

// GuestError is a guest's refusal of its hello: the reason it could not
// apply it (an overlay over a path that is not a directory, say).
type GuestError struct{ Msg string }

func (e *GuestError) Error() string { return "the guest could not apply its configuration: " + e.Msg }

// maxFailed bounds the reason a guest sends back.
const maxFailed = 2048

// Fail tells the host why the hello could not be applied; the port is
// then of no more use to this boot.
func (pd *Pending) Fail(reason error) error {
	msg := strings.ToValidUTF8(strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, reason.Error()), "?")
	if len(msg) > maxFailed {
		msg = msg[:maxFailed]
	}
	p := pd.p
	p.mu.Lock()
	defer p.mu.Unlock()
	_, err := io.WriteString(p.rw, failedPrefix+msg+"\n")
	return err
}

// Ready tells the host the hello was applied and returns the yamux server
// session on the port.
func (pd *Pending) Ready() (*yamux.Session, error) {
	p := pd.p
	p.mu.Lock()
	_, err := io.WriteString(p.rw, readyPrefix+pd.Hello.Nonce+"\n")
	p.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return yamux.Server(&bufConn{r: p.r, ReadWriteCloser: nopCloser{p.rw}}, Config())
}

// nopCloser keeps a session's end from closing the port: the port's owner
// closes it (GuestPort.Close).
type nopCloser struct{ io.ReadWriter }

func (nopCloser) Close() error { return nil }

// OpenEgress opens a guest stream to one of the host's egress sockets.
func OpenEgress(s *yamux.Session, socket string) (net.Conn, error) {
	if !validSocket(socket) {
		return nil, fmt.Errorf("vm channel: unknown egress socket %q", socket)
	}
	c, err := s.OpenStream()
	if err != nil {
		return nil, err
	}
	if _, err := io.WriteString(c, egressPrefix+socket+"\n"); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// ReadEgress reads the header of a stream the guest opened and returns
// the socket name it asks for; the stream's remaining bytes are the
// client's. It reads byte by byte so nothing after the header is lost.
func ReadEgress(c net.Conn) (string, error) {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	var line []byte
	b := make([]byte, 1)
	for len(line) < maxStreamLine {
		if _, err := io.ReadFull(c, b); err != nil {
			return "", fmt.Errorf("vm channel: stream header: %w", err)
		}
		if b[0] == '\n' {
			name, ok := strings.CutPrefix(string(line), egressPrefix)
			if !ok || !validSocket(name) {
				return "", fmt.Errorf("vm channel: bad stream header %q", line)
			}
			return name, nil
		}
		line = append(line, b[0])
	}
	return "", errors.New("vm channel: stream header too long")
}

// validSocket: a guest may ask only for the egress sockets of
// api.EgressSockets (see guest/egressfwd); the host refuses any other.
func validSocket(name string) bool {
	for _, s := range api.EgressSockets() {
		if s == name {
			return true
		}
	}
	return false
}

// Stream is a yamux stream with the half-close net.Conn users expect:
// CloseWrite sends end-of-file and keeps reading (yamux's own Close does
// just that), Close also ends reads waiting on this side.
type Stream struct{ *yamux.Stream }

// CloseWrite half-closes the stream.
func (s Stream) CloseWrite() error { return s.Stream.Close() }

// Close closes the stream both ways.
func (s Stream) Close() error {
	err := s.Stream.Close()
	s.Stream.SetReadDeadline(time.Unix(1, 0))
	return err
}
