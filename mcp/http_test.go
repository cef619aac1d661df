package mcp_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
	"paddock.dev/paddock/hostd/api/routes"
	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/daemon/daemontest"
	"paddock.dev/paddock/internal/testutil"
	"paddock.dev/paddock/mcp"
)

// bearer adds a token to every request, as an agent's MCP client
// configured with an Authorization header does.
type bearer struct {
	token string
	// session, when set, replaces the Mcp-Session-Id the client sends:
	// the attacker's move.
	session string
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	if b.session != "" {
		r.Header.Set("Mcp-Session-Id", b.session)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// connectHTTP opens an MCP session at url with token, over the official Go
// SDK's streamable HTTP client.
func connectHTTP(t *testing.T, url, token string) (*sdk.ClientSession, error) {
	t.Helper()
	tr := &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: &bearer{token: token}}, MaxRetries: -1}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "paddock-http-test", Version: "1"}, nil).Connect(t.Context(), tr, nil)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { cs.Close() })
	return cs, nil
}

func mustConnectHTTP(t *testing.T, url, token string) *sdk.ClientSession {
	t.Helper()
	cs, err := connectHTTP(t, url, token)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// post sends one raw JSON-RPC message to url and returns the status and body.
func post(t *testing.T, url, token, session string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(res.Body, 1<<16))
	return res.StatusCode, string(raw)
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// TestMCPHTTPScoping: the daemon's /mcp, over the Go SDK's streamable HTTP
// client. No token or a wrong one is 401 before any MCP work; the admin
// gets the read tools only (no --mcp-allow-write); a session token lists
// only its ops' tools and cannot reach another session; another tenant's
// session is not found; and a session id opened with one token is not
// found (404 not_found) with another (the attacker holds a valid token of
// their own).
func TestMCPHTTPScoping(t *testing.T) {
	dir := t.TempDir()
	tokA, sumA := auth.NewTenantToken()
	tokB, sumB := auth.NewTenantToken()
	tf := filepath.Join(dir, "tenants.json")
	if err := os.WriteFile(tf, []byte(`{"tenants":[{"name":"a","token_sha256":"`+sumA+`"},{"name":"b","token_sha256":"`+sumB+`"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	d := daemontest.New(t, daemontest.WithTenants(tf))
	ctx := t.Context()
	url := d.URL + "/mcp"

	if code, body := post(t, url, "", "", []byte(initialize)); code != http.StatusUnauthorized || !strings.Contains(body, `"unauthenticated"`) {
		t.Errorf("no token: %d %s", code, body)
	}
	if code, body := post(t, url, "pdk-not-a-token-0123456789abcdef", "", []byte(initialize)); code != http.StatusUnauthorized || !strings.Contains(body, `"unauthenticated"`) {
		t.Errorf("a wrong token: %d %s", code, body)
	}

	// The admin: read tools only, since the daemon was not started with
	// --mcp-allow-write.
	admin := mustConnectHTTP(t, url, d.Token)
	tools := listTools(t, admin)
	if slices.Contains(tools, "session_create") || slices.Contains(tools, "session_exec") || !slices.Contains(tools, "session_list") {
		t.Errorf("read-only /mcp lists %v", tools)
	}

	// Tenant a's session, seen through a's token and not b's.
	ca := client.New(d.URL, tokA)
	ses, err := ca.CreateSession(ctx, api.CreateRequest{Agent: "a"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := ca.CreateSession(ctx, api.CreateRequest{Agent: "a2"})
	if err != nil {
		t.Fatal(err)
	}
	a := mustConnectHTTP(t, url, tokA)
	b := mustConnectHTTP(t, url, tokB)
	mustCall(t, a, "session_get", map[string]any{"session": ses.ID}, nil)
	if e := call(t, b, "session_get", map[string]any{"session": ses.ID}, nil); !strings.HasPrefix(e, "not_found") {
		t.Errorf("another tenant's session over HTTP: %q", e)
	}

	// A session token of ses: its ops' tools, its session only.
	tok, err := ca.MintToken(ctx, ses.ID, api.TokenRequest{Ops: []string{api.OpRead, api.OpFilesRead}})
	if err != nil {
		t.Fatal(err)
	}
	st := mustConnectHTTP(t, url, tok.Token)
	got := listTools(t, st)
	want := []string{"session_approvals", "session_artifacts", "session_changesets", "session_events", "session_file_read", "session_files", "session_get", "session_probe"}
	if !slices.Equal(got, want) {
		t.Errorf("session token tools over HTTP:\n got %v\nwant %v", got, want)
	}
	var g struct{ ID string }
	mustCall(t, st, "session_get", map[string]any{}, &g)
	if g.ID != ses.ID {
		t.Errorf("session token's default session: %q, want %s", g.ID, ses.ID)
	}
	if e := call(t, st, "session_get", map[string]any{"session": other.ID}, nil); !strings.HasPrefix(e, "forbidden") {
		t.Errorf("session token reached another session: %q", e)
	}

	// The attacker: tenant b's valid token with tenant a's MCP session id.
	sid := a.ID()
	if sid == "" {
		t.Fatal("the HTTP session has no id")
	}
	list := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"session_get","arguments":{"session":"` + ses.ID + `"}}}`)
	if code, body := post(t, url, tokB, sid, list); code != http.StatusNotFound || !strings.Contains(body, `"not_found"`) || strings.Contains(body, ses.ID) {
		t.Errorf("another token with a's session id: %d %s", code, body)
	}
	// And through the SDK client, the same.
	hijack := &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: &bearer{token: tokB, session: sid}}, MaxRetries: -1}
	if cs, err := sdk.NewClient(&sdk.Implementation{Name: "attacker", Version: "1"}, nil).Connect(ctx, hijack, nil); err == nil {
		if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "session_get", Arguments: map[string]any{"session": ses.ID}}); err == nil {
			t.Error("a tool call went through on another token's session")
		}
		cs.Close()
	}
	// The owner's session still works.
	mustCall(t, a, "session_get", map[string]any{"session": ses.ID}, nil)
}

