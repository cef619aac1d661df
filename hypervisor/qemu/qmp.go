package qemu

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// QMP is QEMU's control protocol: newline-delimited JSON over a socket.
// The server greets, the client negotiates with qmp_capabilities, then
// sends {"execute", "arguments", "id"} and reads {"return"|"error", "id"}
// replies interleaved with asynchronous {"event", "data", "timestamp"}
// messages. See qemu's docs/interop/qmp-spec.txt.

const (
	// DefaultMaxMessage bounds one QMP message read from QEMU.
	DefaultMaxMessage = 1 << 20
	// DefaultEventBuffer is how many events wait for a reader before
	// further ones are dropped (and counted).
	DefaultEventBuffer = 64
	// DefaultDialTimeout bounds connecting plus the greeting and
	// capabilities negotiation when ctx has no earlier deadline.
	DefaultDialTimeout = 5 * time.Second
	// writeTimeout bounds one command's write when ctx has no deadline.
	writeTimeout = 10 * time.Second
)

var (
	// ErrClosed is returned (wrapped with the cause) by Execute on a client
	// whose connection is closed: by Close, by QEMU exiting (the cause then
	// wraps io.EOF), or after a protocol error.
	ErrClosed = errors.New("qmp: connection closed")
	// ErrProtocol marks a message QEMU should never send: invalid JSON, a
	// message over the size limit, a reply without an id. The connection is
	// closed when one is seen.
	ErrProtocol = errors.New("qmp: protocol error")
	// ErrMessageTooLarge (wrapping ErrProtocol) is a message over MaxMessage.
	ErrMessageTooLarge = fmt.Errorf("%w: message too large", ErrProtocol)
)

// Error classes QEMU reports (qapi/error.json).
const (
	ClassGenericError    = "GenericError"
	ClassCommandNotFound = "CommandNotFound"
	ClassDeviceNotActive = "DeviceNotActive"
	ClassDeviceNotFound  = "DeviceNotFound"
	ClassKVMMissingCap   = "KVMMissingCap"
)

// Error is a command QEMU answered with an error; use errors.As and
// compare Class, never the text of Desc.
type Error struct {
	Command string
	Class   string
	Desc    string
}

func (e *Error) Error() string {
	return fmt.Sprintf("qmp %s: %s: %s", e.Command, e.Class, e.Desc)
}

// Event is an asynchronous QMP event such as STOP, RESUME or SHUTDOWN.
type Event struct {
	Name string
	Data json.RawMessage // nil when the event has no data
	Time time.Time
}

// Greeting is what QEMU says when a client connects.
type Greeting struct {
	Version      QMPVersion `json:"version"`
	Capabilities []string   `json:"capabilities"`
}

// QMPVersion is QEMU's version as QMP reports it (greeting, query-version).
type QMPVersion struct {
	QEMU struct {
		Major int `json:"major"`
		Minor int `json:"minor"`
		Micro int `json:"micro"`
	} `json:"qemu"`
	Package string `json:"package"`
}

// String is "major.minor.micro".
func (v QMPVersion) String() string {
	return fmt.Sprintf("%d.%d.%d", v.QEMU.Major, v.QEMU.Minor, v.QEMU.Micro)
}

// DialOptions tune a QMP connection; the zero value uses the defaults.
type DialOptions struct {
	Timeout     time.Duration // DefaultDialTimeout when 0
	MaxMessage  int           // DefaultMaxMessage when 0
	EventBuffer int           // DefaultEventBuffer when 0
	Logger      *slog.Logger  // discarded when nil
}

// Client is a QMP connection. Execute is safe for concurrent use.
type Client struct {
	conn     net.Conn
	log      *slog.Logger
	greeting Greeting

	writeMu sync.Mutex // one command on the wire at a time
	nextID  atomic.Uint64

	mu      sync.Mutex
	pending map[string]chan reply // id → waiting Execute
	err     error                 // why the connection closed; set once

	events  chan Event
	dropped atomic.Uint64
	done    chan struct{} // closed when the reader has stopped
}

// message is any message from QEMU; which fields are set tells its kind.
type message struct {
	QMP       *Greeting       `json:"QMP"`
	Return    json.RawMessage `json:"return"`
	Error     *qmpError       `json:"error"`
	ID        json.RawMessage `json:"id"`
	Event     string          `json:"event"`
	Data      json.RawMessage `json:"data"`
	Timestamp *struct {
		Seconds      int64 `json:"seconds"`
		Microseconds int64 `json:"microseconds"`
	} `json:"timestamp"`
}

