package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"paddock.dev/paddock/client"
	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/daemon/daemontest"
	"paddock.dev/paddock/hostd/ledger"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/terminals"
	"paddock.dev/paddock/hostd/tokens"
	"paddock.dev/paddock/policy"
)

// term is one terminal opened through the daemon, read as the test goes.
type term struct {
	t    *testing.T
	ctx  context.Context
	conn *websocket.Conn
	out  bytes.Buffer
	end  error // what ended the terminal, once read
}

func openTerm(t *testing.T, ctx context.Context, c *client.Client, id string, opts client.PTYOptions) *term {
	t.Helper()
	conn, err := c.DialPTY(ctx, id, opts)
	if err != nil {
		t.Fatalf("open a terminal on %s: %v", id, err)
	}
	t.Cleanup(func() { conn.CloseNow() })
	return &term{t: t, ctx: ctx, conn: conn}
}

func (tm *term) send(s string) {
	tm.t.Helper()
	if err := tm.conn.Write(tm.ctx, websocket.MessageBinary, []byte(s)); err != nil {
		tm.t.Fatalf("type %q: %v", s, err)
	}
}

// until reads output until it contains want.
func (tm *term) until(want string) {
	tm.t.Helper()
	for !strings.Contains(tm.out.String(), want) {
		typ, data, err := tm.conn.Read(tm.ctx)
		if err != nil {
			tm.end = err
			tm.t.Fatalf("waiting for %q: %v (output %q)", want, err, tm.out.String())
		}
		if typ == websocket.MessageBinary {
			tm.out.Write(data)
		}
	}
}

// closed reads to the end and returns the close frame.
func (tm *term) closed() websocket.CloseError {
	tm.t.Helper()
	for tm.end == nil {
		typ, data, err := tm.conn.Read(tm.ctx)
		if err != nil {
			tm.end = err
			break
		}
		if typ == websocket.MessageBinary {
			tm.out.Write(data)
		}
	}
	var ce websocket.CloseError
	if !errors.As(tm.end, &ce) {
		tm.t.Fatalf("the terminal ended with %v, not a close frame (output %q)", tm.end, tm.out.String())
	}
	return ce
}

// exitCode reads to the end and returns the shell's exit code.
func (tm *term) exitCode() int {
	tm.t.Helper()
	ce := tm.closed()
	code, ok := client.PTYExitCode(ce)
	if !ok {
		tm.t.Fatalf("close %v %q is not exit=<code> (output %q)", ce.Code, ce.Reason, tm.out.String())
	}
	return code
}

func ptyCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// ptyEntries are a session's pty.open and pty.close entries, decoded,
// and the raw data of every entry.
func ptyEntries(t *testing.T, led *ledger.Ledger, id string) (opens, closes []map[string]any, actors []string, raw string) {
	t.Helper()
	var all strings.Builder
	for _, e := range entries(t, led, id) {
		all.Write(e.Data)
		all.WriteString(e.Actor)
		var m map[string]any
		json.Unmarshal(e.Data, &m)
		switch e.Kind {
		case "pty.open":
			opens, actors = append(opens, m), append(actors, e.Actor)
		case "pty.close":
			closes = append(closes, m)
		}
	}
	return opens, closes, actors, all.String()
}

// waitClose waits for n pty.close entries (the daemon writes them after
// the caller has seen the close).
func waitClose(t *testing.T, led *ledger.Ledger, id string, n int) []map[string]any {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, closes, _, _ := ptyEntries(t, led, id)
		if len(closes) >= n {
			return closes
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pty.close entries, want %d", len(closes), n)
		}
	}
}