// TestMCPHTTPWrite: with --mcp-allow-write the admin's /mcp has the write
// tools and they work: create, exec, delete.
func TestMCPHTTPWrite(t *testing.T) {
	d := daemontest.New(t, daemontest.WithMCPAllowWrite())
	cs := mustConnectHTTP(t, d.URL+"/mcp", d.Token)
	tools := listTools(t, cs)
	for _, w := range []string{"session_create", "session_exec", "session_approve", "session_delete"} {
		if !slices.Contains(tools, w) {
			t.Errorf("/mcp with --mcp-allow-write lacks %s: %v", w, tools)
		}
	}
	var ses struct{ ID string }
	mustCall(t, cs, "session_create", map[string]any{}, &ses)
	var ex ExecResult
	mustCall(t, cs, "session_exec", map[string]any{"session": ses.ID, "command": "echo over-http"}, &ex)
	if ex.Stdout != "over-http\n" {
		t.Errorf("exec over HTTP: %+v", ex)
	}
	mustCall(t, cs, "session_delete", map[string]any{"session": ses.ID}, nil)
}

// TestMCPHTTPLimits: the handler's limits, each hit: a body over MaxBody
// is 413, a token's sessions past SessionsPerToken are 429 (another
// token is not affected), and an idle session is closed after
// IdleTimeout (its id is then unknown, 404) and stops counting.
func TestMCPHTTPLimits(t *testing.T) {
	d := daemontest.New(t)
	tokA, err := d.Client.MintToken(t.Context(), mustSession(t, d), api.TokenRequest{Ops: []string{api.OpRead}})
	if err != nil {
		t.Fatal(err)
	}
	h := mcp.NewHTTPHandler(mcp.HTTPOptions{
		Client:           func(token string) *client.Client { return client.New(d.URL, token) },
		MaxBody:          8 << 10,
		SessionsPerToken: 2,
		IdleTimeout:      time.Second,
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	big := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"pad":"` + strings.Repeat("x", 9<<10) + `"}}`)
	if code, body := post(t, srv.URL, d.Token, "", big); code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "too_large") {
		t.Errorf("a body over the limit: %d %s", code, body)
	}

	one := mustConnectHTTP(t, srv.URL, d.Token)
	mustConnectHTTP(t, srv.URL, d.Token)
	code, body := post(t, srv.URL, d.Token, "", []byte(initialize))
	if code != http.StatusTooManyRequests || !strings.Contains(body, "too_many_sessions") {
		t.Errorf("a third session for one token: %d %s", code, body)
	}
	var e struct{ Code string }
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Code != "too_many_sessions" {
		t.Errorf("429 body %q: %v", body, err)
	}
	// Another token has its own count.
	mustConnectHTTP(t, srv.URL, tokA.Token)

	// Idle: after the timeout the sessions are gone and new ones may open.
	time.Sleep(2500 * time.Millisecond)
	if _, err := one.ListTools(t.Context(), nil); err == nil {
		t.Error("a session idle past the timeout still answered")
	}
	mustConnectHTTP(t, srv.URL, d.Token)
	mustConnectHTTP(t, srv.URL, d.Token)
}

// TestMCPHTTPBodyLimit: the handler's body limit is the /mcp row's in
// the daemon's route table (which the gateway applies), both sized for
// the largest session_file_write; mcp cannot import the table, so this
// holds the two equal.
func TestMCPHTTPBodyLimit(t *testing.T) {
	rt, ok := routes.Lookup("POST /mcp")
	if !ok || rt.BodyLimit != mcp.DefaultHTTPMaxBody || routes.MCPBody != mcp.DefaultHTTPMaxBody {
		t.Errorf("POST /mcp row %+v (MCPBody %d), the handler's limit %d", rt, routes.MCPBody, mcp.DefaultHTTPMaxBody)
	}
	if routes.MCPWriteBytes != mcp.MaxUploadWriteBytes {
		t.Errorf("the table sizes /mcp for %d-byte writes, session_file_write takes %d", routes.MCPWriteBytes, mcp.MaxUploadWriteBytes)
	}
}

// TestMCPHTTPLargeWrite: over HTTP at the daemon's /mcp, with the
// default limits, a 3 MiB file (4 MiB as base64, more than the JSON
// limit) arrives whole, and a body one byte past the limit is 413
// too_large.
func TestMCPHTTPLargeWrite(t *testing.T) {
	d := daemontest.New(t, daemontest.WithMCPAllowWrite())
	cs := mustConnectHTTP(t, d.URL+"/mcp", d.Token)
	var ses struct{ ID string }
	mustCall(t, cs, "session_create", map[string]any{}, &ses)
	data := make([]byte, 3<<20)
	for i := range data {
		data[i] = byte(i*13 + i/509)
	}
	var w struct {
		Bytes    int
		Verified bool
	}
	mustCall(t, cs, "session_file_write", map[string]any{"session": ses.ID, "path": "/workspace/big.bin", "content_base64": base64.StdEncoding.EncodeToString(data)}, &w)
	if w.Bytes != len(data) || !w.Verified {
		t.Errorf("3 MiB write over HTTP: %+v", w)
	}
	sum := sha256.Sum256(data)
	var ex ExecResult
	mustCall(t, cs, "session_exec", map[string]any{"session": ses.ID, "command": "sha256sum /workspace/big.bin"}, &ex)
	if !strings.HasPrefix(ex.Stdout, hex.EncodeToString(sum[:])) {
		t.Errorf("the file in the sandbox: %q, want sha256 %x", ex.Stdout, sum)
	}

	pre := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"pad":"`
	post1 := `"}}`
	big := []byte(pre + strings.Repeat("x", int(mcp.DefaultHTTPMaxBody)+1-len(pre)-len(post1)) + post1)
	if code, body := post(t, d.URL+"/mcp", d.Token, "", big); code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "too_large") {
		t.Errorf("a body one byte over %d: %d %s", mcp.DefaultHTTPMaxBody, code, body)
	}
}

