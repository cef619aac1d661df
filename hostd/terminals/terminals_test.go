package terminals

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/ledger"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/session/sessiontest"
	"paddock.dev/paddock/hostd/store"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/policy"
)

// The session's names the tests use.
type (
	CreateRequest    = session.CreateRequest
	WorkspaceRequest = session.WorkspaceRequest
	Workspace        = session.Workspace
)

var (
	ErrBadRequest = session.ErrBadRequest
	ErrNotFound   = session.ErrNotFound
)

const (
	ModeWritable = session.ModeWritable
	ModeOverlay  = session.ModeOverlay
	ModeReadOnly = session.ModeReadOnly
)

// testTerms is the manager and its terminals under one name: the
// terminals' methods and the manager's (Create, Shutdown) are both m's.
type testTerms struct {
	*Service
	*session.Manager
}

// sandboxManager is a session manager on procbox, without a policy
// engine, with a clock the test moves, and its terminals.
func sandboxManager(t *testing.T) (testTerms, *store.Store, *ledger.Ledger, *sessiontest.Clock) {
	t.Helper()
	clock := new(sessiontest.Clock)
	m := sessiontest.New(t, sessiontest.Procbox(), sessiontest.Policy(nil), sessiontest.Now(clock.Now))
	return testTerms{New(m), m}, m.Store(), sessiontest.Ledger(m), clock
}

// TestTerminalPipelineSteps: a terminal walks the core's pipeline
// (validate load judge gate hooks run record: a terminal is not admitted
// or counted), and the command hooks see it with its kind and command.
// TestPipelineSteps in hostd/session holds the core's own entries.
func TestTerminalPipelineSteps(t *testing.T) {
	m, _, _, _ := sandboxManager(t)
	var mu sync.Mutex
	var steps, seen []string
	m.TraceSteps(func(kind session.CommandKind, step string) {
		mu.Lock()
		defer mu.Unlock()
		if kind == session.CommandTerminal {
			steps = append(steps, step)
		}
	})
	m.AddCommandHook("watch", func(_ context.Context, c *session.Command) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, string(c.Kind)+":"+c.Text)
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := m.Create(ctx, "", CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	term, err := m.OpenTerminal(ctx, "", s.ID, TerminalRequest{Cols: 80, Rows: 24, Command: "sleep 60"})
	if err != nil {
		t.Fatal(err)
	}
	term.Abort()
	// A refused one stops at the step that refuses.
	m.OpenTerminal(ctx, "", s.ID, TerminalRequest{Cols: 0, Rows: 24})
	m.OpenTerminal(ctx, "", "ses-0000000000000000", TerminalRequest{Cols: 80, Rows: 24})
	mu.Lock()
	defer mu.Unlock()
	if got, want := strings.Join(steps, " "), "validate load judge gate hooks run record validate validate load"; got != want {
		t.Errorf("terminals walked %q, want %q", got, want)
	}
	if want := []string{"terminal:sleep 60"}; !slices.Equal(seen, want) {
		t.Errorf("the hook saw %q, want %q", seen, want)
	}
}

// ledgerKinds lists the kinds of session id's ledger entries.
func capsWithPTY(on bool) hypervisor.Capabilities { return hypervisor.Capabilities{PTY: on} }

// TestParseTerminalResize: only {"resize":{"cols":N,"rows":N}} with both
// in 1..1000 is a resize.
func TestParseTerminalResize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want TerminalSize
		ok   bool
	}{
		{`{"resize":{"cols":100,"rows":40}}`, TerminalSize{Cols: 100, Rows: 40}, true},
		{`{"resize":{"cols":1,"rows":1000}}`, TerminalSize{Cols: 1, Rows: 1000}, true},
		{` {"resize":{"rows":2,"cols":3}} `, TerminalSize{Cols: 3, Rows: 2}, true},
		{`{"resize":{"cols":0,"rows":40}}`, TerminalSize{}, false},
		{`{"resize":{"cols":1001,"rows":40}}`, TerminalSize{}, false},
		{`{"resize":{"cols":-1,"rows":40}}`, TerminalSize{}, false},
		{`{"resize":{"cols":80}}`, TerminalSize{}, false},
		{`{"resize":{"cols":80,"rows":24,"x":1}}`, TerminalSize{}, false},
		{`{"resize":{"cols":80,"rows":24},"other":1}`, TerminalSize{}, false},
		{`{"resize":{"cols":80,"rows":24}}{}`, TerminalSize{}, false},
		{`{"resize":{"cols":"80","rows":24}}`, TerminalSize{}, false},
		{`ls -l`, TerminalSize{}, false},
		{``, TerminalSize{}, false},
	} {
		got, err := ParseTerminalResize([]byte(tc.in))
		if tc.ok != (err == nil) || got != tc.want {
			t.Errorf("%q: %+v %v, want %+v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrBadRequest) {
			t.Errorf("%q: %v is not ErrBadRequest", tc.in, err)
		}
	}
}

