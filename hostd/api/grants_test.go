package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"paddock.dev/paddock/client"
	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/grants"
	"paddock.dev/paddock/hostd/ledger"
	"paddock.dev/paddock/hostd/session"
)

// grantDaemon is daemon with the grants service (whose GrantsFor the
// proxy calls) and the state directory (whose database file the test reads).
func grantDaemon(t *testing.T) (*client.Client, string, *grants.Service, *ledger.Ledger, string) {
	t.Helper()
	d := newTestDaemon(t)
	return d.c, d.url, d.gr, d.led, d.state
}

// TestGrants drives credential grants through the API: what is refused,
// what is shown (never a value), the limits, revocation, and what a
// session's delete, fork, restore and expiry do to its grants. The secrets
// end up in neither the database file nor the ledger.
func TestGrants(t *testing.T) {
	c, url, mgr, led, state := grantDaemon(t)
	ctx := context.Background()
	const value = "Bearer value-secret-4f1c9e"
	const envValue = "token-env-secret-7a2d0b"
	t.Setenv("PADDOCK_SECRET_GRANT_TEST", envValue)
	os.Unsetenv("PADDOCK_SECRET_MISSING_X")

	s, err := c.CreateSession(ctx, session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	gp := "/v1/agents/sessions/" + s.ID + "/grants"
	for _, tc := range []struct {
		name string
		body string
		want int
		in   string // the error names this
	}{
		{"no hosts", `{"value":"x"}`, 400, "hosts"},
		{"empty hosts", `{"value":"x","hosts":[]}`, 400, "hosts"},
		{"17 hosts", `{"value":"x","hosts":["a.test"` + strings.Repeat(`,"a.test"`, 16) + `]}`, 400, "hosts"},
		{"bad host", `{"value":"x","hosts":["*.com"]}`, 400, "wildcard"},
		{"both", `{"value":"x","secret_ref":"GRANT_TEST","hosts":["a.test"]}`, 400, "not both"},
		{"neither", `{"hosts":["a.test"]}`, 400, "secret_ref"},
		{"bad ref", `{"secret_ref":"gh-token","hosts":["a.test"]}`, 400, "secret_ref"},
		{"missing variable", `{"secret_ref":"MISSING_X","hosts":["a.test"]}`, 400, "PADDOCK_SECRET_MISSING_X"},
		{"bad header", `{"value":"x","hosts":["a.test"],"header":"Bad Header"}`, 400, "header"},
		{"host header", `{"value":"x","hosts":["a.test"],"header":"host"}`, 400, "Host"},
		{"cookie header", `{"value":"x","hosts":["a.test"],"header":"Cookie"}`, 400, "Cookie"},
		{"hop-by-hop header", `{"value":"x","hosts":["a.test"],"header":"Connection"}`, 400, "Connection"},
		{"bad method", `{"value":"x","hosts":["a.test"],"methods":["BREW"]}`, 400, "BREW"},
		{"bad path", `{"value":"x","hosts":["a.test"],"paths":["/a/../b"]}`, 400, "paths"},
		{"relative path", `{"value":"x","hosts":["a.test"],"paths":["x"]}`, 400, "paths"},
		{"ttl too long", `{"value":"x","hosts":["a.test"],"ttl_seconds":86401}`, 400, "ttl_seconds"},
		{"ttl negative", `{"value":"x","hosts":["a.test"],"ttl_seconds":-1}`, 400, "ttl_seconds"},
		{"newline in value", `{"value":"a\nb","hosts":["a.test"]}`, 400, "value"},
		{"value too long", `{"value":"` + strings.Repeat("v", 8193) + `","hosts":["a.test"]}`, 400, "value"},
		{"unknown field", `{"value":"x","hosts":["a.test"],"bound":true}`, 400, "bound"},
		{"body too large", `{"value":"` + strings.Repeat("v", 200<<10) + `","hosts":["a.test"]}`, 413, ""},
	} {
		code, body := rawCall(t, url, http.MethodPost, gp, strings.NewReader(tc.body))
		if code != tc.want || !strings.Contains(body, tc.in) {
			t.Errorf("%s: %d %s, want %d naming %q", tc.name, code, body, tc.want, tc.in)
		}
		if strings.Contains(body, envValue) {
			t.Errorf("%s: the answer holds a secret: %s", tc.name, body)
		}
	}

	// A value, and a secret_ref read from the daemon's environment.
	g1, err := c.Grant(ctx, s.ID, grants.GrantRequest{Value: value, Hosts: []string{"API.test."}, Paths: []string{"/x*"}, Methods: []string{"get"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(g1.ID, "gr-") || g1.Header != "Authorization" || g1.SecretRef != "" ||
		strings.Join(g1.Hosts, ",") != "api.test" || strings.Join(g1.Methods, ",") != "GET" || strings.Join(g1.Paths, ",") != "/x*" {
		t.Errorf("grant: %+v", g1)
	}
	if d := time.Until(g1.ExpiresAt); d < 590*time.Second || d > 600*time.Second {
		t.Errorf("a 3600 s grant on a session with 600 s left expires in %v, want it capped at the session's expiry", d)
	}
	if !g1.ExpiresAt.Equal(s.ExpiresAt) {
		t.Errorf("grant expires %v, session %v", g1.ExpiresAt, s.ExpiresAt)
	}
	var raw map[string]any
	code := call(t, url, http.MethodPost, gp, map[string]any{"secret_ref": "GRANT_TEST", "hosts": []string{"*.example.com"}, "header": "x-api-key", "ttl_seconds": 60}, &raw)
	if body := fmt.Sprint(raw); code != 201 || strings.Contains(body, envValue) || raw["secret_ref"] != "GRANT_TEST" || raw["header"] != "X-Api-Key" || raw["value"] != nil {
		t.Errorf("grant by secret_ref: %d %s", code, body)
	}
	live := mgr.GrantsFor(s.ID)
	if len(live) != 2 || live[0].Value != value || live[1].Value != envValue || live[1].Header != "X-Api-Key" {
		t.Errorf("GrantsFor: %+v", live)
	}
	var list json.RawMessage
	code = call(t, url, http.MethodGet, gp, nil, &list)
	if body := string(list); code != 200 || strings.Contains(body, value) || strings.Contains(body, envValue) || strings.Count(body, `"id": "gr-`) != 2 {
		t.Errorf("list: %d %s (must show both, without values)", code, body)
	}

	// At most 16 live grants.
	for i := 2; i < grants.MaxGrantsPerSession; i++ {
		if _, err := c.Grant(ctx, s.ID, grants.GrantRequest{Value: "v", Hosts: []string{"more.test"}}); err != nil {
			t.Fatalf("grant %d: %v", i+1, err)
		}
	}
	if _, err := c.Grant(ctx, s.ID, grants.GrantRequest{Value: "v", Hosts: []string{"more.test"}}); status(err) != 409 {
		t.Errorf("grant 17: %v, want 409", err)
	}

	// Revoke one, then all.
	if err := c.Ungrant(ctx, s.ID, g1.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.Ungrant(ctx, s.ID, g1.ID); status(err) != 404 {
		t.Errorf("revoke it again: %v, want 404", err)
	}
	if err := c.Ungrant(ctx, s.ID, "gr-unknown"); status(err) != 404 {
		t.Errorf("revoke an unknown grant: %v, want 404", err)
	}
	if gs, _ := c.Grants(ctx, s.ID); len(gs) != grants.MaxGrantsPerSession-1 {
		t.Errorf("after revoking one: %d grants", len(gs))
	}
	if err := c.Ungrant(ctx, s.ID, ""); err != nil {
		t.Fatal(err)
	}
	if gs, err := c.Grants(ctx, s.ID); err != nil || len(gs) != 0 || len(mgr.GrantsFor(s.ID)) != 0 {
		t.Errorf("after revoking all: %v %v", gs, err)
	}
	if _, err := c.Grants(ctx, "ses-missing"); status(err) != 404 {
		t.Errorf("grants of a missing session: %v, want 404", err)
	}

	// Restore keeps them; fork children start with none.
	g2, err := c.Grant(ctx, s.ID, grants.GrantRequest{Value: value, Hosts: []string{"api.test"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Checkpoint(ctx, s.ID, -1, session.CheckpointRequest{Tag: "before"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Restore(ctx, s.ID, -1, "before"); err != nil {
		t.Fatal(err)
	}
	if gs := mgr.GrantsFor(s.ID); len(gs) != 1 || gs[0].ID != g2.ID {
		t.Errorf("after restore: %+v, want the grant kept", gs)
	}
	kids, err := c.Fork(ctx, s.ID, -1, 1)
	if err != nil || len(kids) != 1 {
		t.Fatalf("fork: %v", err)
	}
	if gs, _ := c.Grants(ctx, kids[0].ID); len(gs) != 0 || len(mgr.GrantsFor(kids[0].ID)) != 0 {
		t.Errorf("a fork child has grants: %+v", gs)
	}
	if len(mgr.GrantsFor(s.ID)) != 1 {
		t.Error("the fork took the parent's grant")
	}

	// Delete drops them, and a deleted session takes no new one.
	if err := c.DeleteSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if gs := mgr.GrantsFor(s.ID); len(gs) != 0 {
		t.Errorf("after delete: %+v", gs)
	}
	if _, err := c.Grant(ctx, s.ID, grants.GrantRequest{Value: "v", Hosts: []string{"api.test"}}); status(err) != 409 {
		t.Errorf("grant on a deleted session: %v, want 409", err)
	}

	// Expiry: a session's grants end with it.
	short, err := c.CreateSession(ctx, session.CreateRequest{TTLSeconds: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Grant(ctx, short.ID, grants.GrantRequest{Value: value, Hosts: []string{"api.test"}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2100 * time.Millisecond)
	if gs := mgr.GrantsFor(short.ID); len(gs) != 0 {
		t.Errorf("after the session expired: %+v", gs)
	}
	if _, err := c.Grant(ctx, short.ID, grants.GrantRequest{Value: "v", Hosts: []string{"api.test"}}); status(err) != 409 {
		t.Errorf("grant on an expired session: %v, want 409", err)
	}

	// The ledger has create and revoke, never a secret.
	var all bytes.Buffer
	for _, id := range []string{s.ID, kids[0].ID, short.ID} {
		es, err := led.List(ctx, id, 0, 10000)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			all.WriteString(e.Kind + " " + string(e.Data) + "\n")
		}
	}
	for _, want := range []string{"grant.create", `"ref":"GRANT_TEST"`, "grant.revoke", "session deleted"} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("the ledger has no %s:\n%s", want, all.String())
		}
	}
	if strings.Contains(all.String(), "secret-") {
		t.Errorf("the ledger holds a secret:\n%s", all.String())
	}
	// Nor the database, its WAL included.
	files, _ := filepath.Glob(filepath.Join(state, "paddock.db*"))
	if len(files) == 0 {
		t.Fatal("no database file")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(value)) || bytes.Contains(b, []byte(envValue)) || bytes.Contains(b, []byte("secret-")) {
			t.Errorf("%s holds a secret", filepath.Base(f))
		}
	}
	if !bytes.Contains(mustRead(t, files...), []byte("grant.create")) {
		t.Error("the database has no grant.create: the byte check above would prove nothing")
	}
}

func mustRead(t *testing.T, files ...string) []byte {
	t.Helper()
	var all []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

// TestGrantAccess holds who may use each grant route (POST, GET, DELETE
// all, DELETE one). The daemon's PADDOCK_SECRET_ variables are the
// admin's: a tenant's secret_ref is 403 with code secret_ref_admin_only on
// any session (its own, another tenant's, a made-up one) whether or not
// the variable is set, with one answer for all of them. A tenant grants a
// value of its own on its own session, lists and revokes that session's
// grants, and gets 404 on every route of another tenant's session, as for
// a session that does not exist. A session token, even with every
// grantable op, is 403 on every route, its own session included. The
// admin may do all of it. Nothing a refused call asked for is granted,
// revoked or ledgered.
func TestGrantAccess(t *testing.T) {
	d := fakeDaemon(t)
	toks := withTenants(t, d, "acme", "beta")
	ctx := context.Background()
	const secret = "Bearer operator-only-5e2b77"
	t.Setenv("PADDOCK_SECRET_GRANT_ACCESS", secret)
	os.Unsetenv("PADDOCK_SECRET_GRANT_ACCESS_UNSET")
	acme, beta := client.New(d.url, toks["acme"]), client.New(d.url, toks["beta"])
	sa, err := acme.CreateSession(ctx, session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := beta.CreateSession(ctx, session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	mintAns, st := mint(t, d.url, toks["acme"], sa.ID, map[string]any{"ops": auth.GrantableOps()})
	if mintAns.status != 201 || len(st.Ops) != len(auth.GrantableOps()) {
		t.Fatalf("mint a token with every op: %d %s", mintAns.status, mintAns.body)
	}
	// Grants already there, which refused callers try to list and revoke.
	ga, err := d.c.Grant(ctx, sa.ID, grants.GrantRequest{SecretRef: "GRANT_ACCESS", Hosts: []string{"api.test"}})
	if err != nil {
		t.Fatalf("the admin grants a secret_ref: %v", err)
	}
	gb, err := d.c.Grant(ctx, sb.ID, grants.GrantRequest{Value: "Bearer beta-own", Hosts: []string{"api.test"}})
	if err != nil {
		t.Fatal(err)
	}
	grantIDs := func(id string) string {
		var ids []string
		for _, g := range d.gr.GrantsFor(id) {
			ids = append(ids, g.ID)
		}
		return strings.Join(ids, ",")
	}
	grantEntries := func(id string) int {
		n := 0
		for _, e := range entries(t, d.led, id) {
			if strings.HasPrefix(e.Kind, "grant.") {
				n++
			}
		}
		return n
	}
	if grantIDs(sa.ID) != ga.ID || grantIDs(sb.ID) != gb.ID || grantEntries(sa.ID) != 1 || grantEntries(sb.ID) != 1 {
		t.Fatalf("before: %q %q, %d and %d ledger entries", grantIDs(sa.ID), grantIDs(sb.ID), grantEntries(sa.ID), grantEntries(sb.ID))
	}

	const madeUp = "ses-0123456789abcdef"
	gp := func(id string) string { return "/v1/agents/sessions/" + id + "/grants" }
	ref := map[string]any{"secret_ref": "GRANT_ACCESS", "hosts": []string{"api.test"}}
	unsetRef := map[string]any{"secret_ref": "GRANT_ACCESS_UNSET", "hosts": []string{"api.test"}}
	value := map[string]any{"value": "Bearer tenant-own-91c3", "hosts": []string{"api.test"}}
	type refusal struct {
		who, tok, method, path string
		body                   any
		status                 int
		code, says             string
	}
	var refusals []refusal
	// A tenant's secret_ref, wherever it aims and whether the variable
	// exists or not.
	for _, id := range []string{sa.ID, sb.ID, madeUp} {
		for _, b := range []map[string]any{ref, unsetRef} {
			refusals = append(refusals, refusal{"acme secret_ref " + b["secret_ref"].(string), toks["acme"], "POST", gp(id), b, 403,
				grants.CodeSecretRefAdminOnly, "only the admin token may grant"})
		}
	}
	// A tenant on another tenant's session: 404 on every route.
	for _, r := range []struct {
		method, path string
		body         any
	}{{"POST", gp(sb.ID), value}, {"GET", gp(sb.ID), nil}, {"DELETE", gp(sb.ID), nil}, {"DELETE", gp(sb.ID) + "/" + gb.ID, nil}} {
		refusals = append(refusals, refusal{"acme on beta's session", toks["acme"], r.method, r.path, r.body, 404, "not_found", "session " + sb.ID})
	}
	// A session token with every op, on its own session and another.
	for _, id := range []string{sa.ID, sb.ID} {
		g := ga.ID
		if id == sb.ID {
			g = gb.ID
		}
		for _, r := range []struct {
			method, path string
			body         any
		}{{"POST", gp(id), value}, {"POST", gp(id), ref}, {"GET", gp(id), nil}, {"DELETE", gp(id), nil}, {"DELETE", gp(id) + "/" + g, nil}} {
			refusals = append(refusals, refusal{"session token", st.Token, r.method, r.path, r.body, 403, "forbidden", "session token cannot"})
		}
	}
	var secretRefAnswer []byte
	for _, tc := range refusals {
		a := as(t, d.url, tc.tok, tc.method, tc.path, tc.body)
		var e struct{ Error, Code string }
		json.Unmarshal(a.body, &e)
		if a.status != tc.status || e.Code != tc.code || !strings.Contains(e.Error, tc.says) {
			t.Errorf("%s: %s %s: %d %s, want %d with code %q saying %q", tc.who, tc.method, tc.path, a.status, a.body, tc.status, tc.code, tc.says)
		}
		if bytes.Contains(a.body, []byte(secret)) || bytes.Contains(a.body, []byte("operator-only")) {
			t.Errorf("%s: %s %s: the answer holds the secret: %s", tc.who, tc.method, tc.path, a.body)
		}
		if tc.code == grants.CodeSecretRefAdminOnly {
			// One answer whatever the session and the variable: a tenant
			// learns neither which sessions exist nor which secrets.
			if secretRefAnswer == nil {
				secretRefAnswer = a.body
			} else if !bytes.Equal(a.body, secretRefAnswer) {
				t.Errorf("%s %s: the refusal differs:\n%s\nfrom the first:\n%s", tc.who, tc.path, a.body, secretRefAnswer)
			}
		}
	}
	if !strings.Contains(string(secretRefAnswer), "as value") {
		t.Errorf("the secret_ref refusal does not say what to do instead: %s", secretRefAnswer)
	}
	// Another tenant's session answers as a made-up one does.
	for _, r := range []struct{ method, rest string }{{"POST", ""}, {"GET", ""}, {"DELETE", ""}, {"DELETE", "/gr-0123456789abcdef"}} {
		real := as(t, d.url, toks["acme"], r.method, gp(sb.ID)+r.rest, value)
		fake := as(t, d.url, toks["acme"], r.method, gp(madeUp)+r.rest, value)
		if real.status != 404 || !bytes.Equal(bytes.ReplaceAll(real.body, []byte(sb.ID), []byte("ID")), bytes.ReplaceAll(fake.body, []byte(madeUp), []byte("ID"))) {
			t.Errorf("%s grants%s on another tenant's session: %d %s; on a made-up one: %d %s", r.method, r.rest, real.status, real.body, fake.status, fake.body)
		}
	}
	if grantIDs(sa.ID) != ga.ID || grantIDs(sb.ID) != gb.ID || grantEntries(sa.ID) != 1 || grantEntries(sb.ID) != 1 {
		t.Errorf("refused calls changed the grants: %q %q, %d and %d ledger entries", grantIDs(sa.ID), grantIDs(sb.ID), grantEntries(sa.ID), grantEntries(sb.ID))
	}

	// What a tenant may do on its own session: grant a value it supplies,
	// list, revoke one, revoke all.
	own, err := acme.Grant(ctx, sa.ID, grants.GrantRequest{Value: "Bearer tenant-own-91c3", Hosts: []string{"api.test"}})
	if err != nil {
		t.Fatalf("a tenant grants its own value on its own session: %v", err)
	}
	if gs := d.gr.GrantsFor(sa.ID); len(gs) != 2 || gs[1].Value != "Bearer tenant-own-91c3" || gs[1].SecretRef != "" {
		t.Errorf("after the tenant's grant: %+v", gs)
	}
	if gs, err := acme.Grants(ctx, sa.ID); err != nil || len(gs) != 2 || gs[0].SecretRef != "GRANT_ACCESS" {
		t.Errorf("the tenant lists its session's grants: %+v %v", gs, err)
	}
	if err := acme.Ungrant(ctx, sa.ID, own.ID); err != nil {
		t.Errorf("the tenant revokes its grant: %v", err)
	}
	if err := acme.Ungrant(ctx, sa.ID, ""); err != nil || grantIDs(sa.ID) != "" {
		t.Errorf("the tenant revokes all its session's grants: %v, left %q", err, grantIDs(sa.ID))
	}
	// The admin, on a tenant's session: every route.
	if _, err := d.c.Grant(ctx, sb.ID, grants.GrantRequest{SecretRef: "GRANT_ACCESS", Hosts: []string{"api.test"}}); err != nil {
		t.Errorf("the admin grants a secret_ref on beta's session: %v", err)
	}
	if gs, err := d.c.Grants(ctx, sb.ID); err != nil || len(gs) != 2 {
		t.Errorf("the admin lists: %+v %v", gs, err)
	}
	if err := d.c.Ungrant(ctx, sb.ID, gb.ID); err != nil {
		t.Errorf("the admin revokes one: %v", err)
	}
	if err := d.c.Ungrant(ctx, sb.ID, ""); err != nil || grantIDs(sb.ID) != "" {
		t.Errorf("the admin revokes all: %v, left %q", err, grantIDs(sb.ID))
	}
	// No ledger entry names a tenant as the maker of a secret_ref grant.
	for _, id := range []string{sa.ID, sb.ID} {
		for _, e := range entries(t, d.led, id) {
			if e.Kind == "grant.create" && strings.Contains(string(e.Data), `"ref"`) && e.Actor != "admin" {
				t.Errorf("%s: %s made a secret_ref grant: %s", id, e.Actor, e.Data)
			}
		}
	}
}