func mustSession(t *testing.T, d *daemontest.Daemon) string {
	t.Helper()
	s, err := d.Client.CreateSession(t.Context(), api.CreateRequest{Agent: "limits"})
	if err != nil {
		t.Fatal(err)
	}
	return s.ID
}

// TestMCPHTTPOpenNotCountedTwice: a token allowed 2 sessions opens its
// second at once after the first's answer arrives, many times over; an
// initialize's reservation is given back when its answer starts, so the
// second never finds the first counted twice (open and still opening).
func TestMCPHTTPOpenNotCountedTwice(t *testing.T) {
	d := daemontest.New(t)
	for i := range 40 {
		h := mcp.NewHTTPHandler(mcp.HTTPOptions{
			Client:           func(token string) *client.Client { return client.New(d.URL, token) },
			SessionsPerToken: 2,
		})
		srv := httptest.NewServer(h)
		for j := range 2 {
			if code, body := post(t, srv.URL, d.Token, "", []byte(initialize)); code != http.StatusOK {
				t.Fatalf("round %d, session %d of 2: %d %s", i, j+1, code, body)
			}
		}
		if code, body := post(t, srv.URL, d.Token, "", []byte(initialize)); code != http.StatusTooManyRequests {
			t.Fatalf("round %d, a third session: %d %s", i, code, body)
		}
		srv.Close()
	}
}