// TestTerminalRequestCheck: the size and command bounds.
func TestTerminalRequestCheck(t *testing.T) {
	for _, tc := range []struct {
		req TerminalRequest
		ok  bool
	}{
		{TerminalRequest{Cols: 80, Rows: 24}, true},
		{TerminalRequest{Cols: 1000, Rows: 1000, Command: strings.Repeat("x", MaxTerminalCommandBytes)}, true},
		{TerminalRequest{Cols: 0, Rows: 24}, false},
		{TerminalRequest{Cols: 80, Rows: 1001}, false},
		{TerminalRequest{Cols: 80, Rows: 24, Command: strings.Repeat("x", MaxTerminalCommandBytes+1)}, false},
		{TerminalRequest{Cols: 80, Rows: 24, Command: "a\x00b"}, false},
	} {
		if err := tc.req.check(); tc.ok != (err == nil) {
			t.Errorf("%+v: %v, want ok=%v", tc.req, err, tc.ok)
		}
	}
}

// TestTerminalRefusal: process rules (with or without an enforced
// execute list) and a read-only workspace refuse a terminal (403); a
// backend without one is 409; an ordinary session is allowed.
func TestTerminalRefusal(t *testing.T) {
	base := Session{ID: "ses-1", Backend: "procbox", Capabilities: capsWithPTY(true), Workspace: Workspace{Path: "/workspace", Mode: ModeWritable}}
	for _, tc := range []struct {
		name   string
		change func(*Session)
		want   error
		says   string
	}{
		{"plain", func(*Session) {}, nil, ""},
		{"overlay", func(s *Session) { s.Workspace.Mode = ModeOverlay }, nil, ""},
		{"process rules", func(s *Session) { s.Policy.Process = &policy.ProcessRules{Deny: []string{"rm *"}} }, ErrForbidden, "process rules"},
		{"exec list", func(s *Session) { s.Policy.ExecPrograms = []string{"/bin/ls"} }, ErrForbidden, "process rules"},
		{"read-only", func(s *Session) { s.Workspace.Mode = ModeReadOnly }, ErrForbidden, "read-only"},
		{"no pty", func(s *Session) { s.Capabilities = capsWithPTY(false) }, ErrConflict, "no terminal"},
	} {
		s := base
		tc.change(&s)
		err := terminalRefusal(&s)
		if tc.want == nil {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want %v saying %q", tc.name, err, tc.want, tc.says)
		}
	}
}

