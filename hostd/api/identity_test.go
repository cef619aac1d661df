package api_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"paddock.dev/paddock/client"
	"paddock.dev/paddock/hostd/api"
	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/ledger"
	"paddock.dev/paddock/hostd/sandboxes"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/tokens"
)

// answer is one raw HTTP answer.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) errorText() string {
	var e struct{ Error string }
	json.Unmarshal(a.body, &e)
	return e.Error
}

// as does one request with bearer token tok ("" sends none).
func as(t *testing.T, url, tok, method, path string, body any) answer {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url+path, rd)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, b}
}

// withTenants gives the daemon tenants and returns their tokens by name.
func withTenants(t *testing.T, d *testDaemon, names ...string) map[string]string {
	t.Helper()
	toks := map[string]string{}
	var tf auth.TenantsFile
	for _, n := range names {
		tok, sum := auth.NewTenantToken()
		toks[n] = tok
		tf.Tenants = append(tf.Tenants, auth.TenantEntry{Name: n, TokenSHA256: sum})
	}
	ts, err := tf.Check()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.api.Verifier().SetTenants(ts); err != nil {
		t.Fatal(err)
	}
	return toks
}

// entries is a session's ledger.
func entries(t *testing.T, led *ledger.Ledger, id string) []ledger.Entry {
	t.Helper()
	es, err := led.List(context.Background(), id, 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// TestRouteAccess holds the route table to the router: every route served
// has an access entry and every entry is a route served, so a new route
// cannot ship without deciding who may call it. It also pins the
// decisions the table documents.
func TestRouteAccess(t *testing.T) {
	served := api.New(nil, sha256.Sum256(nil), nil).Routes()
	table := api.RouteAccess()
	for _, r := range served {
		a, ok := table[r]
		if !ok {
			t.Errorf("route %s has no row in the route table (hostd/api/routes): give it an op or AccessTenant", r)
			continue
		}
		if !a.Valid() {
			t.Errorf("route %s: access %q is neither a class nor a grantable op", r, a)
		}
	}
	for r := range table {
		if !slices.Contains(served, r) && r != "GET /healthz" {
			t.Errorf("the route table has %s, which the router does not serve", r)
		}
	}
	for _, tc := range []struct {
		route string
		want  auth.Access
	}{
		{"GET /healthz", auth.AccessPublic},
		{"GET /v1/whoami", auth.AccessAny},
		{"GET /v1/agents/sessions/{id}", auth.OpRead},
		{"GET /v1/agents/sessions/{id}/git/diff", auth.OpGit},
		{"GET /v1/agents/sessions/{id}/jobs", auth.OpJobs},
		{"GET /v1/agents/sessions/{id}/uploads", auth.OpFilesWrite},
		{"POST /v1/agents/sessions/{id}/checkpoint", auth.OpCheckpoint},
		{"POST /v1/agents/sessions/{id}/restore", auth.AccessTenant},
		{"POST /v1/agents/sessions/{id}/fork", auth.AccessTenant},
		{"DELETE /v1/agents/sessions/{id}", auth.AccessTenant},
		{"POST /v1/agents/sessions/{id}/tokens", auth.AccessTenant},
		{"POST /v1/agents/sessions/{id}/grants", auth.AccessTenant},
		{"GET /v1/agents/sessions", auth.AccessTenant},
		{"POST /v1/agents/sessions", auth.AccessTenant},
		{"GET /v1/sandboxes/{id}", auth.AccessTenant},
	} {
		if got := table[tc.route]; got != tc.want {
			t.Errorf("%s: %q, want %q", tc.route, got, tc.want)
		}
	}
	// Every grantable op opens some route, and only routes of one
	// session.
	for _, op := range auth.GrantableOps() {
		n := 0
		for r, a := range table {
			if string(a) == op {
				n++
				if !strings.Contains(r, " /v1/agents/sessions/{id}") {
					t.Errorf("%s needs op %s but is not a route of one session", r, op)
				}
			}
		}
		if n == 0 {
			t.Errorf("no route needs op %s", op)
		}
	}
}

// TestTenantIsolation: a tenant creates and sees only its own sessions and
// sandboxes, and another tenant's id answers exactly as an id that does
// not exist (status, headers that matter, body bytes with the id put
// aside), for reads, exec, events, the stream, tokens and delete. The
// admin sees everything. Idempotency keys are each caller's own.
func TestTenantIsolation(t *testing.T) {
	d := fakeDaemon(t)
	toks := withTenants(t, d, "acme", "beta")
	ctx := context.Background()
	acme, beta := client.New(d.url, toks["acme"]), client.New(d.url, toks["beta"])
	sa, err := acme.CreateSession(ctx, session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	defer d.c.DeleteSession(ctx, sa.ID)
	if sa.Tenant != "acme" {
		t.Errorf("a tenant's session has tenant %q", sa.Tenant)
	}
	sadm, err := d.c.CreateSession(ctx, session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	defer d.c.DeleteSession(ctx, sadm.ID)
	if es := entries(t, d.led, sa.ID); len(es) == 0 || es[0].Kind != "session.create" || es[0].Actor != "tenant:acme" {
		t.Errorf("create by a tenant ledgered as %+v", es)
	}
	ids := func(ss []*session.Session, err error) []string {
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range ss {
			out = append(out, s.ID)
		}
		return out
	}
	if got := ids(beta.ListSessions(ctx)); len(got) != 0 {
		t.Errorf("beta lists %v", got)
	}
	if got := ids(acme.ListSessions(ctx)); !slices.Equal(got, []string{sa.ID}) {
		t.Errorf("acme lists %v", got)
	}
	if got := ids(d.c.ListSessions(ctx)); !slices.Contains(got, sa.ID) || !slices.Contains(got, sadm.ID) {
		t.Errorf("the admin lists %v", got)
	}
	if _, err := d.c.GetSession(ctx, sa.ID); err != nil {
		t.Errorf("the admin cannot read a tenant's session: %v", err)
	}
	// Another tenant's id (and the admin's) against a made-up one of the
	// same length.
	const madeUp = "ses-0123456789abcdef"
	if len(madeUp) != len(sa.ID) {
		t.Fatalf("made-up id %s is not as long as %s", madeUp, sa.ID)
	}
	p := func(id, rest string) string { return "/v1/agents/sessions/" + id + rest }
	same := func(what string, real answer, realID string, fake answer, fakeID string, wantStatus int) {
		t.Helper()
		if real.status != wantStatus || fake.status != wantStatus {
			t.Errorf("%s: %d for another's session, %d for a made-up id, want %d", what, real.status, fake.status, wantStatus)
		}
		for _, h := range []string{"Content-Type", "Content-Length", "Cache-Control"} {
			if real.header.Get(h) != fake.header.Get(h) {
				t.Errorf("%s: %s %q vs %q", what, h, real.header.Get(h), fake.header.Get(h))
			}
		}
		rb := bytes.ReplaceAll(real.body, []byte(realID), []byte("ID"))
		fb := bytes.ReplaceAll(fake.body, []byte(fakeID), []byte("ID"))
		if !bytes.Equal(rb, fb) {
			t.Errorf("%s: bodies differ:\nanother's: %q\nmade-up:   %q", what, real.body, fake.body)
		}
	}
	for _, tc := range []struct {
		method, rest string
		body         any
		want         int
	}{
		{"GET", "", nil, 404},
		{"POST", "/exec", map[string]any{"command": "echo hi"}, 404},
		{"GET", "/events", nil, 404},
		{"GET", "/events/stream", nil, 404},
		{"GET", "/trajectory", nil, 404},
		{"GET", "/files?path=/workspace", nil, 404},
		{"POST", "/checkpoint", map[string]any{"tag": "x"}, 404},
		{"POST", "/tokens", map[string]any{"ops": []string{"exec"}}, 404},
		{"GET", "/tokens", nil, 404},
		{"DELETE", "/tokens/tok-0123456789abcdef", nil, 404},
		{"GET", "/grants", nil, 404},
		{"DELETE", "", nil, 204},
	} {
		for _, victim := range []string{sa.ID, sadm.ID} {
			real := as(t, d.url, toks["beta"], tc.method, p(victim, tc.rest), tc.body)
			fake := as(t, d.url, toks["beta"], tc.method, p(madeUp, tc.rest), tc.body)
			same(tc.method+" "+tc.rest+" on "+victim, real, victim, fake, madeUp, tc.want)
		}
	}
	// beta's DELETE did nothing.
	if s, err := acme.GetSession(ctx, sa.ID); err != nil || s.State != session.StateRunning {
		t.Errorf("after another tenant's delete: %+v %v", s, err)
	}
	if r, err := acme.Exec(ctx, sa.ID, session.ExecRequest{Command: "echo mine"}); err != nil || r.Stdout != "mine\n" {
		t.Errorf("acme exec: %+v %v", r, err)
	}
	// Sandboxes are the tenant's too.
	sbx, err := acme.CreateSandbox(ctx, sandboxes.SandboxRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	const madeUpSbx = "sbx-0123456789abcdef"
	for _, tc := range []struct {
		method, rest string
		body         any
		want         int
	}{
		{"GET", "", nil, 404},
		{"POST", "/process", map[string]any{"command": "true"}, 404},
		{"POST", "/fs/read", map[string]any{"path": "/etc/hostname"}, 404},
		{"POST", "/fs/write", map[string]any{"path": "/workspace/planted", "content": "x"}, 404},
		{"DELETE", "", nil, 204},
	} {
		same(tc.method+" sandbox"+tc.rest, as(t, d.url, toks["beta"], tc.method, "/v1/sandboxes/"+sbx.ID+tc.rest, tc.body), sbx.ID,
			as(t, d.url, toks["beta"], tc.method, "/v1/sandboxes/"+madeUpSbx+tc.rest, tc.body), madeUpSbx, tc.want)
	}
	if l, err := beta.ListSandboxes(ctx); err != nil || len(l) != 0 {
		t.Errorf("beta lists sandboxes %v %v", l, err)
	}
	if l, err := acme.ListSandboxes(ctx); err != nil || len(l) != 1 {
		t.Errorf("acme lists sandboxes %v %v", l, err)
	}
	if _, err := acme.GetSandbox(ctx, sbx.ID); err != nil {
		t.Errorf("acme's sandbox after beta's delete: %v", err)
	}
	// One Idempotency-Key, two tenants: two sessions, never a replay of
	// the other's.
	create := func(tok string) answer {
		req, _ := http.NewRequest("POST", d.url+"/v1/agents/sessions", strings.NewReader(`{"ttl_seconds":600}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Idempotency-Key", "same-key")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return answer{resp.StatusCode, resp.Header, b}
	}
	var c1, c2 session.Session
	a, b := create(toks["acme"]), create(toks["beta"])
	json.Unmarshal(a.body, &c1)
	json.Unmarshal(b.body, &c2)
	if a.status != 201 || b.status != 201 || c1.ID == c2.ID || c2.Tenant != "beta" || b.header.Get("Idempotent-Replayed") != "" {
		t.Errorf("same Idempotency-Key from two tenants: %d %s / %d %s (replayed %q)", a.status, c1.ID, b.status, c2.ID, b.header.Get("Idempotent-Replayed"))
	}
	d.c.DeleteSession(ctx, c1.ID)
	d.c.DeleteSession(ctx, c2.ID)
	if code := as(t, d.url, token, "DELETE", "/v1/sandboxes/"+sbx.ID, nil).status; code != 204 {
		t.Errorf("admin deletes acme's sandbox: %d", code)
	}
	// whoami for a tenant.
	if w, err := beta.WhoAmI(ctx); err != nil || w.Kind != auth.KindTenant || w.Tenant != "beta" || w.Session != "" {
		t.Errorf("tenant whoami: %+v %v", w, err)
	}
}

// mint mints a token through the API as tok and returns the answer.
func mint(t *testing.T, url, tok, id string, body any) (answer, tokens.SessionToken) {
	t.Helper()
	a := as(t, url, tok, "POST", "/v1/agents/sessions/"+id+"/tokens", body)
	var st tokens.SessionToken
	json.Unmarshal(a.body, &st)
	return a, st
}

// TestSessionTokens: a token minted for exec and files.read does those on
// its session and nothing else (403 naming the op or the session; 401 for
// unknown, wrong, revoked ones); who may mint; the ledger names the token
// as actor; a revoked token stops at once; the token reaches neither the
// ledger nor the database files.
func TestSessionTokens(t *testing.T) {
	d := fakeDaemon(t)
	toks := withTenants(t, d, "acme", "beta")
	ctx := context.Background()
	s1, err := d.c.CreateSession(ctx, session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	s2, err := d.c.CreateSession(ctx, session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	a, st := mint(t, d.url, token, s1.ID, map[string]any{"ops": []string{"files.read", "exec"}, "label": "agent one"})
	if a.status != 201 {
		t.Fatalf("mint: %d %s", a.status, a.body)
	}
	var fields map[string]any
	json.Unmarshal(a.body, &fields)
	for _, k := range []string{"id", "token", "ops", "label", "expires_at", "session"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("mint answer has no %s: %s", k, a.body)
		}
	}
	if !strings.HasPrefix(st.Token, "pdk_"+st.ID+"_") || st.Session != s1.ID || strings.Join(st.Ops, ",") != "exec,files.read" || st.Label != "agent one" {
		t.Errorf("minted %+v", st)
	}
	if a.header.Get("Cache-Control") != "no-store" {
		t.Errorf("mint answer Cache-Control %q", a.header.Get("Cache-Control"))
	}
	tc := client.New(d.url, st.Token)
	if w, err := tc.WhoAmI(ctx); err != nil || w.Kind != auth.KindSession || w.Session != s1.ID || w.TokenID != st.ID ||
		strings.Join(w.Ops, ",") != "exec,files.read" || w.ExpiresAt == nil || !w.ExpiresAt.Equal(st.ExpiresAt) {
		t.Errorf("whoami: %+v %v", w, err)
	}
	r, err := tc.Exec(ctx, s1.ID, session.ExecRequest{Command: "echo hi > f; echo ok"})
	if err != nil || r.Stdout != "ok\n" {
		t.Fatalf("exec with the token: %+v %v", r, err)
	}
	p1, p2 := "/v1/agents/sessions/"+s1.ID, "/v1/agents/sessions/"+s2.ID
	if a := as(t, d.url, st.Token, "GET", p1+"/files/content?path=/workspace/f", nil); a.status != 200 {
		t.Errorf("files.read: %d %s", a.status, a.body)
	}
	for _, tc := range []struct {
		method, path string
		body         any
		want         int
		says         string
	}{
		{"PUT", p1 + "/files/content", map[string]any{"path": "/workspace/g", "content_base64": base64.StdEncoding.EncodeToString([]byte("x"))}, 403, "not granted files.write"},
		{"GET", p1, nil, 403, "not granted read"},
		{"GET", p1 + "/events", nil, 403, "not granted read"},
		{"POST", p1 + "/jobs", map[string]any{"command": "true"}, 403, "not granted jobs"},
		{"POST", p1 + "/checkpoint", map[string]any{}, 403, "not granted checkpoint"},
		{"GET", p1 + "/git/status", nil, 403, "not granted git"},
		{"POST", p1 + "/restore", map[string]any{"tag": "x"}, 403, "session token cannot"},
		{"POST", p1 + "/fork", map[string]any{"count": 1}, 403, "session token cannot"},
		{"DELETE", p1, nil, 403, "session token cannot"},
		{"POST", p1 + "/tokens", map[string]any{"ops": []string{"exec"}}, 403, "session token cannot"},
		{"GET", p1 + "/tokens", nil, 403, "session token cannot"},
		{"DELETE", p1 + "/tokens/" + st.ID, nil, 403, "session token cannot"},
		{"POST", p1 + "/grants", map[string]any{"hosts": []string{"a.example"}, "value": "x"}, 403, "session token cannot"},
		{"POST", p2 + "/exec", map[string]any{"command": "true"}, 403, "works only on /v1/agents/sessions/" + s1.ID},
		{"GET", p2 + "/files?path=/", nil, 403, "works only on"},
		{"GET", "/v1/agents/sessions/ses-0123456789abcdef/files?path=/", nil, 403, "works only on"},
		{"GET", "/v1/agents/sessions", nil, 403, "session token cannot"},
		{"POST", "/v1/agents/sessions", map[string]any{}, 403, "session token cannot"},
		{"GET", "/v1/sandboxes", nil, 403, "session token cannot"},
		{"POST", "/v1/sandboxes", map[string]any{}, 403, "session token cannot"},
	} {
		a := as(t, d.url, st.Token, tc.method, tc.path, tc.body)
		if a.status != tc.want || !strings.Contains(a.errorText(), tc.says) {
			t.Errorf("session token %s %s: %d %q, want %d saying %q", tc.method, tc.path, a.status, a.errorText(), tc.want, tc.says)
		}
	}
	// Tokens that are not valid: 401, whatever the route.
	bad := "pdk_" + st.ID + "_" + strings.Repeat("0", 64)
	for _, tok := range []string{bad, "pdk_tok-0123456789abcdef_" + strings.Repeat("a", 64), "pdk_nonsense", ""} {
		if a := as(t, d.url, tok, "POST", p1+"/exec", map[string]any{"command": "true"}); a.status != 401 {
			t.Errorf("token %.12q…: %d, want 401", tok, a.status)
		}
	}
	// The ledger: minted by the admin, exec by the token; no secret.
	es := entries(t, d.led, s1.ID)
	var mintE, execE *ledger.Entry
	for i := range es {
		switch es[i].Kind {
		case "token.mint":
			mintE = &es[i]
		case "exec":
			execE = &es[i]
		}
	}
	if mintE == nil || mintE.Actor != "admin" || !strings.Contains(string(mintE.Data), `"id":"`+st.ID+`"`) ||
		!strings.Contains(string(mintE.Data), `"ops":["exec","files.read"]`) || !strings.Contains(string(mintE.Data), `"label":"agent one"`) ||
		!strings.Contains(string(mintE.Data), `"expires_at"`) {
		t.Errorf("token.mint entry %+v", mintE)
	}
	if execE == nil || execE.Actor != "session-token:"+st.ID {
		t.Errorf("exec entry %+v, want actor session-token:%s", execE, st.ID)
	}
	// The list shows ids, never a token or hash.
	la := as(t, d.url, token, "GET", p1+"/tokens", nil)
	var list struct{ Tokens []tokens.SessionToken }
	json.Unmarshal(la.body, &list)
	hash := sha256.Sum256([]byte(st.Token))
	if la.status != 200 || len(list.Tokens) != 1 || list.Tokens[0].ID != st.ID || list.Tokens[0].Token != "" ||
		bytes.Contains(la.body, []byte("pdk_")) || bytes.Contains(la.body, []byte(hex.EncodeToString(hash[:]))) {
		t.Errorf("list: %d %s", la.status, la.body)
	}
	// Minting is refused with reasons.
	long := strings.Repeat("é", tokens.MaxTokenLabel+1)
	for _, tc := range []struct {
		body any
		want int
		says string
	}{
		{map[string]any{}, 400, "ops is empty"},
		{map[string]any{"ops": []string{}}, 400, "ops is empty"},
		{map[string]any{"ops": []string{"exec", "delete"}}, 400, `"delete"`},
		{map[string]any{"ops": []string{"exec"}, "ttl_seconds": tokens.MaxTokenTTLSeconds + 1}, 400, "ttl_seconds"},
		{map[string]any{"ops": []string{"exec"}, "ttl_seconds": -5}, 400, "ttl_seconds"},
		{map[string]any{"ops": []string{"exec"}, "label": long}, 400, "label"},
		{map[string]any{"ops": []string{"exec"}, "label": "a\nb"}, 400, "printable"},
		{map[string]any{"ops": []string{"exec"}, "scope": "all"}, 400, "unknown field"},
	} {
		a, _ := mint(t, d.url, token, s1.ID, tc.body)
		if a.status != tc.want || !strings.Contains(a.errorText(), tc.says) {
			t.Errorf("mint %v: %d %q, want %d saying %q", tc.body, a.status, a.errorText(), tc.want, tc.says)
		}
	}
	if a, _ := mint(t, d.url, token, "ses-0123456789abcdef", map[string]any{"ops": []string{"exec"}}); a.status != 404 {
		t.Errorf("mint for an unknown session: %d", a.status)
	}
	// Tenants mint for their own sessions only.
	sa, err := client.New(d.url, toks["acme"]).CreateSession(ctx, session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	a, sta := mint(t, d.url, toks["acme"], sa.ID, map[string]any{"ops": []string{"exec", "read"}})
	if a.status != 201 {
		t.Errorf("tenant mints for its session: %d %s", a.status, a.body)
	}
	if a, _ := mint(t, d.url, toks["beta"], sa.ID, map[string]any{"ops": []string{"exec"}}); a.status != 404 {
		t.Errorf("another tenant mints: %d", a.status)
	}
	if a, _ := mint(t, d.url, toks["acme"], s1.ID, map[string]any{"ops": []string{"exec"}}); a.status != 404 {
		t.Errorf("a tenant mints for the admin's session: %d", a.status)
	}
	if w, err := client.New(d.url, sta.Token).WhoAmI(ctx); err != nil || w.Tenant != "acme" {
		t.Errorf("whoami of a tenant's session token: %+v %v", w, err)
	}
	if s, err := client.New(d.url, sta.Token).GetSession(ctx, sa.ID); err != nil || s.ID != sa.ID {
		t.Errorf("read with a tenant's session token: %v", err)
	}
	if es := entries(t, d.led, sa.ID); es[len(es)-1].Kind != "token.mint" || es[len(es)-1].Actor != "tenant:acme" {
		t.Errorf("a tenant's mint ledgered as %+v", es[len(es)-1])
	}
	// Revoked: at once, idempotent; an unknown id is 404.
	if a := as(t, d.url, token, "DELETE", p1+"/tokens/"+st.ID, nil); a.status != 204 {
		t.Fatalf("revoke: %d %s", a.status, a.body)
	}
	if _, err := tc.Exec(ctx, s1.ID, session.ExecRequest{Command: "true"}); status(err) != 401 || !strings.Contains(err.Error(), "revoked") {
		t.Errorf("exec after revoke: %v, want 401 saying revoked", err)
	}
	if a := as(t, d.url, token, "DELETE", p1+"/tokens/"+st.ID, nil); a.status != 204 {
		t.Errorf("second revoke: %d", a.status)
	}
	for _, id := range []string{"tok-0123456789abcdef", "nonsense"} {
		if a := as(t, d.url, token, "DELETE", p1+"/tokens/"+id, nil); a.status != 404 {
			t.Errorf("revoke %s: %d", id, a.status)
		}
	}
	if a := as(t, d.url, token, "DELETE", p2+"/tokens/"+st.ID, nil); a.status != 404 {
		t.Errorf("revoke through another session: %d", a.status)
	}
	n := 0
	for _, e := range entries(t, d.led, s1.ID) {
		if e.Kind == "token.revoke" {
			n++
			if !strings.Contains(string(e.Data), st.ID) || e.Actor != "admin" {
				t.Errorf("token.revoke entry %+v", e)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d token.revoke entries, want 1 (the second revoke changes nothing)", n)
	}
	// The token is in no ledger and in none of the database files.
	secret := st.Token[strings.LastIndex(st.Token, "_")+1:]
	files, _ := filepath.Glob(filepath.Join(d.state, "paddock.db*"))
	all := mustRead(t, files...)
	for _, tok := range []string{st.Token, sta.Token} {
		if bytes.Contains(all, []byte(tok)) || bytes.Contains(all, []byte(tok[strings.LastIndex(tok, "_")+1:])) {
			t.Errorf("a database file holds a token or its secret part")
		}
	}
	if bytes.Contains(all, []byte(secret)) {
		t.Error("a database file holds the secret part")
	}
	if !bytes.Contains(all, []byte(st.ID)) || !bytes.Contains(all, []byte("token.mint")) {
		t.Error("the database has neither the token id nor token.mint: the byte check above would prove nothing")
	}
	for _, id := range []string{s1.ID, sa.ID} {
		for _, e := range entries(t, d.led, id) {
			if strings.Contains(string(e.Data), "pdk_") || strings.Contains(e.Actor, "pdk_") {
				t.Errorf("ledger entry holds a token: %+v", e)
			}
		}
	}
	d.c.DeleteSession(ctx, sa.ID)
	d.c.DeleteSession(ctx, s1.ID)
	d.c.DeleteSession(ctx, s2.ID)
}

// TestSessionTokenOps: a token with every op reaches every op's routes on
// its session (checkpoint, jobs, uploads, git past the permission check,
// the read routes), and still not restore or fork.
func TestSessionTokenOps(t *testing.T) {
	d := fakeDaemon(t)
	ctx := context.Background()
	s, err := d.c.CreateSession(ctx, session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	defer d.c.DeleteSession(ctx, s.ID)
	a, st := mint(t, d.url, token, s.ID, map[string]any{"ops": auth.GrantableOps(), "ttl_seconds": 600})
	if a.status != 201 {
		t.Fatalf("mint: %d %s", a.status, a.body)
	}
	p := "/v1/agents/sessions/" + s.ID
	var job session.Job
	ja := as(t, d.url, st.Token, "POST", p+"/jobs", map[string]any{"command": "echo job"})
	json.Unmarshal(ja.body, &job)
	for _, tc := range []struct {
		method, path string
		body         any
		want         int
	}{
		{"GET", p, nil, 200},
		{"GET", p + "/events", nil, 200},
		{"GET", p + "/trajectory", nil, 200},
		{"GET", p + "/artifacts", nil, 200},
		{"GET", p + "/probe", nil, 200},
		{"PUT", p + "/files/content", map[string]any{"path": "/workspace/a.txt", "content_base64": base64.StdEncoding.EncodeToString([]byte("a"))}, 200},
		{"GET", p + "/files?path=/workspace", nil, 200},
		{"GET", p + "/files/range?path=/workspace/a.txt", nil, 200},
		{"POST", p + "/uploads", map[string]any{"path": "/workspace/big", "size": 3}, 201},
		{"GET", p + "/uploads", nil, 200},
		{"DELETE", p + "/files?path=/workspace/a.txt", nil, 204},
		{"GET", p + "/jobs", nil, 200},
		{"GET", p + "/jobs/" + job.ID + "?wait_ms=2000", nil, 200},
		{"POST", p + "/checkpoint", map[string]any{"tag": "by-token", "memory": false}, 200},
		{"GET", p + "/git/status", nil, 409}, // past the permission: mini has no git
		{"POST", p + "/exec/stream", map[string]any{"command": "echo s"}, 200},
		{"POST", p + "/restore", map[string]any{"tag": "by-token"}, 403},
		{"POST", p + "/fork", map[string]any{"count": 1}, 403},
	} {
		if ja.status != 201 {
			t.Fatalf("job start: %d %s", ja.status, ja.body)
		}
		if a := as(t, d.url, st.Token, tc.method, tc.path, tc.body); a.status != tc.want {
			t.Errorf("%s %s: %d %s, want %d", tc.method, tc.path, a.status, a.body, tc.want)
		}
	}
	actors := map[string]string{}
	for _, e := range entries(t, d.led, s.ID) {
		actors[e.Kind] = e.Actor
	}
	for _, k := range []string{"job.start", "file.write", "file.delete", "checkpoint", "exec"} {
		if actors[k] != "session-token:"+st.ID {
			t.Errorf("%s ledgered as %q", k, actors[k])
		}
	}
}

// TestSessionTokenLifetime: the TTL default and cap (never past the
// session), expiry, the 32-token cap, a non-running session, revocation
// by the session's delete, and a stream cut when its token is revoked.
func TestSessionTokenLifetime(t *testing.T) {
	d := fakeDaemon(t)
	ctx := context.Background()
	s, err := d.c.CreateSession(ctx, session.CreateRequest{TTLSeconds: 120})
	if err != nil {
		t.Fatal(err)
	}
	long, err := d.c.CreateSession(ctx, session.CreateRequest{TTLSeconds: 7200})
	if err != nil {
		t.Fatal(err)
	}
	defer d.c.DeleteSession(ctx, long.ID)
	// Capped at the session's expiry.
	if a, st := mint(t, d.url, token, s.ID, map[string]any{"ops": []string{"read"}, "ttl_seconds": 3600}); a.status != 201 || !st.ExpiresAt.Equal(s.ExpiresAt) {
		t.Errorf("ttl 3600 on a 120 s session: %d expires %v, session %v", a.status, st.ExpiresAt, s.ExpiresAt)
	}
	// The default is an hour.
	before := time.Now()
	if a, st := mint(t, d.url, token, long.ID, map[string]any{"ops": []string{"read"}}); a.status != 201 ||
		st.ExpiresAt.Before(before.Add(time.Hour-time.Second)) || st.ExpiresAt.After(time.Now().Add(time.Hour+time.Second)) {
		t.Errorf("default ttl: %d expires %v", a.status, st.ExpiresAt)
	}
	// Expiry.
	_, short := mint(t, d.url, token, long.ID, map[string]any{"ops": []string{"exec"}, "ttl_seconds": 1})
	sc := client.New(d.url, short.Token)
	if _, err := sc.Exec(ctx, long.ID, session.ExecRequest{Command: "true"}); err != nil {
		t.Errorf("exec before expiry: %v", err)
	}
	time.Sleep(time.Until(short.ExpiresAt) + 100*time.Millisecond)
	if _, err := sc.Exec(ctx, long.ID, session.ExecRequest{Command: "true"}); status(err) != 401 || !strings.Contains(err.Error(), "expired") {
		t.Errorf("exec after expiry: %v, want 401 saying expired", err)
	}
	ts, err := d.c.Tokens(ctx, long.ID)
	if err != nil || len(ts) != 1 {
		t.Errorf("live tokens after one expired: %v %v", ts, err)
	}
	// At most 32 live tokens.
	for len(ts) < tokens.MaxTokensPerSession {
		a, st := mint(t, d.url, token, long.ID, map[string]any{"ops": []string{"read"}})
		if a.status != 201 {
			t.Fatalf("mint %d: %d %s", len(ts), a.status, a.body)
		}
		ts = append(ts, st)
	}
	a, _ := mint(t, d.url, token, long.ID, map[string]any{"ops": []string{"read"}})
	if a.status != 409 || !strings.Contains(a.errorText(), "32 live tokens") {
		t.Errorf("token 33: %d %q", a.status, a.errorText())
	}
	if err := d.c.RevokeToken(ctx, long.ID, ts[len(ts)-1].ID); err != nil {
		t.Fatal(err)
	}
	if a, _ := mint(t, d.url, token, long.ID, map[string]any{"ops": []string{"read"}}); a.status != 201 {
		t.Errorf("mint after revoking one of 32: %d", a.status)
	}
	// A stream made with a token ends when the token is revoked.
	if err := d.c.RevokeToken(ctx, long.ID, ts[0].ID); err != nil {
		t.Fatal(err)
	}
	_, rd := mint(t, d.url, token, long.ID, map[string]any{"ops": []string{"read"}})
	req, _ := http.NewRequest("GET", d.url+"/v1/agents/sessions/"+long.ID+"/events/stream", nil)
	req.Header.Set("Authorization", "Bearer "+rd.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("events stream: %v %v", resp, err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "id: ") {
		t.Fatalf("first stream line %q %v", line, err)
	}
	if err := d.c.RevokeToken(ctx, long.ID, rd.ID); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, br); ended <- err }()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Error("the stream went on 5 s after its token was revoked")
	}
	// Deleting the session revokes its tokens; it can mint no more.
	_, sd := mint(t, d.url, token, s.ID, map[string]any{"ops": []string{"read"}})
	if _, err := client.New(d.url, sd.Token).GetSession(ctx, s.ID); err != nil {
		t.Fatalf("read before delete: %v", err)
	}
	if err := d.c.DeleteSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := client.New(d.url, sd.Token).GetSession(ctx, s.ID); status(err) != 401 {
		t.Errorf("read after the session's delete: %v, want 401", err)
	}
	if a, _ := mint(t, d.url, token, s.ID, map[string]any{"ops": []string{"read"}}); a.status != 409 {
		t.Errorf("mint on a deleted session: %d", a.status)
	}
	if ts, err := d.c.Tokens(ctx, s.ID); err != nil || len(ts) != 0 {
		t.Errorf("tokens of a deleted session: %v %v", ts, err)
	}
	var reasons []string
	for _, e := range entries(t, d.led, s.ID) {
		if e.Kind == "token.revoke" {
			var data struct{ Reason string }
			json.Unmarshal(e.Data, &data)
			reasons = append(reasons, data.Reason)
		}
	}
	if len(reasons) != 2 || reasons[0] != "session deleted" {
		t.Errorf("token.revoke reasons at delete: %v, want two (the capped token and the last one) for the session's delete", reasons)
	}
}

// TestOpenAPISecurityTable: the bearer scheme's description has a row for
// every grantable op, naming the routes the table gives it.
func TestOpenAPISecurityTable(t *testing.T) {
	doc := loadOpenAPI(t)
	desc, _ := doc.get("components/securitySchemes/bearer/description")
	text, _ := desc.(string)
	rows := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) == 4 {
			rows[strings.TrimSpace(cells[1])] = cells[2]
		}
	}
	table := api.RouteAccess()
	for _, op := range auth.GrantableOps() {
		row, ok := rows[op]
		if !ok {
			t.Errorf("openapi.yaml securitySchemes/bearer: no row for op %s", op)
			continue
		}
		for route, a := range table {
			if string(a) != op {
				continue
			}
			// The row names the route's family: the first path element
			// after the session's id ({id} for the record itself).
			rest := strings.TrimPrefix(route[strings.Index(route, " ")+1:], "/v1/agents/sessions/{id}")
			key, _, _ := strings.Cut(strings.TrimPrefix(rest, "/"), "/")
			if key == "" {
				key = "{id}"
			}
			if !strings.Contains(row, key) {
				t.Errorf("openapi.yaml securitySchemes/bearer: the %s row does not name %s", op, route)
			}
		}
	}
}
