package api_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/session"
)

// TestRewindAccess holds who may use the rewind routes: a tenant on its
// own session, and the admin on any; another tenant's session is 404 on
// every route (as a made-up one), and a session token, even one with
// every grantable op, is 403 on every route of its own session, since an
// undo or a bisect replaces the machine as a restore does. A refused call
// changes nothing: the ring and the config stay, nothing is ledgered.
func TestRewindAccess(t *testing.T) {
	d := fakeDaemon(t)
	toks := withTenants(t, d, "acme", "beta")
	ctx := context.Background()
	acme, beta := client.New(d.url, toks["acme"]), client.New(d.url, toks["beta"])
	sa, err := acme.CreateSession(ctx, session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := beta.CreateSession(ctx, session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	on := true
	for _, s := range []struct {
		c  *client.Client
		id string
	}{{acme, sa.ID}, {beta, sb.ID}} {
		if _, err := s.c.RewindConfig(ctx, s.id, apiv1.RewindConfigRequest{Enabled: &on}); err != nil {
			t.Fatalf("a tenant turns rewind on on its own session: %v", err)
		}
		if _, err := s.c.Exec(ctx, s.id, session.ExecRequest{Command: "echo one"}); err != nil {
			t.Fatal(err)
		}
	}
	_, st := mint(t, d.url, toks["acme"], sa.ID, map[string]any{"ops": auth.GrantableOps()})
	if st.Token == "" {
		t.Fatal("mint a token with every op")
	}
	rp := func(id, rest string) string { return "/v1/agents/sessions/" + id + "/rewind" + rest }
	routes := func(id string) []struct {
		method, path string
		body         any
	} {
		return []struct {
			method, path string
			body         any
		}{
			{"GET", rp(id, ""), nil},
			{"POST", rp(id, "/config"), map[string]any{"enabled": false}},
			{"POST", rp(id, "/undo"), map[string]any{"steps": 1}},
			{"POST", rp(id, "/pin"), map[string]any{"tag": "rw-1"}},
			{"POST", rp(id, "/bisect"), map[string]any{"test": "true"}},
			{"POST", rp(id, "/branch"), map[string]any{"tag": "rw-1", "count": 1}},
		}
	}
	const madeUp = "ses-0123456789abcdef"
	for _, r := range routes(sb.ID) {
		a := as(t, d.url, toks["acme"], r.method, r.path, r.body)
		fake := as(t, d.url, toks["acme"], r.method, strings.Replace(r.path, sb.ID, madeUp, 1), r.body)
		var e struct{ Code string }
		json.Unmarshal(a.body, &e)
		if a.status != 404 || e.Code != "not_found" || strings.ReplaceAll(string(a.body), sb.ID, "ID") != strings.ReplaceAll(string(fake.body), madeUp, "ID") {
			t.Errorf("acme %s %s on beta's session: %d %s (a made-up one: %d %s)", r.method, r.path, a.status, a.body, fake.status, fake.body)
		}
	}
	for _, r := range routes(sa.ID) {
		a := as(t, d.url, st.Token, r.method, r.path, r.body)
		if a.status != 403 || !strings.Contains(string(a.body), "session token cannot") {
			t.Errorf("a session token with every op: %s %s: %d %s", r.method, r.path, a.status, a.body)
		}
	}
	// Nothing changed.
	for _, s := range []struct {
		c  *client.Client
		id string
	}{{acme, sa.ID}, {beta, sb.ID}} {
		rw, err := s.c.Rewind(ctx, s.id)
		if err != nil || !rw.Config.Enabled || len(rw.Points) != 1 || rw.Points[0].Pinned {
			t.Errorf("after the refusals: %+v %v", rw, err)
		}
		if got, err := s.c.GetSession(ctx, s.id); err != nil || len(got.Children) != 0 || got.Usage.Children != 0 {
			t.Errorf("a refused branch made children: %+v %v", got, err)
		}
		for _, e := range entries(t, d.led, s.id) {
			if e.Kind == "rewind.undo" || e.Kind == "rewind.pin" || e.Kind == "rewind.bisect" || e.Kind == "rewind.branch" || (e.Kind == "rewind.config" && strings.Contains(string(e.Data), `"enabled":false`)) {
				t.Errorf("a refused call was ledgered: %s %s", e.Kind, e.Data)
			}
		}
	}
	// The admin may use them on a tenant's session; a branch child is
	// the tenant's, like a fork's.
	if b, err := d.c.RewindBranch(ctx, sb.ID, apiv1.RewindBranchRequest{Tag: "rw-1"}); err != nil || len(b.Children) != 1 || b.Children[0].Tenant != "beta" {
		t.Errorf("the admin branches beta's session: %+v %v", b, err)
	} else if _, err := acme.GetSession(ctx, b.Children[0].ID); status(err) != 404 {
		t.Errorf("acme reads beta's branch child: %v", err)
	}
	if p, err := d.c.RewindPin(ctx, sb.ID, "rw-1", true); err != nil || !p.Pinned {
		t.Errorf("the admin pins on beta's session: %+v %v", p, err)
	}
	if _, err := d.c.RewindUndo(ctx, sb.ID, apiv1.RewindUndoRequest{}); err != nil {
		t.Errorf("the admin undoes on beta's session: %v", err)
	}
}