// TestTerminalTickets on real sessions with a clock the test moves: a
// ticket is 256 random bits, works once, for its session only, for 30
// seconds, and carries the caller who asked for it; a ticket presented
// anywhere is spent.
func TestTerminalTickets(t *testing.T) {
	m, _, _, skew := sandboxManager(t)
	acme := auth.Identity{Kind: auth.KindTenant, Tenant: "acme"}
	ctx := auth.WithIdentity(context.Background(), acme)
	a, err := m.Create(ctx, "acme", CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Create(ctx, "acme", CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	mint := func(id string) string {
		t.Helper()
		tk, err := m.TerminalTicket(ctx, "acme", id)
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`^pdk_pty_[0-9a-f]{64}$`).MatchString(tk.Ticket) {
			t.Errorf("ticket %q: want pdk_pty_ and 64 hex digits", tk.Ticket)
		}
		if d := time.Until(tk.ExpiresAt) - skew.Offset(); d < 29*time.Second || d > 31*time.Second {
			t.Errorf("ticket expires in %s, want 30s", d)
		}
		return tk.Ticket
	}
	redeem := func(tk, id string) error {
		t.Helper()
		got, err := m.RedeemTerminalTicket(tk, id)
		if err == nil && (got.Kind != acme.Kind || got.Tenant != acme.Tenant) {
			t.Errorf("redeemed as %+v, want the minter %+v", got, acme)
		}
		return err
	}

	tk := mint(a.ID)
	if tk2 := mint(a.ID); tk2 == tk {
		t.Error("two tickets alike")
	}
	if err := redeem(tk, a.ID); err != nil {
		t.Fatalf("first use: %v", err)
	}
	if err := redeem(tk, a.ID); !errors.Is(err, ErrTicket) {
		t.Errorf("second use: %v, want ErrTicket", err)
	}
	tk = mint(a.ID)
	if err := redeem(tk, b.ID); !errors.Is(err, ErrTicket) {
		t.Errorf("on another session: %v, want ErrTicket", err)
	}
	if err := redeem(tk, a.ID); !errors.Is(err, ErrTicket) {
		t.Errorf("after it was shown on another session: %v, want ErrTicket (spent)", err)
	}
	tk = mint(a.ID)
	skew.Set(TerminalTicketTTL)
	if err := redeem(tk, a.ID); !errors.Is(err, ErrTicket) {
		t.Errorf("after 30 s: %v, want ErrTicket", err)
	}
	skew.Set(0)
	if err := redeem("pdk_pty_"+strings.Repeat("0", 64), a.ID); !errors.Is(err, ErrTicket) {
		t.Errorf("unknown ticket: %v", err)
	}
	if err := redeem("", a.ID); !errors.Is(err, ErrTicket) {
		t.Errorf("empty ticket: %v", err)
	}
	if strings.Contains(ErrTicket.Error(), tk) {
		t.Error("the refusal repeats the ticket")
	}

	// Another tenant's session is not found; a refused session gets none.
	if _, err := m.TerminalTicket(auth.WithIdentity(context.Background(), auth.Identity{Kind: auth.KindTenant, Tenant: "beta"}), "beta", a.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("another tenant's session: %v, want ErrNotFound", err)
	}
	ro, err := m.Create(ctx, "acme", CreateRequest{Workspace: WorkspaceRequest{Mode: ModeReadOnly}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.TerminalTicket(ctx, "acme", ro.ID); !errors.Is(err, ErrForbidden) {
		t.Errorf("read-only session: %v, want ErrForbidden", err)
	}

	// Expired tickets are dropped when the next is made, and at most
	// maxTerminalTickets wait.
	m.terms.mu.Lock()
	n := len(m.terms.tickets)
	m.terms.mu.Unlock()
	if n == 0 {
		t.Fatal("no ticket is waiting: the test proves nothing")
	}
	skew.Set(2 * TerminalTicketTTL)
	mint(a.ID)
	m.terms.mu.Lock()
	n = len(m.terms.tickets)
	m.terms.mu.Unlock()
	if n != 1 {
		t.Errorf("%d tickets kept after the others expired, want 1", n)
	}
	for range MaxTerminalTicketsPerCaller - 1 {
		mint(a.ID)
	}
	if _, err := m.TerminalTicket(ctx, "acme", a.ID); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "one caller") {
		t.Errorf("acme's ticket %d: %v, want ErrConflict for one caller's limit", MaxTerminalTicketsPerCaller+1, err)
	}
}

// TestTerminalTicketsPerCaller: one caller holding all the tickets it may
// have waiting leaves the others theirs (another tenant, the admin), and
// the daemon's own bound still holds across callers.
func TestTerminalTicketsPerCaller(t *testing.T) {
	m, _, _, skew := sandboxManager(t)
	acme := auth.WithIdentity(context.Background(), auth.Identity{Kind: auth.KindTenant, Tenant: "acme"})
	beta := auth.WithIdentity(context.Background(), auth.Identity{Kind: auth.KindTenant, Tenant: "beta"})
	admin := auth.WithIdentity(context.Background(), auth.Admin())
	a, err := m.Create(acme, "acme", CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Create(beta, "beta", CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range MaxTerminalTicketsPerCaller {
		if _, err := m.TerminalTicket(acme, "acme", a.ID); err != nil {
			t.Fatalf("acme's ticket %d: %v", i+1, err)
		}
	}
	_, err = m.TerminalTicket(acme, "acme", a.ID)
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "tenant:acme") || !strings.Contains(err.Error(), "one caller") {
		t.Errorf("acme past its limit: %v, want ErrConflict naming acme and the per-caller limit", err)
	}
	if _, err := m.TerminalTicket(beta, "beta", b.ID); err != nil {
		t.Errorf("beta while acme is at its limit: %v", err)
	}
	if _, err := m.TerminalTicket(admin, "", a.ID); err != nil {
		t.Errorf("the admin while acme is at its limit: %v", err)
	}
	// A ticket spent is no longer waiting.
	tk, err := m.TerminalTicket(beta, "beta", b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.RedeemTerminalTicket(tk.Ticket, b.ID); err != nil {
		t.Fatal(err)
	}
	// The admin is one caller: its limit is the same, whichever tenant's
	// sessions its tickets are for.
	for range MaxTerminalTicketsPerCaller - 1 {
		if _, err := m.TerminalTicket(admin, "", b.ID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.TerminalTicket(admin, "", b.ID); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "admin") {
		t.Errorf("the admin past its limit: %v, want ErrConflict", err)
	}
	if _, err := m.TerminalTicket(beta, "beta", b.ID); err != nil {
		t.Errorf("beta while acme and the admin are at their limits: %v", err)
	}
	// Once acme's expire, acme may have tickets again.
	skew.Set(2 * TerminalTicketTTL)
	if _, err := m.TerminalTicket(acme, "acme", a.ID); err != nil {
		t.Errorf("acme after its tickets expired: %v", err)
	}

	// The daemon's bound, whoever holds the tickets.
	m.terms.mu.Lock()
	exp := m.now().Add(TerminalTicketTTL)
	for i := len(m.terms.tickets); i < maxTerminalTickets; i++ {
		caller := auth.Identity{Kind: auth.KindTenant, Tenant: fmt.Sprintf("t%d", i/MaxTerminalTicketsPerCaller)}
		m.terms.tickets[sha256.Sum256([]byte(fmt.Sprint("filler", i)))] = terminalTicket{session: a.ID, caller: caller, expires: exp}
	}
	m.terms.mu.Unlock()
	if _, err := m.TerminalTicket(beta, "beta", b.ID); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "this daemon") {
		t.Errorf("past the daemon's %d: %v, want ErrConflict for the daemon's limit", maxTerminalTickets, err)
	}
}

// TestTerminalsPerTenant: one tenant with MaxTerminalsPerTenant terminals
// open gets no more (409 saying so), while another tenant and the admin
// still open theirs; the admin is held only by MaxTerminals.
func TestTerminalsPerTenant(t *testing.T) {
	m, _, _, _ := sandboxManager(t)
	bg, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	acme := auth.WithIdentity(bg, auth.Identity{Kind: auth.KindTenant, Tenant: "acme"})
	beta := auth.WithIdentity(bg, auth.Identity{Kind: auth.KindTenant, Tenant: "beta"})
	admin := auth.WithIdentity(bg, auth.Admin())
	a, err := m.Create(acme, "acme", CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Create(beta, "beta", CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	var open []*Terminal
	t.Cleanup(func() {
		for _, term := range open {
			term.Abort()
		}
	})
	req := TerminalRequest{Cols: 80, Rows: 24, Command: "sleep 600"}
	openOne := func(ctx context.Context, tenant, id string) (*Terminal, error) {
		t.Helper()
		term, err := m.OpenTerminal(ctx, tenant, id, req)
		if err == nil {
			open = append(open, term)
		}
		return term, err
	}
	for i := range MaxTerminalsPerTenant {
		if _, err := openOne(acme, "acme", a.ID); err != nil {
			t.Fatalf("acme's terminal %d: %v", i+1, err)
		}
	}
	_, err = openOne(acme, "acme", a.ID)
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "tenant acme") || !strings.Contains(err.Error(), "one tenant") {
		t.Errorf("acme past its limit: %v, want ErrConflict naming acme and the per-tenant limit", err)
	}
	if _, err := openOne(beta, "beta", b.ID); err != nil {
		t.Errorf("beta while acme is at its limit: %v", err)
	}
	// The admin, on acme's session or beta's, is not held by the
	// per-tenant limit: it may have more than MaxTerminalsPerTenant.
	acmeOpen := open[:MaxTerminalsPerTenant]
	for _, term := range acmeOpen {
		term.Abort()
	}
	open = open[MaxTerminalsPerTenant:]
	if _, err := openOne(acme, "acme", a.ID); err != nil {
		t.Errorf("acme after closing its terminals: %v", err)
	}
	for i := range MaxTerminalsPerTenant + 1 {
		if _, err := openOne(admin, "", a.ID); err != nil {
			t.Fatalf("the admin's terminal %d: %v", i+1, err)
		}
	}
	// The daemon's bound holds for everyone.
	for len(open) < MaxTerminals {
		if _, err := openOne(admin, "", b.ID); err != nil {
			t.Fatalf("terminal %d on the daemon: %v", len(open)+1, err)
		}
	}
	if _, err := openOne(admin, "", b.ID); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "on this daemon") {
		t.Errorf("the admin past the daemon's %d: %v, want ErrConflict for the daemon's limit", MaxTerminals, err)
	}
}

// TestTerminalCloseReasons: a WebSocket close reason is at most 123
// bytes; a longer one would fail to send.
func TestTerminalCloseReasons(t *testing.T) {
	for _, r := range []string{reasonMaxAge, reasonShutdown, reasonBadFrame, reasonLost, "exit=-2147483648"} {
		if len(r) > 123 {
			t.Errorf("close reason %q is %d bytes, more than 123", r, len(r))
		}
	}
}

// serveTerminal bridges t to a WebSocket the test dials.
func serveTerminal(t *testing.T, ctx context.Context, term *Terminal) *websocket.Conn {
	t.Helper()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			term.Abort()
			return
		}
		term.Serve(c)
	}))
	t.Cleanup(hs.Close)
	conn, _, err := websocket.Dial(ctx, hs.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.CloseNow() })
	return conn
}

