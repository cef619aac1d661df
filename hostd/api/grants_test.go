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
	"paddock.dev/paddock/hostd/ledger"
	"paddock.dev/paddock/hostd/session"
)

// grantDaemon is daemon with the manager (whose GrantsFor the proxy
// calls) and the state directory (whose database file the test reads).
func grantDaemon(t *testing.T) (*client.Client, string, *session.Manager, *ledger.Ledger, string) {
	t.Helper()
	d := newTestDaemon(t)
	return d.c, d.url, d.mgr, d.led, d.state
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
	g1, err := c.Grant(ctx, s.ID, session.GrantRequest{Value: value, Hosts: []string{"API.test."}, Paths: []string{"/x*"}, Methods: []string{"get"}})
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
	for i := 2; i < session.MaxGrantsPerSession; i++ {
		if _, err := c.Grant(ctx, s.ID, session.GrantRequest{Value: "v", Hosts: []string{"more.test"}}); err != nil {
			t.Fatalf("grant %d: %v", i+1, err)
		}
	}
	if _, err := c.Grant(ctx, s.ID, session.GrantRequest{Value: "v", Hosts: []string{"more.test"}}); status(err) != 409 {
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
	if gs, _ := c.Grants(ctx, s.ID); len(gs) != session.MaxGrantsPerSession-1 {
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
	g2, err := c.Grant(ctx, s.ID, session.GrantRequest{Value: value, Hosts: []string{"api.test"}})
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
	if _, err := c.Grant(ctx, s.ID, session.GrantRequest{Value: "v", Hosts: []string{"api.test"}}); status(err) != 409 {
		t.Errorf("grant on a deleted session: %v, want 409", err)
	}

	// Expiry: a session's grants end with it.
	short, err := c.CreateSession(ctx, session.CreateRequest{TTLSeconds: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Grant(ctx, short.ID, session.GrantRequest{Value: value, Hosts: []string{"api.test"}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2100 * time.Millisecond)
	if gs := mgr.GrantsFor(short.ID); len(gs) != 0 {
		t.Errorf("after the session expired: %+v", gs)
	}
	if _, err := c.Grant(ctx, short.ID, session.GrantRequest{Value: "v", Hosts: []string{"api.test"}}); status(err) != 409 {
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