// TestMCPHTTPCallsPerToken: a token has at most CallsPerToken tool calls
// running at once; the next one, made while they run, is refused at once
// with too_many_calls (it does not wait for them), another token's call
// runs meanwhile, and once the calls end the token may call again.
func TestMCPHTTPCallsPerToken(t *testing.T) {
	d := daemontest.New(t)
	sid := mustSession(t, d)
	tokB, err := d.Client.MintToken(t.Context(), sid, api.TokenRequest{Ops: []string{api.OpRead, api.OpExec}})
	if err != nil {
		t.Fatal(err)
	}
	const limit = 3
	h := mcp.NewHTTPHandler(mcp.HTTPOptions{
		Client:        func(token string) *client.Client { return client.New(d.URL, token) },
		AllowWrite:    true,
		CallsPerToken: limit,
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	// Two MCP sessions of the admin token share its count.
	a1 := mustConnectHTTP(t, srv.URL, d.Token)
	a2 := mustConnectHTTP(t, srv.URL, d.Token)
	b := mustConnectHTTP(t, srv.URL, tokB.Token)

	var wg sync.WaitGroup
	slow := make([]string, limit)
	for i := range limit {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cs := a1
			if i%2 == 1 {
				cs = a2
			}
			var ex ExecResult
			sleep := map[string]any{"session": sid, "command": "touch /tmp/started-" + strconv.Itoa(i) + "; sleep 6; echo slept"}
			if e := call(t, cs, "session_exec", sleep, &ex); e != "" {
				slow[i] = e
			} else {
				slow[i] = ex.Stdout
			}
		}()
	}
	// Wait (with the admin's REST client, which the limit does not
	// count) until the three are running in the sandbox.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		r, err := d.Client.Exec(t.Context(), sid, api.ExecRequest{Command: "ls /tmp | grep -c started-"})
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(r.Stdout) == strconv.Itoa(limit) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the slow calls did not start: %q", r.Stdout)
		}
	}
	start := time.Now()
	e := call(t, a2, "session_exec", map[string]any{"session": sid, "command": "echo extra"}, nil)
	if !strings.HasPrefix(e, "too_many_calls") || time.Since(start) > 3*time.Second {
		t.Errorf("a call past the limit: %q after %s, want too_many_calls at once", e, time.Since(start))
	}
	var ex ExecResult
	if e := call(t, b, "session_exec", map[string]any{"session": sid, "command": "echo other-token"}, &ex); e != "" || ex.Stdout != "other-token\n" {
		t.Errorf("another token's call while the first is at its limit: %q %+v", e, ex)
	}
	wg.Wait()
	for i, out := range slow {
		if out != "slept\n" {
			t.Errorf("slow call %d: %q", i, out)
		}
	}
	if e := call(t, a1, "session_exec", map[string]any{"session": sid, "command": "echo again"}, &ex); e != "" || ex.Stdout != "again\n" {
		t.Errorf("a call after the others ended: %q %+v", e, ex)
	}
}