// nthClose waits for the session's n-th pty.close entry and returns its
// data.
func nthClose(t *testing.T, led *ledger.Ledger, id string, n int) map[string]any {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		es, err := led.List(context.Background(), id, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		seen := 0
		for _, e := range es {
			if e.Kind != "pty.close" {
				continue
			}
			if seen++; seen == n {
				var m map[string]any
				json.Unmarshal(e.Data, &m)
				return m
			}
		}
	}
	t.Fatalf("no pty.close entry number %d", n)
	return nil
}

// TestTerminalEnds: a terminal open for TerminalMaxAge is closed with
// 1001 and its reason, and so is one open when the daemon shuts down;
// both are ledgered with how they ended.
// TestTerminalsOfRemovedTenants: a tenant taken out of the tenants file
// loses the terminals it opened (closed with a reason); other tenants'
// and the admin's stay.
func TestTerminalsOfRemovedTenants(t *testing.T) {
	m, _, _, _ := sandboxManager(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	acme := auth.WithIdentity(ctx, auth.Identity{Kind: auth.KindTenant, Tenant: "acme"})
	beta := auth.WithIdentity(ctx, auth.Identity{Kind: auth.KindTenant, Tenant: "beta"})
	a, err := m.Create(acme, "acme", CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Create(beta, "beta", CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	req := TerminalRequest{Cols: 80, Rows: 24, Command: "sleep 600"}
	ta, err := m.OpenTerminal(acme, "acme", a.ID, req)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := m.OpenTerminal(beta, "beta", b.ID, req)
	if err != nil {
		t.Fatal(err)
	}
	tAdmin, err := m.OpenTerminal(auth.WithIdentity(ctx, auth.Admin()), "", a.ID, req)
	if err != nil {
		t.Fatal(err)
	}
	ca, cb, cAdmin := serveTerminal(t, ctx, ta), serveTerminal(t, ctx, tb), serveTerminal(t, ctx, tAdmin)
	if n := m.CloseTerminalsOfTenants(func(name string) bool { return name == "beta" }); n != 1 {
		t.Errorf("closed %d terminals, want acme's one", n)
	}
	for {
		_, _, err := ca.Read(ctx)
		if err == nil {
			continue
		}
		var ce websocket.CloseError
		if !errors.As(err, &ce) || ce.Reason != reasonTenantGone {
			t.Errorf("acme's terminal ended with %v, want a close saying the tenant is gone", err)
		}
		break
	}
	// The others still run: a resize is taken, and nothing closes them.
	for name, c := range map[string]*websocket.Conn{"beta": cb, "admin": cAdmin} {
		rctx, rcancel := context.WithTimeout(ctx, 300*time.Millisecond)
		_, _, err := c.Read(rctx)
		rcancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s's terminal: %v, want it still open", name, err)
		}
	}
}

func TestTerminalEnds(t *testing.T) {
	m, _, led, skew := sandboxManager(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := m.Create(ctx, "", CreateRequest{TTLSeconds: 3 * 3600})
	if err != nil {
		t.Fatal(err)
	}
	readClose := func(conn *websocket.Conn) websocket.CloseError {
		t.Helper()
		for {
			if _, _, err := conn.Read(ctx); err != nil {
				var ce websocket.CloseError
				if !errors.As(err, &ce) {
					t.Fatalf("ended with %v, not a close frame", err)
				}
				return ce
			}
		}
	}

	term, err := m.OpenTerminal(ctx, "", s.ID, TerminalRequest{Cols: 80, Rows: 24, Command: "sleep 600"})
	if err != nil {
		t.Fatal(err)
	}
	skew.Set(TerminalMaxAge - 500*time.Millisecond)
	conn := serveTerminal(t, ctx, term)
	if ce := readClose(conn); ce.Code != websocket.StatusGoingAway || ce.Reason != reasonMaxAge {
		t.Errorf("at the limit: close %v %q", ce.Code, ce.Reason)
	}
	if c := nthClose(t, led, s.ID, 1); c["ended"] != "max_age" || c["exit_code"] != nil || c["duration_ms"].(float64) < float64((TerminalMaxAge-time.Second).Milliseconds()) {
		t.Errorf("pty.close at the limit: %v", c)
	}
	skew.Set(0)
	if n := m.terms.onSession(s.ID); n != 0 {
		t.Errorf("%d terminals still counted after the limit", n)
	}

	term, err = m.OpenTerminal(ctx, "", s.ID, TerminalRequest{Cols: 80, Rows: 24, Command: "sleep 600"})
	if err != nil {
		t.Fatal(err)
	}
	conn = serveTerminal(t, ctx, term)
	shut := make(chan struct{})
	go func() {
		defer close(shut)
		time.Sleep(300 * time.Millisecond)
		m.Shutdown(context.Background())
	}()
	// The store is unmounted by the cleanup only once no machine is left:
	// the shutdown must have finished by then.
	defer func() { <-shut }()
	if ce := readClose(conn); ce.Code != websocket.StatusGoingAway || ce.Reason != reasonShutdown {
		t.Errorf("at shutdown: close %v %q", ce.Code, ce.Reason)
	}
	if c := nthClose(t, led, s.ID, 2); c["ended"] != "daemon" {
		t.Errorf("pty.close at shutdown: %v", c)
	}
}
