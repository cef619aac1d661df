package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/tokens"
)

// TestAttackTokenInQueryNotLogged sends tokens where the API never reads
// them, through a real `paddock serve` and its gateway: a tenant token as
// ?token=, the admin token as ?access_token=, a session token in a
// parameter with a neutral name and again percent-encoded, credentials as
// api_key and Password beside a real query, a session token as a path
// segment (hostd answers 404 and logs the path), a Referer carrying
// ?token=, an X-Api-Key header, and ?token= on a body the gateway refuses
// itself (413). Every one is refused or ignored, and none may reach the
// daemon's output, where the gateway's access log, Caddy's own log and
// hostd's log all go. The lines for those requests must be there, with
// the values REDACTED, or the check would prove nothing.
func TestAttackTokenInQueryNotLogged(t *testing.T) {
	bin, state, addr, env := daemonSetup(t)
	tenants := filepath.Join(t.TempDir(), "tenants.json")
	out, se, code := runCLI(t, bin, env, nil, "tenant", "add", "acme", "--tenants", tenants)
	if code != 0 {
		t.Fatalf("tenant add: %d %s", code, se)
	}
	tenantToken := strings.TrimSpace(out)
	srv := startServe(t, bin, state, addr, env, "--stop-sandboxes", "--tenants", tenants)
	defer stopServe(t, srv)
	const admin = "pdk_cli_test_token_0123456789"
	base := "https://" + addr
	ctx := context.Background()
	sdk := daemonSDK(t, state, addr, admin)
	s, err := sdk.CreateSession(ctx, session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var minted tokens.SessionToken
	if err := sdk.Call(ctx, "POST", s.ID, "/tokens", nil, tokens.TokenRequest{Ops: []string{"read"}}, &minted); err != nil {
		t.Fatal(err)
	}
	const (
		apiKey   = "SECRET-API-KEY-7d41"
		password = "SECRET-PASSWORD-2b90"
		referer  = "SECRET-REFERER-5c13"
		header   = "SECRET-HEADER-e802"
		big      = "SECRET-413-9af6"
	)
	encoded := strings.Replace(minted.Token, "pdk_", "pdk%5F", 1)
	for _, c := range []struct {
		name, method, path, bearer string
		hdr                        http.Header
		body                       []byte
		status                     int
	}{
		{"tenant token as ?token=", "GET", "/v1/agents/sessions?token=" + tenantToken, "", nil, nil, 401},
		{"admin token as ?access_token=", "GET", "/v1/whoami?access_token=" + admin, "", nil, nil, 401},
		{"session token in ?q=", "GET", "/v1/agents/sessions/" + s.ID + "?q=" + minted.Token, "", nil, nil, 401},
		{"session token percent-encoded", "GET", "/v1/agents/sessions/" + s.ID + "?q=" + encoded, "", nil, nil, 401},
		{"api_key and Password beside a real query", "GET", "/v1/agents/sessions/" + s.ID + "/files?path=%2Fworkspace&api_key=" + apiKey + "&Password=" + password, admin, nil, nil, 200},
		{"session token as a path segment", "GET", "/v1/agents/sessions/" + minted.Token, admin, nil, nil, 404},
		{"Referer with ?token=", "GET", "/v1/whoami", admin, http.Header{"Referer": {"https://app.example/x?token=" + referer}}, nil, 200},
		{"X-Api-Key header", "GET", "/v1/whoami", admin, http.Header{"X-Api-Key": {header}}, nil, 200},
		{"?token= on a body the gateway refuses", "POST", "/v1/agents/sessions?token=" + big, admin, nil, bytes.Repeat([]byte("x"), 10<<20), 413},
	} {
		var body io.Reader
		if c.body != nil {
			body = bytes.NewReader(c.body)
		}
		resp, b := gatewayCall(t, state, c.method, base+c.path, c.bearer, body, c.hdr)
		if resp.StatusCode != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, resp.StatusCode, b, c.status)
		}
	}
	secrets := map[string]string{"tenant token": tenantToken, "admin token": admin, "session token": minted.Token,
		"encoded session token": encoded, "api_key": apiKey, "Password": password, "Referer's token": referer,
		"X-Api-Key": header, "413's token": big}
	// The tokens' secret halves too: a redaction that kept a tail would
	// still hand most of a token out.
	for _, tok := range []string{tenantToken, minted.Token} {
		secrets["the tail of "+tok[:12]] = tok[len(tok)-24:]
	}
	wants := []string{"token=REDACTED", "access_token=REDACTED", "api_key=REDACTED", "Password=REDACTED", "q=pdk_REDACTED",
		"path=%2Fworkspace", "/v1/agents/sessions/pdk_REDACTED", "path=/v1/agents/sessions/pdk_[redacted]",
		"app.example/x?token=REDACTED", `"status":413`}
	var logs string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		// Each line is written once its answer is: wait for all of them.
		logs = serveLogs(srv)
		missing := 0
		for _, w := range wants {
			if !strings.Contains(logs, w) {
				missing++
			}
		}
		if missing == 0 || time.Now().After(deadline) {
			break
		}
	}
	for name, secret := range secrets {
		if strings.Contains(logs, secret) || strings.Contains(logs, url.QueryEscape(secret)) {
			t.Errorf("the %s is in the daemon's logs", name)
		}
	}
	for _, w := range wants {
		if !strings.Contains(logs, w) {
			t.Errorf("the daemon's logs lack %q, so the redaction is not shown to have run", w)
		}
	}
	if t.Failed() {
		t.Logf("the daemon's logs:\n%s", logs)
	}
}