// headers adds fixed headers to every request, after bearer's.
type headers struct {
	h    http.Header
	next http.RoundTripper
}

func (x *headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range x.h {
		r.Header[k] = v
	}
	return x.next.RoundTrip(r)
}

// TestMCPHTTPPreviewURL: session_preview over the daemon's /mcp hands
// out a URL on the address the caller used (here the daemon's own
// listener), not the internal one the server's API client uses, and the
// URL opens the page served in the sandbox. Behind a proxy that says
// where the caller came in (X-Forwarded-Host and -Proto, as the gateway
// sends them) the URL is on that address; a forwarded host that is not a
// plain host is passed over for the Host header.
func TestMCPHTTPPreviewURL(t *testing.T) {
	d := daemontest.New(t, daemontest.WithMCPAllowWrite())
	sid := mustSession(t, d)
	echo, err := os.ReadFile(testutil.EchoServerBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Client.Call(t.Context(), "PUT", sid, "/files/content", nil, api.FileWrite{Path: "/tmp/echoserver",
		ContentBase64: base64.StdEncoding.EncodeToString(echo), Mode: "0755"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := d.Client.Call(t.Context(), "POST", sid, "/jobs", nil, api.JobStart{Command: "/tmp/echoserver -addr 127.0.0.1:8000"}, nil); err != nil {
		t.Fatal(err)
	}
	preview := func(cs *sdk.ClientSession) string {
		t.Helper()
		var p struct{ URL string }
		mustCall(t, cs, "session_preview", map[string]any{"session": sid, "port": 8000}, &p)
		return p.URL
	}
	u := preview(mustConnectHTTP(t, d.URL+"/mcp", d.Token))
	if !regexp.MustCompile(`^` + regexp.QuoteMeta(d.URL) + `/preview/pvw-[a-z2-7]+/$`).MatchString(u) {
		t.Fatalf("preview URL over /mcp: %q, want one on %s", u, d.URL)
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, err := hc.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && strings.Contains(string(body), "hello from the sandbox") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %d %q", u, resp.StatusCode, body)
		}
	}

	via := func(h http.Header) string {
		t.Helper()
		tr := &sdk.StreamableClientTransport{Endpoint: d.URL + "/mcp", MaxRetries: -1,
			HTTPClient: &http.Client{Transport: &headers{h: h, next: &bearer{token: d.Token}}}}
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "proxied", Version: "1"}, nil).Connect(t.Context(), tr, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return preview(cs)
	}
	if u := via(http.Header{"X-Forwarded-Host": {"paddock.example:8443"}, "X-Forwarded-Proto": {"https"}}); !strings.HasPrefix(u, "https://paddock.example:8443/preview/pvw-") {
		t.Errorf("behind a proxy: %q", u)
	}
	if u := via(http.Header{"X-Forwarded-Host": {"evil.example/path?"}, mcp.PublicBaseHeader: {"https://made.up"}}); !strings.HasPrefix(u, d.URL+"/preview/pvw-") {
		t.Errorf("a forwarded host that is not a host, and a base header of the caller's own: %q, want the Host's", u)
	}
}
