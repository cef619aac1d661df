package mcp_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/daemon/daemontest"
	"paddock.dev/paddock/mcp"
)

// tokenDaemon starts a daemon with tenants a and b and an MCP handler of
// its own in front of it (so the test can look at its token table).
func tokenDaemon(t *testing.T) (d *daemontest.Daemon, h *mcp.HTTPHandler, url, tokA, tokB string) {
	t.Helper()
	tokA, sumA := auth.NewTenantToken()
	tokB, sumB := auth.NewTenantToken()
	tf := filepath.Join(t.TempDir(), "tenants.json")
	if err := os.WriteFile(tf, []byte(`{"tenants":[{"name":"a","token_sha256":"`+sumA+`"},{"name":"b","token_sha256":"`+sumB+`"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	d = daemontest.New(t, daemontest.WithTenants(tf))
	h = mcp.NewHTTPHandler(mcp.HTTPOptions{Client: func(token string) *client.Client { return client.New(d.URL, token) }})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return d, h, srv.URL, tokA, tokB
}

// TestMCPHTTPTokenTable: one tenant minting, using and revoking more
// session tokens than the table holds does not shut another tenant out:
// the tenant's own entries are capped, and a full table gives up its
// least recently used entry with no session open. A request that opens
// no session builds nothing.
func TestMCPHTTPTokenTable(t *testing.T) {
	defer mcp.SetHTTPTokenCaps(4, 3, time.Hour)()
	d, h, url, tokA, tokB := tokenDaemon(t)
	ctx := t.Context()
	ca := client.New(d.URL, tokA)
	ses, err := ca.CreateSession(ctx, api.CreateRequest{Agent: "a"})
	if err != nil {
		t.Fatal(err)
	}
	mustConnectHTTP(t, url, d.Token) // the admin holds one entry
	for i := range 5 {
		tok, err := ca.MintToken(ctx, ses.ID, api.TokenRequest{Ops: []string{api.OpRead}})
		if err != nil {
			t.Fatal(err)
		}
		cs, err := connectHTTP(t, url, tok.Token)
		if err != nil {
			t.Fatalf("tenant a's token %d: %v", i, err)
		}
		cs.Close()
		if err := ca.RevokeToken(ctx, ses.ID, tok.ID); err != nil {
			t.Fatal(err)
		}
	}
	if n := h.Servers(); n > 4 {
		t.Errorf("the table holds %d entries, over its cap 4", n)
	}
	// Tenant b gets in: the table is full, an idle entry of a goes.
	b := mustConnectHTTP(t, url, tokB)
	listTools(t, b)
	if n := h.Servers(); n != 4 {
		t.Errorf("the table holds %d entries, want 4", n)
	}

	// A request that opens no session builds no server: a GET and a POST
	// with a made-up session id, of a token not seen before. (Room is
	// made first, so a server built would show in the count.)
	mcp.SetHTTPTokenCaps(100, 100, time.Hour)
	tok, err := ca.MintToken(ctx, ses.ID, api.TokenRequest{Ops: []string{api.OpRead}})
	if err != nil {
		t.Fatal(err)
	}
	before := h.Servers()
	mustConnectHTTP(t, url, d.Token)
	if code, body := post(t, url, tok.Token, "made-up", []byte(initialize)); code != http.StatusNotFound {
		t.Errorf("a made-up session id: %d %s", code, body)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+tok.Token)
	req.Header.Set("Accept", "text/event-stream")
	if res, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		res.Body.Close()
		if res.StatusCode < 400 || res.StatusCode >= 500 {
			t.Errorf("a GET with no session id: %d", res.StatusCode)
		}
	}
	if n := h.Servers(); n != before {
		t.Errorf("requests that open no session changed the table from %d to %d entries", before, n)
	}
}

// TestMCPHTTPSlowInitialize: an initialize whose body never finishes
// arriving does not hold up another initialize of the same token (the
// session count is checked under a short lock, not one held for the
// request).
func TestMCPHTTPSlowInitialize(t *testing.T) {
	d, _, url, _, _ := tokenDaemon(t)
	pr, pw := io.Pipe()
	defer pw.Close()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, pr)
	req.Header.Set("Authorization", "Bearer "+d.Token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	go func() {
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
		}
	}()
	if _, err := pw.Write([]byte(`{"jsonrpc":"2.0","id":1,`)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the slow request is in the handler
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		cs, err := connectHTTPCtx(ctx, url, d.Token)
		if err == nil {
			cs.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("a second initialize of the token: %v", err)
		}
	case <-time.After(6 * time.Second):
		t.Fatal("a second initialize of the token waited on the first, slow one")
	}
}

// TestMCPHTTPRevoked: a revoked token's next request is 401 and its
// entry and sessions are gone; and an open GET stream of a revoked
// token ends within the recheck period, with no request of the token.
func TestMCPHTTPRevoked(t *testing.T) {
	defer mcp.SetHTTPTokenCaps(4096, 256, 300*time.Millisecond)()
	d, h, url, tokA, _ := tokenDaemon(t)
	ctx := t.Context()
	ca := client.New(d.URL, tokA)
	ses, err := ca.CreateSession(ctx, api.CreateRequest{Agent: "a"})
	if err != nil {
		t.Fatal(err)
	}

	// On the next request.
	tok, err := ca.MintToken(ctx, ses.ID, api.TokenRequest{Ops: []string{api.OpRead}})
	if err != nil {
		t.Fatal(err)
	}
	cs := mustConnectHTTP(t, url, tok.Token)
	if h.Servers() != 1 {
		t.Fatalf("entries: %d, want 1", h.Servers())
	}
	if err := ca.RevokeToken(ctx, ses.ID, tok.ID); err != nil {
		t.Fatal(err)
	}
	list := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}`)
	if code, body := post(t, url, tok.Token, cs.ID(), list); code != http.StatusUnauthorized || !strings.Contains(body, `"unauthenticated"`) {
		t.Errorf("a revoked token's request: %d %s", code, body)
	}
	if n := h.Servers(); n != 0 {
		t.Errorf("a revoked token still has an entry (%d)", n)
	}

	// An open GET stream, with no request after the revocation.
	tok2, err := ca.MintToken(ctx, ses.ID, api.TokenRequest{Ops: []string{api.OpRead}})
	if err != nil {
		t.Fatal(err)
	}
	sid := rawInitialize(t, url, tok2.Token)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+tok2.Token)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %d", res.StatusCode)
	}
	if err := ca.RevokeToken(ctx, ses.ID, tok2.ID); err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	go func() {
		io.Copy(io.Discard, res.Body)
		close(ended)
	}()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("a revoked token's GET stream is still open 5s after the revocation")
	}
	if n := h.Servers(); n != 0 {
		t.Errorf("a revoked token still has an entry (%d)", n)
	}
}

// rawInitialize opens an MCP session with a plain POST and returns its id.
func rawInitialize(t *testing.T, url, token string) string {
	t.Helper()
	send := func(session string, body string) *http.Response {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader([]byte(body)))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, io.LimitReader(res.Body, 1<<16))
		res.Body.Close()
		return res
	}
	res := send("", initialize)
	sid := res.Header.Get("Mcp-Session-Id")
	if res.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d, session %q", res.StatusCode, sid)
	}
	send(sid, `{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`)
	return sid
}

// connectHTTPCtx is connectHTTP under ctx, leaving the closing to the
// caller (it may run on another goroutine than the test's).
func connectHTTPCtx(ctx context.Context, url, token string) (*sdk.ClientSession, error) {
	tr := &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: &bearer{token: token}}, MaxRetries: -1}
	return sdk.NewClient(&sdk.Implementation{Name: "paddock-http-test", Version: "1"}, nil).Connect(ctx, tr, nil)
}
