// Package terminals is the sessions' terminals: an interactive shell in a session's sandbox, bridged from the
// guest agent's PTY WebSocket to a caller's (GET .../pty in hostd/api).
//
//   - A terminal holds the session's work slot like an exec for as long as
//     it is open: a restore or fork refuses while one is open (409), and a
//     lifecycle operation in progress refuses a new one (409).
//   - It is refused (403) where it would walk around what the session
//     enforces on commands: process rules are judged per command line and an
//     enforced execute list is applied to each exec, but a shell's commands
//     never pass through either; a read-only workspace is Landlock applied
//     to each command, and the guest agent's terminal takes no confinement
//     per call (only its own start-up configuration), so a shell could
//     write the workspace.
//   - At most MaxTerminals at once on a daemon, of which at most
//     MaxTerminalsPerTenant are one tenant's (the admin is held only by
//     MaxTerminals); each at most TerminalMaxAge.
//   - The ledger gets pty.open (size, command) and pty.close (duration,
//     exit code, byte counts, how it ended); never what was typed or shown.
//   - A browser cannot set Authorization on a WebSocket, so it opens the
//     terminal with a ticket instead (POST .../pty-ticket): 256 random bits,
//     single use, TerminalTicketTTL, bound to the session and the caller who
//     asked, kept in memory only and never ledgered or logged. At most
//     MaxTerminalTicketsPerCaller wait for one caller (the admin is one
//     caller, a tenant another), so that no one caller can take every
//     ticket the daemon keeps.
//
// It is a sibling of the session core (hostd/session): a terminal walks
// the core's command pipeline (Manager.Walk), and the core asks it, before
// a restore or fork, whether a terminal is open (AddBusyCheck), and has it
// close them all when the daemon stops (OnShutdown).
package terminals

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/guest/client"
	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hypervisor"
)

// Service is the daemon's terminals: those open, and the tickets not yet
// used.
type Service struct {
	m     *session.Manager
	now   func() time.Time
	terms terminals
}

// New returns the terminals of m's sessions, and registers them with m:
// a restore or fork refuses while one is open on its session, and m's
// shutdown closes them all first.
func New(m *session.Manager) *Service {
	s := &Service{m: m, now: m.Now}
	m.AddBusyCheck(s.terminalsOpen)
	m.OnShutdown(func() { s.closeTerminals(reasonShutdown) })
	return s
}

var (
	bad          = session.BadRequest
	ErrConflict  = session.ErrConflict
	ErrForbidden = session.ErrForbidden
)

// The session types a terminal looks at.
type (
	Session = session.Session
	Budget  = session.Budget
)

// Limits of terminals.
const (
	MaxTerminalDim          = apiv1.MaxTerminalDim
	DefaultTerminalCols     = apiv1.DefaultTerminalCols
	DefaultTerminalRows     = apiv1.DefaultTerminalRows
	MaxTerminalCommandBytes = apiv1.MaxTerminalCommandBytes
	MaxTerminals            = 16 // open at once on one daemon
	MaxTerminalsPerTenant   = 8  // of those, open at once by one tenant
	TerminalMaxAge          = time.Hour
	TerminalTicketTTL       = 30 * time.Second
	// maxTerminalTickets bounds the tickets not yet used or expired.
	maxTerminalTickets = 1024
	// MaxTerminalTicketsPerCaller bounds those of one caller.
	MaxTerminalTicketsPerCaller = 64
	// maxTerminalFrame bounds one message from the caller.
	maxTerminalFrame = 1 << 20
)

// Close reasons a terminal's caller may see besides exit=<code>.
const (
	reasonMaxAge   = "the terminal reached its one-hour limit"
	reasonShutdown = "the daemon is shutting down"
	// reasonTenantGone: the tenant that opened it left the tenants file.
	reasonTenantGone = "the tenant that opened this terminal is no longer one of the daemon's"
	reasonBadFrame   = `a text frame must be {"resize":{"cols":N,"rows":N}} with each from 1 to 1000`
	reasonLost       = "the sandbox ended the terminal without an exit code (the session was deleted or expired, or its agent went away)"
)