type qmpError struct {
	Class string `json:"class"`
	Desc  string `json:"desc"`
}

type reply struct {
	ret json.RawMessage
	err *qmpError
}

type command struct {
	Execute   string `json:"execute"`
	Arguments any    `json:"arguments,omitempty"`
	ID        string `json:"id,omitempty"`
}

// Dial connects to QEMU's QMP unix socket at path, reads the greeting and
// negotiates capabilities, all within opts.Timeout (or ctx's deadline if
// earlier). It does not wait for the socket to appear.
func Dial(ctx context.Context, path string, opts DialOptions) (*Client, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultDialTimeout
	}
	if opts.MaxMessage <= 0 {
		opts.MaxMessage = DefaultMaxMessage
	}
	if opts.EventBuffer <= 0 {
		opts.EventBuffer = DefaultEventBuffer
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("qmp: dial %s: %w", path, err)
	}
	deadline, _ := ctx.Deadline()
	conn.SetDeadline(deadline)
	// Closing the connection is how a cancelled ctx interrupts the handshake.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	sc := newScanner(conn, opts.MaxMessage)
	c := &Client{
		conn:    conn,
		log:     opts.Logger,
		pending: map[string]chan reply{},
		events:  make(chan Event, opts.EventBuffer),
		done:    make(chan struct{}),
	}
	if err := c.handshake(sc); err != nil {
		conn.Close()
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", err, ctx.Err())
		}
		return nil, fmt.Errorf("qmp: handshake on %s: %w", path, err)
	}
	if !stop() {
		conn.Close()
		return nil, fmt.Errorf("qmp: handshake on %s: %w", path, ctx.Err())
	}
	conn.SetDeadline(time.Time{})
	go c.read(sc)
	return c, nil
}

func newScanner(r io.Reader, max int) *bufio.Scanner {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, min(max, 64<<10)), max)
	return sc
}

// handshake reads the greeting and sends qmp_capabilities. QEMU sends no
// events before negotiation, so anything else is a protocol error.
func (c *Client) handshake(sc *bufio.Scanner) error {
	m, err := next(sc)
	if err != nil {
		return err
	}
	if m.QMP == nil {
		return fmt.Errorf("%w: expected a greeting", ErrProtocol)
	}
	c.greeting = *m.QMP
	b, _ := json.Marshal(command{Execute: "qmp_capabilities"})
	if _, err := c.conn.Write(append(b, '\n')); err != nil {
		return err
	}
	m, err = next(sc)
	if err != nil {
		return err
	}
	if m.Error != nil {
		return &Error{Command: "qmp_capabilities", Class: m.Error.Class, Desc: m.Error.Desc}
	}
	if m.Return == nil {
		return fmt.Errorf("%w: expected the qmp_capabilities reply", ErrProtocol)
	}
	return nil
}

// next reads one message; a scanner error or EOF is returned as is.
func next(sc *bufio.Scanner) (*message, error) {
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var m message
		if err := json.Unmarshal(line, &m); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrProtocol, err)
		}
		return &m, nil
	}
	switch err := sc.Err(); {
	case errors.Is(err, bufio.ErrTooLong):
		return nil, ErrMessageTooLarge
	case err != nil:
		return nil, err
	}
	return nil, io.EOF
}

// Greeting returns what QEMU said on connecting.
func (c *Client) Greeting() Greeting { return c.greeting }

// Events delivers asynchronous events in order. It is closed when the
// connection closes. Events nobody reads in time are dropped once the
// buffer is full; DroppedEvents counts them.
func (c *Client) Events() <-chan Event { return c.events }

// DroppedEvents is how many events were dropped for want of a reader.
func (c *Client) DroppedEvents() uint64 { return c.dropped.Load() }

// Done is closed when the connection has closed; Err then says why.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err is nil while the connection is open, then why it closed: wrapping
// ErrClosed, and io.EOF when QEMU closed it or ErrProtocol on bad input.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close closes the connection and waits for the reader to stop. Pending
// Executes return ErrClosed. It is idempotent.
func (c *Client) Close() error {
	c.fail(nil)
	<-c.done
	return nil
}

