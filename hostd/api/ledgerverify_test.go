package api_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
	"paddock.dev/paddock/hostd/session"
)

// TestLedgerVerifyRoute: GET .../ledger/verify reports a whole chain as
// ok with the recorded head, and a changed entry as broken at its seq;
// another tenant's session answers as a made-up id does (404); a session
// token with read verifies its own session and no other, one without
// read is refused.
func TestLedgerVerifyRoute(t *testing.T) {
	d := fakeDaemon(t)
	toks := withTenants(t, d, "acme", "beta")
	ctx := context.Background()
	acme := client.New(d.url, toks["acme"])
	s, err := acme.CreateSession(ctx, session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	defer d.c.DeleteSession(ctx, s.ID)
	other, err := acme.CreateSession(ctx, session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	defer d.c.DeleteSession(ctx, other.ID)
	if _, err := acme.Exec(ctx, s.ID, session.ExecRequest{Command: "echo one"}); err != nil {
		t.Fatal(err)
	}

	// Whole: ok, every entry counted, the head is the last entry's hash.
	v, err := acme.VerifyLedger(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	es := entries(t, d.led, s.ID)
	last := es[len(es)-1]
	if !v.OK || v.Entries < 2 || v.Head != last.Hash || v.Recorded != v.Entries || v.RecordedHead != last.Hash || v.Reason != "" {
		t.Errorf("a whole ledger: %+v (last entry seq %d %s)", v, last.Seq, last.Hash)
	}

	// The route's answers by caller.
	p := func(id string) string { return "/v1/agents/sessions/" + id + "/ledger/verify" }
	const madeUp = "ses-0123456789abcdef"
	_, readTok := mint(t, d.url, toks["acme"], s.ID, map[string]any{"ops": []string{"read"}, "ttl_seconds": 600})
	_, execTok := mint(t, d.url, toks["acme"], s.ID, map[string]any{"ops": []string{"exec"}, "ttl_seconds": 600})
	if readTok.Token == "" || execTok.Token == "" {
		t.Fatal("minting session tokens failed")
	}
	for _, tc := range []struct {
		who, tok, path string
		want           int
	}{
		{"the admin", token, p(s.ID), 200},
		{"the tenant", toks["acme"], p(s.ID), 200},
		{"another tenant", toks["beta"], p(s.ID), 404},
		{"another tenant, made-up id", toks["beta"], p(madeUp), 404},
		{"a read token", readTok.Token, p(s.ID), 200},
		{"a read token, another session", readTok.Token, p(other.ID), 403},
		{"an exec token", execTok.Token, p(s.ID), 403},
		{"no token", "", p(s.ID), 401},
	} {
		a := as(t, d.url, tc.tok, "GET", tc.path, nil)
		if a.status != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.who, a.status, a.body, tc.want)
		}
		if tc.want == 200 {
			var got apiv1.LedgerVerification
			if err := json.Unmarshal(a.body, &got); err != nil || !got.OK {
				t.Errorf("%s: %s %v", tc.who, a.body, err)
			}
		}
	}
	// Another tenant's real id and a made-up one answer alike.
	real := as(t, d.url, toks["beta"], "GET", p(s.ID), nil)
	fake := as(t, d.url, toks["beta"], "GET", p(madeUp), nil)
	if strings.ReplaceAll(string(real.body), s.ID, "ID") != strings.ReplaceAll(string(fake.body), madeUp, "ID") {
		t.Errorf("another tenant's id answers %s, a made-up one %s", real.body, fake.body)
	}

	// Change the second entry's data behind the ledger's back: the chain
	// breaks there, and the answer says so (200: the check worked).
	db := d.st.DB()
	if _, err := db.Exec(`DROP TRIGGER ledger_no_update`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE ledger SET data = '{"command":"echo forged"}' WHERE session = ? AND seq = 2`, s.ID); err != nil {
		t.Fatal(err)
	}
	v, err = acme.VerifyLedger(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if v.OK || v.BrokenSeq != 2 || v.Reason != "hash mismatch" || v.Entries != 1 || v.Detail == "" {
		t.Errorf("a changed entry: %+v", v)
	}
	// The other session's chain is untouched.
	if v, err := acme.VerifyLedger(ctx, other.ID); err != nil || !v.OK {
		t.Errorf("the other session: %+v %v", v, err)
	}
}