// TerminalRequest is what a terminal opens with (GET .../pty's query).
type TerminalRequest struct {
	Cols, Rows int
	// Command is a shell line for /bin/sh -c; "" is the guest user's
	// login shell.
	Command string
}

// The public wire types (package api), kept under these names here.
type (
	TerminalResize = apiv1.TerminalResize
	TerminalSize   = apiv1.TerminalSize
	TerminalTicket = apiv1.TerminalTicket
)

func (req *TerminalRequest) check() error {
	if req.Cols < 1 || req.Cols > MaxTerminalDim || req.Rows < 1 || req.Rows > MaxTerminalDim {
		return bad("cols and rows must be from 1 to %d (got %dx%d)", MaxTerminalDim, req.Cols, req.Rows)
	}
	if len(req.Command) > MaxTerminalCommandBytes || strings.ContainsRune(req.Command, 0) {
		return bad("command must be at most %d bytes without NUL; for a longer script, write it to a file and run that", MaxTerminalCommandBytes)
	}
	return nil
}

// ParseTerminalResize reads a resize frame, refusing anything else: other
// fields, or a size out of 1..MaxTerminalDim.
func ParseTerminalResize(data []byte) (TerminalSize, error) {
	var rz TerminalResize
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rz); err != nil || dec.More() {
		return TerminalSize{}, bad("%s", reasonBadFrame)
	}
	if c, r := rz.Resize.Cols, rz.Resize.Rows; c < 1 || c > MaxTerminalDim || r < 1 || r > MaxTerminalDim {
		return TerminalSize{}, bad("%s", reasonBadFrame)
	}
	return rz.Resize, nil
}

// terminalRefusal is the 403 of a session whose rules a shell would walk
// around, nil when a terminal may open.
func terminalRefusal(s *Session) error {
	switch {
	case s.Policy.Process != nil || len(s.Policy.ExecPrograms) > 0:
		return fmt.Errorf("%w: session %s has process rules (policy.process): they judge each exec and job, but the commands typed into a terminal never pass through them, so terminals are refused on this session", ErrForbidden, s.ID)
	case session.BudgetLimitsCommands(s.Budget):
		return fmt.Errorf("%w: session %s has a budget on its commands (budget.max_execs, max_exec_seconds, max_jobs, max_compute_seconds, max_output_bytes or max_workspace_bytes): the commands typed into a terminal are neither counted nor limited by it, so terminals are refused on this session", ErrForbidden, s.ID)
	case s.Workspace.Mode == session.ModeReadOnly:
		return fmt.Errorf("%w: session %s has a read-only workspace, which Landlock enforces on each command; the sandbox's terminal cannot be started under that confinement, so a shell could write the workspace: terminals are refused on this session", ErrForbidden, s.ID)
	case !s.Capabilities.PTY:
		return fmt.Errorf("%w: session %s runs on backend %s, which has no terminal", ErrConflict, s.ID, s.Backend)
	}
	return nil
}

// terminals are the daemon's open terminals and unused tickets.
type terminals struct {
	mu      sync.Mutex
	open    map[*Terminal]struct{}
	tickets map[[32]byte]terminalTicket
}

type terminalTicket struct {
	session string
	caller  auth.Identity
	expires time.Time
}

// reserve counts t among the open terminals, refusing past MaxTerminals,
// or past MaxTerminalsPerTenant of t's tenant.
func (ts *terminals) reserve(t *Terminal) error {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if len(ts.open) >= MaxTerminals {
		return fmt.Errorf("%w: %d terminals are open on this daemon, the most allowed; close one and retry", ErrConflict, MaxTerminals)
	}
	if t.tenant != "" {
		n := 0
		for o := range ts.open {
			if o.tenant == t.tenant {
				n++
			}
		}
		if n >= MaxTerminalsPerTenant {
			return fmt.Errorf("%w: tenant %s has %d terminals open, the most one tenant may have on this daemon; close one and retry", ErrConflict, t.tenant, MaxTerminalsPerTenant)
		}
	}
	if ts.open == nil {
		ts.open = map[*Terminal]struct{}{}
	}
	ts.open[t] = struct{}{}
	return nil
}

