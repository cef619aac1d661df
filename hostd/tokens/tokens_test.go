package tokens

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/ledger"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/session/sessiontest"
)

// tokenManager is a session core on the fake backend (no root), with a
// clock the test moves, and its tokens service wired as hostd/daemon
// wires it.
func tokenManager(t *testing.T) (*session.Manager, *Service, *ledger.Ledger, *sessiontest.Clock) {
	t.Helper()
	clock := new(sessiontest.Clock)
	m := sessiontest.New(t, sessiontest.Now(clock.Now))
	return m, New(m), sessiontest.Ledger(m), clock
}

// revocations are the token.revoke entries of a session's ledger, as
// "id:reason".
func revocations(t *testing.T, led *ledger.Ledger, id string) []string {
	t.Helper()
	es, err := led.List(context.Background(), id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		if e.Kind != "token.revoke" {
			continue
		}
		var d struct{ ID, Reason string }
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d.ID+":"+d.Reason)
	}
	return out
}

// TestMintListRevoke: a minted token is given once, is found by the
// verifier's lookup with the hash of what was given, never outlives its
// session, is listed without its secret, and once revoked is revoked for
// the verifier too; revoking it again changes nothing. Bad input is a
// 400, an unknown token a 404, a sandbox's id a 404 that says so.
func TestMintListRevoke(t *testing.T) {
	m, svc, led, _ := tokenManager(t)
	ctx := context.Background()
	s, err := m.Create(ctx, "", session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := svc.Mint(ctx, "", s.ID, TokenRequest{Ops: []string{"read"}, TTLSeconds: MaxTokenTTLSeconds, Label: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	if tok.Token == "" || tok.ExpiresAt.After(s.ExpiresAt) {
		t.Errorf("minted %+v: want a token, expiring no later than the session (%s)", tok, s.ExpiresAt)
	}
	rec, found, err := svc.SessionToken(ctx, tok.ID)
	if err != nil || !found || rec.Hash != auth.HashToken(tok.Token) || rec.Revoked || rec.Session != s.ID {
		t.Errorf("lookup of %s: %+v %v %v", tok.ID, rec, found, err)
	}
	list, err := svc.List(ctx, "", s.ID)
	if err != nil || len(list) != 1 || list[0].ID != tok.ID || list[0].Token != "" || list[0].Label != "ci" {
		t.Errorf("list: %+v %v", list, err)
	}
	if _, err := svc.List(ctx, "acme", s.ID); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("another tenant's list: %v, want 404", err)
	}

	for name, req := range map[string]TokenRequest{
		"no such op": {Ops: []string{"root"}},
		"ttl":        {Ops: []string{"read"}, TTLSeconds: MaxTokenTTLSeconds + 1},
		"label":      {Ops: []string{"read"}, Label: strings.Repeat("é", MaxTokenLabel+1)},
		"control":    {Ops: []string{"read"}, Label: "a\nb"},
	} {
		if _, err := svc.Mint(ctx, "", s.ID, req); !errors.Is(err, session.ErrBadRequest) {
			t.Errorf("mint with a bad %s: %v, want 400", name, err)
		}
	}

	if err := svc.Revoke(ctx, "", s.ID, tok.ID); err != nil {
		t.Fatal(err)
	}
	if err := svc.Revoke(ctx, "", s.ID, tok.ID); err != nil {
		t.Errorf("revoking twice: %v", err)
	}
	if got := revocations(t, led, s.ID); len(got) != 1 || got[0] != tok.ID+":revoked" {
		t.Errorf("ledgered revocations %v, want one for %s", got, tok.ID)
	}
	if rec, _, _ := svc.SessionToken(ctx, tok.ID); !rec.Revoked {
		t.Error("a revoked token is not revoked for the verifier")
	}
	for _, bad := range []string{"tok-0123456789abcdef", "not-a-token"} {
		if err := svc.Revoke(ctx, "", s.ID, bad); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("revoke %q: %v, want 404", bad, err)
		}
	}

	sb, err := m.CreateKind(ctx, "", session.CreateRequest{Agent: session.KindSandbox, TTLSeconds: 600}, session.KindSandbox)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Mint(ctx, "", sb.ID, TokenRequest{Ops: []string{"read"}}); !errors.Is(err, session.ErrNotFound) || !strings.Contains(err.Error(), "sandbox") {
		t.Errorf("mint for a sandbox: %v, want a 404 naming the sandbox route", err)
	}
}

// TestTokensRevokedWhenSessionStops: through the core's stop hook,
// deleting a session revokes its live tokens and ledgers each as
// "session deleted" (a token already revoked is not ledgered again), an
// expiry as "session expired"; a lost sandbox or a daemon shutdown
// revokes nothing.
func TestTokensRevokedWhenSessionStops(t *testing.T) {
	m, svc, led, clock := tokenManager(t)
	ctx := context.Background()
	mint := func(id string) string {
		t.Helper()
		tok, err := svc.Mint(ctx, "", id, TokenRequest{Ops: []string{"read"}})
		if err != nil {
			t.Fatal(err)
		}
		return tok.ID
	}

	del, err := m.Create(ctx, "", session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	a, b := mint(del.ID), mint(del.ID)
	if err := svc.Revoke(ctx, "", del.ID, a); err != nil {
		t.Fatal(err)
	}
	if err := m.Delete(ctx, "", del.ID); err != nil {
		t.Fatal(err)
	}
	if got := revocations(t, led, del.ID); len(got) != 2 || got[0] != a+":revoked" || got[1] != b+":session deleted" {
		t.Errorf("after delete: revocations %v, want %s revoked then %s session deleted", got, a, b)
	}
	if rec, _, _ := svc.SessionToken(ctx, b); !rec.Revoked {
		t.Error("a deleted session's token is not revoked for the verifier")
	}

	// A token never outlives its session, so when the sweep expires one
	// its tokens have expired too: nothing is left to revoke or ledger,
	// and the verifier counts them revoked by the session's state.
	exp, err := m.Create(ctx, "", session.CreateRequest{TTLSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	c := mint(exp.ID)
	clock.Set(2 * time.Minute)
	if n := m.Sweep(ctx); n != 1 {
		t.Fatalf("the sweep expired %d sessions, want 1", n)
	}
	if got := revocations(t, led, exp.ID); len(got) != 0 {
		t.Errorf("after expiry: revocations %v of tokens that had expired", got)
	}
	if rec, _, _ := svc.SessionToken(ctx, c); !rec.Revoked {
		t.Error("an expired session's token is not revoked for the verifier")
	}
	clock.Set(0)

	// The hook itself, for a session still running: a lost sandbox
	// revokes nothing, an expiry revokes the live tokens as "session
	// expired".
	live, err := m.Create(ctx, "", session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	e := mint(live.ID)
	svc.stopped(ctx, live.ID, session.StopLost)
	if got := revocations(t, led, live.ID); len(got) != 0 {
		t.Errorf("a lost sandbox revoked %v", got)
	}
	svc.stopped(ctx, live.ID, session.StopExpired)
	if got := revocations(t, led, live.ID); len(got) != 1 || got[0] != e+":session expired" {
		t.Errorf("the expiry hook: revocations %v, want %s session expired", got, e)
	}

	kept, err := m.Create(ctx, "", session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	d := mint(kept.ID)
	m.Shutdown(ctx)
	if got := revocations(t, led, kept.ID); len(got) != 0 {
		t.Errorf("a shutdown revoked %v", got)
	}
	if rec, _, _ := svc.SessionToken(ctx, d); rec.Revoked {
		t.Error("a shutdown revoked a token for the verifier")
	}
}