// TestPTYShell types into a login shell through the daemon's route,
// resizes it and reads stty size back, exits with a code and gets
// exit=<code>; the ledger has pty.open and pty.close with sizes and
// counts, never what was typed or shown.
func TestPTYShell(t *testing.T) {
	d := newTestDaemon(t)
	ctx := ptyCtx(t)
	s, err := d.c.CreateSession(ctx, session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	tm := openTerm(t, ctx, d.c, s.ID, client.PTYOptions{Cols: 100, Rows: 30})
	typed := 0
	typeIn := func(s string) { tm.send(s); typed += len(s) }
	typeIn("tty; stty size\r")
	tm.until("30 100")
	if !strings.Contains(tm.out.String(), "/dev/pts/") {
		t.Errorf("tty printed no /dev/pts/N: %q", tm.out.String())
	}
	if err := client.ResizePTY(ctx, tm.conn, 120, 40); err != nil {
		t.Fatal(err)
	}
	typeIn("stty size\r")
	tm.until("40 120")
	typeIn("echo secret-$((6*7))\r")
	tm.until("secret-42")
	typeIn("exit 3\r")
	if code := tm.exitCode(); code != 3 {
		t.Errorf("exit code %d, want 3", code)
	}

	// A one-off command: its output, then its exit code.
	tm2 := openTerm(t, ctx, d.c, s.ID, client.PTYOptions{Command: "echo one-off; exit 5"})
	tm2.until("one-off")
	if code := tm2.exitCode(); code != 5 {
		t.Errorf("command exit code %d, want 5", code)
	}

	closes := waitClose(t, d.led, s.ID, 2)
	opens, _, actors, raw := ptyEntries(t, d.led, s.ID)
	if len(opens) != 2 || opens[0]["cols"] != 100.0 || opens[0]["rows"] != 30.0 || opens[0]["command"] != "" ||
		opens[1]["command"] != "echo one-off; exit 5" || opens[1]["cols"] != 80.0 || opens[1]["rows"] != 24.0 || actors[0] != "admin" {
		t.Errorf("pty.open entries %v by %v", opens, actors)
	}
	c := closes[0]
	if c["exit_code"] != 3.0 || c["ended"] != "exit" || c["bytes_in"] != float64(typed) || c["bytes_out"].(float64) < 20 || c["duration_ms"] == nil {
		t.Errorf("pty.close %v (typed %d bytes)", c, typed)
	}
	if closes[1]["exit_code"] != 5.0 {
		t.Errorf("second pty.close %v", closes[1])
	}
	for _, secret := range []string{"secret", "6*7", "stty", "/dev/pts"} {
		if strings.Contains(raw, secret) {
			t.Errorf("the ledger holds terminal content %q", secret)
		}
	}
}

// TestPTYBinary: every byte value goes through the daemon unchanged both
// ways (cat-like head under raw stty), and a text message that is not a
// resize closes the terminal with 1008.
func TestPTYBinary(t *testing.T) {
	d := newTestDaemon(t)
	ctx := ptyCtx(t)
	s, err := d.c.CreateSession(ctx, session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var all []byte
	for round := range 2 {
		for b := range 256 {
			all = append(all, byte(b+round*7))
		}
	}
	tm := openTerm(t, ctx, d.c, s.ID, client.PTYOptions{Command: fmt.Sprintf("stty raw -echo -iexten && printf READY && head -c %d && printf DONE", len(all))})
	tm.until("READY")
	tm.send(string(all[:300]))
	tm.send(string(all[300:]))
	tm.until("DONE")
	if code := tm.exitCode(); code != 0 {
		t.Errorf("exit code %d", code)
	}
	got := tm.out.Bytes()
	start := bytes.Index(got, []byte("READY")) + len("READY")
	end := bytes.LastIndex(got, []byte("DONE"))
	if !bytes.Equal(got[start:end], all) {
		t.Errorf("bytes back differ: sent %d, got %d: %q", len(all), end-start, got[start:end])
	}

	bad := openTerm(t, ctx, d.c, s.ID, client.PTYOptions{})
	if err := bad.conn.Write(ctx, websocket.MessageText, []byte(`{"resize":{"cols":5000,"rows":10}}`)); err != nil {
		t.Fatal(err)
	}
	if ce := bad.closed(); ce.Code != websocket.StatusPolicyViolation || !strings.Contains(ce.Reason, "resize") {
		t.Errorf("an oversized resize: close %v %q, want 1008 naming the resize", ce.Code, ce.Reason)
	}
	closes := waitClose(t, d.led, s.ID, 2)
	if closes[1]["ended"] != "bad_frame" || closes[1]["exit_code"] != nil {
		t.Errorf("pty.close after a bad frame: %v", closes[1])
	}
}

// TestPTYRefusals: what is refused before the upgrade, with its status.
func TestPTYRefusals(t *testing.T) {
	d := newTestDaemon(t)
	ctx := ptyCtx(t)
	plain, err := d.c.CreateSession(ctx, session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ruled, err := d.c.CreateSession(ctx, session.CreateRequest{Policy: &session.PolicyRequest{Process: &policy.ProcessRules{Deny: []string{"rm *"}}}})
	if err != nil {
		t.Fatal(err)
	}
	ro, err := d.c.CreateSession(ctx, session.CreateRequest{Workspace: session.WorkspaceRequest{Mode: session.ModeReadOnly}})
	if err != nil {
		t.Fatal(err)
	}
	ten, five := int64(10), int64(5)
	budgeted, err := d.c.CreateSession(ctx, session.CreateRequest{Budget: &session.Budget{MaxExecs: &ten}})
	if err != nil {
		t.Fatal(err)
	}
	// A limit on forks alone is not walked around by a terminal.
	forksOnly, err := d.c.CreateSession(ctx, session.CreateRequest{Budget: &session.Budget{MaxChildren: &five}})
	if err != nil {
		t.Fatal(err)
	}
	if conn, err := d.c.DialPTY(ctx, forksOnly.ID, client.PTYOptions{Command: "true"}); err != nil {
		t.Errorf("a terminal on a session whose budget limits forks only: %v", err)
	} else {
		conn.CloseNow()
	}
	tok, err := d.c.MintToken(ctx, plain.ID, tokens.TokenRequest{Ops: auth.GrantableOps()})
	if err != nil {
		t.Fatal(err)
	}
	withToken := client.New(d.url, tok.Token)
	for _, tc := range []struct {
		name   string
		c      *client.Client
		id     string
		opts   client.PTYOptions
		status int
		says   string
	}{
		{"process rules", d.c, ruled.ID, client.PTYOptions{}, 403, "process rules"},
		{"read-only workspace", d.c, ro.ID, client.PTYOptions{}, 403, "read-only"},
		{"a budget on commands", d.c, budgeted.ID, client.PTYOptions{}, 403, "budget"},
		{"session token with every op", withToken, plain.ID, client.PTYOptions{}, 403, "session token"},
		{"no token", client.New(d.url, ""), plain.ID, client.PTYOptions{}, 401, ""},
		{"cols too wide", d.c, plain.ID, client.PTYOptions{Cols: 1001}, 400, "cols"},
		{"command too long", d.c, plain.ID, client.PTYOptions{Command: strings.Repeat("x", terminals.MaxTerminalCommandBytes+1)}, 400, "command"},
		{"unknown session", d.c, "ses-0000000000000000", client.PTYOptions{}, 404, ""},
		{"a sandbox's id", d.c, "sbx-0000000000000000", client.PTYOptions{}, 404, ""},
	} {
		conn, err := tc.c.DialPTY(ctx, tc.id, tc.opts)
		if err == nil {
			conn.CloseNow()
		}
		var ae *client.Error
		if !errors.As(err, &ae) || ae.Status != tc.status || !strings.Contains(ae.Message, tc.says) {
			t.Errorf("%s: %v, want %d saying %q", tc.name, err, tc.status, tc.says)
		}
	}
	// Tickets are refused where terminals are, and to session tokens.
	for _, tc := range []struct {
		name   string
		c      *client.Client
		id     string
		status int
	}{
		{"process rules", d.c, ruled.ID, 403},
		{"read-only", d.c, ro.ID, 403},
		{"budget", d.c, budgeted.ID, 403},
		{"session token", withToken, plain.ID, 403},
	} {
		if _, err := tc.c.PTYTicket(ctx, tc.id); status(err) != tc.status {
			t.Errorf("ticket, %s: %v, want %d", tc.name, err, tc.status)
		}
	}
	// A plain GET is not an upgrade.
	if a := as(t, d.url, token, "GET", sp(plain.ID)+"/pty", nil); a.status != 400 || !strings.Contains(a.errorText(), "WebSocket") {
		t.Errorf("plain GET: %d %s", a.status, a.body)
	}
	if opens, _, _, _ := ptyEntries(t, d.led, plain.ID); len(opens) != 0 {
		t.Errorf("refused terminals were ledgered as opened: %v", opens)
	}
}

// TestPTYLifecycle: a terminal holds the session like an exec. A
// checkpoint in progress refuses a new one (409); restore refuses while
// one is open (409 naming it); a checkpoint and a fork may run beside it; and
// deleting the session ends it with 1011.
func TestPTYLifecycle(t *testing.T) {
	d := newTestDaemon(t)
	ctx := ptyCtx(t)
	s, err := d.c.CreateSession(ctx, session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	p := sp(s.ID)
	if _, err := d.c.Checkpoint(ctx, s.ID, -1, session.CheckpointRequest{Tag: "base"}); err != nil {
		t.Fatal(err)
	}

	d.mgr.SetTestHooks(session.TestHooks{Pause: map[string]time.Duration{"checkpoint": 3 * time.Second}})
	done := make(chan int, 1)
	go func() {
		code, _ := rawDo(t, d.url, "POST", p+"/checkpoint", nil, map[string]any{"tag": "slow"})
		done <- code
	}()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if code, msg := rawDo(t, d.url, "POST", p+"/exec", nil, map[string]any{"command": "true"}); code == 409 && strings.Contains(msg, "checkpoint") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the checkpoint never took the session")
		}
	}
	if _, err := d.c.DialPTY(ctx, s.ID, client.PTYOptions{}); status(err) != 409 || !strings.Contains(err.Error(), "checkpoint is in progress") {
		t.Errorf("a terminal during a checkpoint: %v, want 409 naming it", err)
	}
	if code := <-done; code != 200 {
		t.Fatalf("the slow checkpoint: %d", code)
	}
	d.mgr.SetTestHooks(session.TestHooks{})

	tm := openTerm(t, ctx, d.c, s.ID, client.PTYOptions{})
	tm.send("echo ready-$((1+1))\r")
	tm.until("ready-2")
	if _, err := d.c.Restore(ctx, s.ID, -1, "base"); status(err) != 409 || !strings.Contains(err.Error(), "terminal") {
		t.Errorf("restore with a terminal open: %v, want 409 naming the terminal", err)
	}
	if kids, err := d.c.Fork(ctx, s.ID, -1, 1); err != nil {
		t.Errorf("fork with a terminal open: %v, want it to go ahead (the parent is not replaced)", err)
	} else {
		d.c.DeleteSession(ctx, kids[0].ID)
	}
	if _, err := d.c.Checkpoint(ctx, s.ID, -1, session.CheckpointRequest{Tag: "beside"}); err != nil {
		t.Errorf("checkpoint with a terminal open: %v", err)
	}
	tm.send("echo still-$((2+2))\r")
	tm.until("still-4")
	tm.send("exit\r")
	if code := tm.exitCode(); code != 0 {
		t.Errorf("exit code %d", code)
	}
	waitClose(t, d.led, s.ID, 1)
	if _, err := d.c.Restore(ctx, s.ID, -1, "base"); err != nil {
		t.Errorf("restore once the terminal closed: %v", err)
	}

	// Deleting the session ends an open terminal.
	tm = openTerm(t, ctx, d.c, s.ID, client.PTYOptions{})
	tm.send("echo up-$((3+3))\r")
	tm.until("up-6")
	if err := d.c.DeleteSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if ce := tm.closed(); ce.Code != websocket.StatusInternalError || !strings.Contains(ce.Reason, "without an exit code") {
		t.Errorf("terminal of a deleted session: close %v %q, want 1011", ce.Code, ce.Reason)
	}
	closes := waitClose(t, d.led, s.ID, 2)
	if closes[1]["ended"] != "sandbox" || closes[1]["exit_code"] != nil {
		t.Errorf("pty.close after delete: %v", closes[1])
	}
}

// TestPTYCap: 16 terminals at once on a daemon; the 17th is 409 until one
// closes (ended: client in its pty.close).
func TestPTYCap(t *testing.T) {
	d := newTestDaemon(t)
	ctx := ptyCtx(t)
	var ids []string
	for range 2 {
		s, err := d.c.CreateSession(ctx, session.CreateRequest{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID)
	}
	var terms []*term
	for i := range terminals.MaxTerminals {
		tm := openTerm(t, ctx, d.c, ids[i%2], client.PTYOptions{Command: "echo up; exec sleep 600"})
		tm.until("up")
		terms = append(terms, tm)
	}
	if _, err := d.c.DialPTY(ctx, ids[0], client.PTYOptions{}); status(err) != 409 || !strings.Contains(err.Error(), "16 terminals") {
		t.Fatalf("terminal 17: %v, want 409", err)
	}
	terms[1].conn.Close(websocket.StatusNormalClosure, "")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		conn, err := d.c.DialPTY(ctx, ids[0], client.PTYOptions{Command: "exit 0"})
		if err == nil {
			conn.CloseNow()
			break
		}
		if status(err) != 409 || time.Now().After(deadline) {
			t.Fatalf("after one closed: %v", err)
		}
	}
	closes := waitClose(t, d.led, ids[1], 1)
	if closes[0]["ended"] != "client" || closes[0]["exit_code"] != nil {
		t.Errorf("pty.close of the terminal the caller closed: %v", closes[0])
	}
}

// TestPTYTicket: a browser's way in. A tenant's ticket opens one terminal
// without a bearer token, as that tenant; used again, or shown on another
// session (which spends it), it is 401; a session token cannot get one.
// No ticket reaches the ledger or the daemon's log. (Expiry, with a moved
// clock, is TestTerminalTickets in hostd/terminals.)
func TestPTYTicket(t *testing.T) {
	// The daemon's log, to look for tickets in.
	var logs syncBuffer
	d := fakeDaemon(t, daemontest.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	ctx := ptyCtx(t)
	toks := withTenants(t, d, "acme")
	hs := struct{ URL string }{d.url}
	acme := client.New(hs.URL, toks["acme"])
	anon := client.New(hs.URL, "")
	a, err := acme.CreateSession(ctx, session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := acme.CreateSession(ctx, session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var tickets []string
	ticket := func(id string) string {
		t.Helper()
		tk, err := acme.PTYTicket(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if time.Until(tk.ExpiresAt) > 31*time.Second || time.Until(tk.ExpiresAt) < 25*time.Second {
			t.Errorf("ticket expires at %s, want in 30 s", tk.ExpiresAt)
		}
		tickets = append(tickets, tk.Ticket)
		return tk.Ticket
	}
	if ans := as(t, hs.URL, toks["acme"], "POST", sp(a.ID)+"/pty-ticket", nil); ans.status != 201 || ans.header.Get("Cache-Control") != "no-store" {
		t.Errorf("ticket answer: %d, Cache-Control %q", ans.status, ans.header.Get("Cache-Control"))
	} else {
		var tk terminals.TerminalTicket
		json.Unmarshal(ans.body, &tk)
		tickets = append(tickets, tk.Ticket)
	}

	tk := ticket(a.ID)
	tm := openTerm(t, ctx, anon, a.ID, client.PTYOptions{Ticket: tk, Command: "echo via-ticket; exit 4"})
	tm.until("via-ticket")
	if code := tm.exitCode(); code != 4 {
		t.Errorf("exit code %d, want 4", code)
	}
	refused := func(what, tk, id string) {
		t.Helper()
		_, err := anon.DialPTY(ctx, id, client.PTYOptions{Ticket: tk})
		if status(err) != 401 || !strings.Contains(err.Error(), "ticket") {
			t.Errorf("%s: %v, want 401 about the ticket", what, err)
		}
		if strings.Contains(err.Error(), tk) {
			t.Errorf("%s: the refusal repeats the ticket", what)
		}
	}
	refused("the same ticket again", tk, a.ID)
	tk = ticket(a.ID)
	refused("a ticket on another session", tk, b.ID)
	refused("that ticket, now on its own session", tk, a.ID)
	refused("a made-up ticket", "pdk_pty_"+strings.Repeat("ab", 32), a.ID)
	// A session token cannot get a ticket, so it cannot get a terminal
	// this way either.
	st, err := acme.MintToken(ctx, a.ID, tokens.TokenRequest{Ops: auth.GrantableOps()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.New(hs.URL, st.Token).PTYTicket(ctx, a.ID); status(err) != 403 {
		t.Errorf("ticket for a session token: %v, want 403", err)
	}
	// A ticket outlives nothing: after the tenant is removed, its ticket
	// opens nothing.
	tk = ticket(b.ID)
	if err := d.api.Verifier().SetTenants(nil); err != nil {
		t.Fatal(err)
	}
	refused("a removed tenant's ticket", tk, b.ID)

	closes := waitClose(t, d.led, a.ID, 1)
	opens, _, actors, raw := ptyEntries(t, d.led, a.ID)
	if len(opens) != 1 || actors[0] != "tenant:acme" || closes[0]["exit_code"] != 4.0 {
		t.Errorf("ledger: opens %v by %v, closes %v", opens, actors, closes)
	}
	_, _, _, rawB := ptyEntries(t, d.led, b.ID)
	d.close() // every request logged
	log := logs.String()
	if !strings.Contains(log, "terminal ticket refused") || !strings.Contains(log, "/pty") {
		t.Fatalf("the log shows no terminal request: the test proves nothing\n%s", log)
	}
	for _, tk := range tickets {
		if strings.Contains(raw+rawB, tk) || strings.Contains(raw+rawB, tk[len("pdk_pty_"):]) {
			t.Errorf("a ticket is in the ledger")
		}
		if strings.Contains(log, tk[len("pdk_pty_"):]) {
			t.Errorf("a ticket is in the daemon's log")
		}
	}
}