func (ts *terminals) remove(t *Terminal) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	delete(ts.open, t)
}

// onSession counts the terminals open on session id.
func (ts *terminals) onSession(id string) int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	n := 0
	for t := range ts.open {
		if t.id == id {
			n++
		}
	}
	return n
}

func (ts *terminals) all() []*Terminal {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	out := make([]*Terminal, 0, len(ts.open))
	for t := range ts.open {
		out = append(out, t)
	}
	return out
}

// Terminal is an open terminal: the guest's end, waiting for Serve to
// bridge it to the caller's.
type Terminal struct {
	m      *Service
	id     string
	tenant string // whose terminal it counts as ("" the admin's)
	guest  *websocket.Conn
	caller context.Context // the caller's identity, for the ledger; never cancelled
	opened time.Time

	release  func() // the work slot and the daemon's count
	stopOnce sync.Once
	stopc    chan string // a reason to close now (shutdown)
	finished chan struct{}
}

// OpenTerminal checks that session id may have a terminal, takes its work
// slot and one of the daemon's terminals, and starts the shell in the
// guest. The caller bridges it with Serve, or gives it back with Abort.
func (m *Service) OpenTerminal(ctx context.Context, tenant, id string, req TerminalRequest) (*Terminal, error) {
	t := &Terminal{m: m, id: id, tenant: tenant, caller: context.WithoutCancel(ctx),
		stopc: make(chan string, 1), finished: make(chan struct{})}
	err := m.m.Walk(ctx, session.CommandTerminal, tenant, id,
		session.NewStep(session.StepValidate, func(_ context.Context, p session.Pipe) error {
			p.Command().Text = req.Command
			return req.check()
		}),
		session.LoadRunningStep(),
		// A terminal is judged by the session as a whole: its commands
		// never pass the process policy or the budget (terminalRefusal).
		session.NewStep(session.StepJudge, func(_ context.Context, p session.Pipe) error {
			if p.Session().Kind == session.KindSandbox {
				return session.NotSession(id)
			}
			return terminalRefusal(p.Session())
		}),
		// One of the daemon's terminals, and the session's work slot,
		// held until the terminal closes (finish).
		session.NewStep(session.StepGate, func(_ context.Context, p session.Pipe) error {
			if err := m.terms.reserve(t); err != nil {
				return err
			}
			done, err := m.m.WorkSlot(id)
			if err != nil {
				m.terms.remove(t)
				return err
			}
			t.release = func() { done(); m.terms.remove(t) }
			p.OnUndo(func() { t.release(); close(t.finished) })
			return nil
		}),
		session.HooksStep("pty"),
		session.NewStep(session.StepRun, func(ctx context.Context, p session.Pipe) error {
			dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			var err error
			if t.guest, err = p.Guest().PTY(dctx, uint16(req.Cols), uint16(req.Rows), req.Command); err != nil {
				return session.GuestError(err)
			}
			p.Started()
			t.guest.SetReadLimit(maxTerminalFrame)
			t.opened = m.now()
			return nil
		}),
		session.NewStep(session.StepRecord, func(ctx context.Context, p session.Pipe) error {
			m.m.LedgerAppend(ctx, id, "pty.open", p.WithNotes(map[string]any{"cols": req.Cols, "rows": req.Rows, "command": req.Command}))
			return nil
		}),
	)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// terminalTarget is a running session that may have a terminal.
func (m *Service) terminalTarget(ctx context.Context, tenant, id string) (*Session, hypervisor.Machine, error) {
	s, mc, err := m.m.Running(ctx, tenant, id)
	if err != nil {
		return nil, nil, err
	}
	if s.Kind == session.KindSandbox {
		return nil, nil, session.NotSession(id)
	}
	if err := terminalRefusal(s); err != nil {
		return nil, nil, err
	}
	return s, mc, nil
}

// Abort gives back a terminal Serve will never bridge (the caller's
// WebSocket upgrade failed): the guest's shell is hung up.
func (t *Terminal) Abort() {
	t.guest.CloseNow()
	t.finish(nil, "upgrade_failed", 0, 0)
	close(t.finished)
}

// Serve bridges the terminal to peer, the caller's WebSocket, until one
// side ends or the terminal reaches its limit: binary messages are
// terminal bytes both ways, a text message from peer resizes. It closes
// both ends, with exit=<code> as the reason when the shell exited, and
// ledgers pty.close.
func (t *Terminal) Serve(peer *websocket.Conn) {
	peer.SetReadLimit(maxTerminalFrame)
	// Reads and writes use a context that is never cancelled: cancelling
	// one would drop the connection without a close frame, and the caller
	// must learn why its terminal ended. Ends come from Close instead.
	bg := context.Background()
	var in, out atomic.Int64
	type ended struct {
		err     error
		peerErr bool // peer could not be written to
		badFrm  bool
	}
	fromGuest, fromPeer := make(chan ended, 1), make(chan ended, 1)
	go func() { // guest → peer
		for {
			typ, data, err := t.guest.Read(bg)
			if err != nil {
				fromGuest <- ended{err: err}
				return
			}
			if typ != websocket.MessageBinary {
				continue
			}
			if err := peer.Write(bg, websocket.MessageBinary, data); err != nil {
				fromGuest <- ended{err: err, peerErr: true}
				return
			}
			out.Add(int64(len(data)))
		}
	}()
	go func() { // peer → guest
		for {
			typ, data, err := peer.Read(bg)
			if err != nil {
				fromPeer <- ended{err: err}
				return
			}
			if typ == websocket.MessageBinary {
				if err := t.guest.Write(bg, websocket.MessageBinary, data); err != nil {
					return // the guest's end is gone; its reader reports why
				}
				in.Add(int64(len(data)))
				continue
			}
			size, err := ParseTerminalResize(data)
			if err != nil {
				fromPeer <- ended{err: err, badFrm: true}
				return
			}
			if err := client.Resize(bg, t.guest, uint16(size.Cols), uint16(size.Rows)); err != nil {
				return
			}
		}
	}()
	limit := time.NewTimer(TerminalMaxAge - t.m.now().Sub(t.opened))
	defer limit.Stop()
	var code *int
	var how, reason string
	status, peerGone := websocket.StatusNormalClosure, false
	select {
	case e := <-fromGuest:
		c, exited := client.ExitCode(e.err)
		switch {
		case exited:
			code, how, reason = &c, "exit", fmt.Sprintf("%s%d", apiv1.PTYExitReasonPrefix, c)
		case e.peerErr:
			how, peerGone = "client", true
		default:
			how, status, reason = "sandbox", websocket.StatusInternalError, reasonLost
		}
	case e := <-fromPeer:
		how, peerGone = "client", true
		if e.badFrm {
			how, peerGone, status, reason = "bad_frame", false, websocket.StatusPolicyViolation, reasonBadFrame
		}
	case <-limit.C:
		how, status, reason = "max_age", websocket.StatusGoingAway, reasonMaxAge
	case r := <-t.stopc:
		how, status, reason = "daemon", websocket.StatusGoingAway, r
	}
	// The guest's end first (a shell still running is hung up), then the
	// slot and the ledger, so that by the time the caller learns the
	// terminal ended, the session is free for a restore and pty.close is
	// recorded.
	t.guest.CloseNow()
	t.finish(code, how, in.Load(), out.Load())
	if peerGone {
		peer.CloseNow()
	} else {
		peer.Close(status, reason)
	}
	close(t.finished)
}

// finish ledgers pty.close and gives the slot and the daemon's count back.
func (t *Terminal) finish(code *int, how string, in, out int64) {
	t.release()
	data := map[string]any{"duration_ms": t.m.now().Sub(t.opened).Milliseconds(), "exit_code": code,
		"bytes_in": in, "bytes_out": out, "ended": how}
	t.m.m.LedgerAppend(t.caller, t.id, "pty.close", data)
}

// stop asks an open terminal to close with reason.
func (t *Terminal) stop(reason string) {
	t.stopOnce.Do(func() { t.stopc <- reason })
}

// closeTerminals closes every open terminal with a reason its caller sees
// (the daemon stops), waiting a little for their pty.close entries.
func (m *Service) closeTerminals(reason string) {
	open := m.terms.all()
	for _, t := range open {
		t.stop(reason)
	}
	deadline := time.After(5 * time.Second)
	for _, t := range open {
		select {
		case <-t.finished:
		case <-deadline:
			return
		}
	}
}

// CloseTerminalsOfTenants closes the open terminals of every tenant that
// keep refuses (one taken out of the tenants file: its token no longer
// opens anything, and what it opened stops too). The admin's terminals
// stay. It returns how many it closed.
func (m *Service) CloseTerminalsOfTenants(keep func(tenant string) bool) int {
	n := 0
	for _, t := range m.terms.all() {
		if t.tenant != "" && !keep(t.tenant) {
			t.stop(reasonTenantGone)
			n++
		}
	}
	return n
}

// terminalsOpen is the 409 of a restore or fork while terminals are open
// on session id (nil when none is).
func (m *Service) terminalsOpen(id, op string) error {
	if n := m.terms.onSession(id); n > 0 {
		return fmt.Errorf("%w: %d terminal(s) are open on session %s; a %s would replace the machine under them: exit them first", ErrConflict, n, id, op)
	}
	return nil
}

// TerminalTicket makes a ticket that opens one terminal on session id, as
// the caller in ctx, within TerminalTicketTTL. The session must be one
// that may have a terminal now.
func (m *Service) TerminalTicket(ctx context.Context, tenant, id string) (*TerminalTicket, error) {
	if _, _, err := m.terminalTarget(ctx, tenant, id); err != nil {
		return nil, err
	}
	caller, ok := auth.FromContext(ctx)
	if !ok {
		return nil, fmt.Errorf("%w: a terminal ticket needs a caller", ErrForbidden)
	}
	var b [32]byte
	rand.Read(b[:])
	ticket := "pdk_pty_" + hex.EncodeToString(b[:])
	now := m.now()
	ts := &m.terms
	ts.mu.Lock()
	defer ts.mu.Unlock()
	who, mine := caller.Actor(), 0
	for k, tk := range ts.tickets {
		switch {
		case !now.Before(tk.expires):
			delete(ts.tickets, k)
		case tk.caller.Actor() == who:
			mine++
		}
	}
	if mine >= MaxTerminalTicketsPerCaller {
		return nil, fmt.Errorf("%w: %s has %d terminal tickets waiting to be used, the most one caller may have; use one or retry in %s", ErrConflict, who, MaxTerminalTicketsPerCaller, TerminalTicketTTL)
	}
	if len(ts.tickets) >= maxTerminalTickets {
		return nil, fmt.Errorf("%w: %d terminal tickets are waiting to be used on this daemon, the most allowed; retry in %s", ErrConflict, maxTerminalTickets, TerminalTicketTTL)
	}
	if ts.tickets == nil {
		ts.tickets = map[[32]byte]terminalTicket{}
	}
	exp := now.Add(TerminalTicketTTL)
	ts.tickets[sha256.Sum256([]byte(ticket))] = terminalTicket{session: id, caller: caller, expires: exp}
	return &TerminalTicket{Ticket: ticket, ExpiresAt: exp.UTC()}, nil
}

// ErrTicket is a terminal ticket that opens nothing: unknown, used,
// expired or made for another session. Which one is not told.
var ErrTicket = errors.New("the terminal ticket is not valid: a ticket opens one terminal, on the session it was made for, within 30 seconds; get a new one (POST /v1/agents/sessions/{id}/pty-ticket)")

// RedeemTerminalTicket spends ticket and returns the caller it was made
// for. A ticket is spent by its first use, whatever the outcome, so one
// presented on another session is gone too.
func (m *Service) RedeemTerminalTicket(ticket, sessionID string) (auth.Identity, error) {
	h := sha256.Sum256([]byte(ticket))
	ts := &m.terms
	ts.mu.Lock()
	tk, ok := ts.tickets[h]
	delete(ts.tickets, h)
	ts.mu.Unlock()
	if !ok || !m.now().Before(tk.expires) || tk.session != sessionID {
		return auth.Identity{}, ErrTicket
	}
	return tk.caller, nil
}