// fail records why the connection ends (first cause wins), closes it and
// releases every pending Execute.
func (c *Client) fail(cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	if cause == nil {
		c.err = ErrClosed
	} else {
		c.err = fmt.Errorf("%w: %w", ErrClosed, cause)
	}
	c.conn.Close()
	for id, ch := range c.pending {
		close(ch)
		delete(c.pending, id)
	}
}

// read is the only reader of the connection and the only sender on events.
func (c *Client) read(sc *bufio.Scanner) {
	defer close(c.done)
	defer close(c.events)
	for {
		m, err := next(sc)
		if errors.Is(err, syscall.ECONNRESET) {
			// QEMU exiting with our bytes unread resets the socket
			// instead of closing it: either way it hung up.
			err = fmt.Errorf("%w (%w)", io.EOF, err)
		}
		if err == nil {
			err = c.dispatch(m)
		}
		if err != nil {
			if errors.Is(err, ErrProtocol) {
				c.log.Warn("qmp: closing the connection", "err", err)
			}
			c.fail(err)
			return
		}
	}
}

func (c *Client) dispatch(m *message) error {
	switch {
	case m.Event != "":
		ev := Event{Name: m.Event, Data: m.Data}
		if m.Timestamp != nil && m.Timestamp.Seconds >= 0 {
			ev.Time = time.Unix(m.Timestamp.Seconds, m.Timestamp.Microseconds*1000)
		}
		select {
		case c.events <- ev:
		default:
			if c.dropped.Add(1) == 1 {
				c.log.Warn("qmp: dropping events nobody reads", "event", ev.Name)
			}
		}
		return nil
	case m.Return != nil || m.Error != nil:
		var id string
		if err := json.Unmarshal(m.ID, &id); err != nil || id == "" {
			return fmt.Errorf("%w: reply without our id: %s", ErrProtocol, m.ID)
		}
		c.mu.Lock()
		ch, ok := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if ok { // not ok: its Execute gave up (ctx) before the reply came
			ch <- reply{ret: m.Return, err: m.Error}
		}
		return nil
	}
	return fmt.Errorf("%w: message is neither a reply nor an event", ErrProtocol)
}

// Execute runs cmd with args (nil for none, else anything that marshals to
// a JSON object) and decodes the reply's "return" into out (nil to ignore
// it). QEMU's errors are returned as *Error. If ctx ends first, Execute
// returns ctx's error; QEMU may still run the command.
func (c *Client) Execute(ctx context.Context, cmd string, args any, out any) error {
	id := strconv.FormatUint(c.nextID.Add(1), 10)
	b, err := json.Marshal(command{Execute: cmd, Arguments: args, ID: id})
	if err != nil {
		return fmt.Errorf("qmp %s: encode arguments: %w", cmd, err)
	}
	ch := make(chan reply, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return fmt.Errorf("qmp %s: %w", cmd, err)
	}
	c.pending[id] = ch
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}

	if sent, err := c.write(ctx, b); err != nil {
		forget()
		if !sent {
			return fmt.Errorf("qmp %s: %w", cmd, err)
		}
		// A failed or partial write leaves the stream unusable.
		c.fail(fmt.Errorf("write %s: %w", cmd, err))
		return fmt.Errorf("qmp %s: %w", cmd, c.Err())
	}
	select {
	case r, ok := <-ch:
		if !ok {
			return fmt.Errorf("qmp %s: %w", cmd, c.Err())
		}
		if r.err != nil {
			return &Error{Command: cmd, Class: r.err.Class, Desc: r.err.Desc}
		}
		if out != nil {
			if err := json.Unmarshal(r.ret, out); err != nil {
				return fmt.Errorf("qmp %s: decode reply: %w", cmd, err)
			}
		}
		return nil
	case <-ctx.Done():
		forget()
		return fmt.Errorf("qmp %s: %w", cmd, ctx.Err())
	}
}

// write sends one command; sent is false when ctx ended before anything
// went on the wire, so the connection is still sound.
func (c *Client) write(ctx context.Context, b []byte) (sent bool, err error) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if err := ctx.Err(); err != nil {
		return false, err
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(writeTimeout)
	}
	c.conn.SetWriteDeadline(deadline)
	_, err = c.conn.Write(append(b, '\n'))
	return true, err
}
