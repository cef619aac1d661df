package console_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"paddock.dev/paddock/api"
	"paddock.dev/paddock/console"
)

// TestSignInListsSessions: the admin signs in through the real gateway and
// sees the session made through the SDK in the sessions table, with its
// state and backend; then, without a reload, a new session with a held
// command (its pending approval counted) comes and a deleted one goes.
func TestSignInListsSessions(t *testing.T) {
	ctx, d, _ := startConsole(t)
	s, err := d.Client.CreateSession(context.Background(), api.CreateRequest{Agent: "listed", TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	signIn(t, ctx, d.Token)
	row := waitText(t, ctx, `#sessions-body tr[data-id="`+s.ID+`"]`, s.ID)
	for _, want := range []string{"listed", "running", s.Backend} {
		if !strings.Contains(row, want) {
			t.Errorf("the session's row %q lacks %q", row, want)
		}
	}
	shot(t, ctx, "sessions")

	// Live: a session made and one held command appear without a reload
	// (the page polls), and a deleted session goes.
	held, err := d.Client.CreateSession(context.Background(), api.CreateRequest{Agent: "asker", TTLSeconds: 600,
		Policy: &api.PolicyRequest{Process: &api.ProcessRules{Ask: []string{"echo held*"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Client.Exec(context.Background(), held.ID, api.ExecRequest{Command: "echo held"}); err == nil {
		t.Fatal("a command under an ask rule ran without approval")
	}
	waitText(t, ctx, `#sessions-body tr[data-id="`+held.ID+`"] td[data-pending="1"]`, "1")
	if err := d.Client.DeleteSession(context.Background(), s.ID); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#sessions-body tr[data-id="`+s.ID+`"]').length`))
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a deleted session stays in the list")
		}
	}
}

// TestConsoleThroughGateway: through the real gateway the console's files
// are public and every answer (a file, the redirect, a 404, a 405)
// carries the console's CSP and safety headers. The public route opens
// nothing else: paths that climb from /console/ into the API, or from
// the API into /console/, with a forged identity header, never list a
// session without a token.
func TestConsoleThroughGateway(t *testing.T) {
	_, d, base := startConsole(t)
	s, err := d.Client.CreateSession(context.Background(), api.CreateRequest{Agent: "hidden", TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	hc := gatewayClient(t)
	do := func(method, rawPath string, hdr map[string]string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.URL.Opaque = rawPath // sent as written, not cleaned by the client
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, rawPath, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp, string(b)
	}
	for _, c := range []struct {
		method, path string
		status       int
		has          string
	}{
		{"GET", "/console/", 200, `<script type="module" src="app.js">`},
		{"GET", "/console/app.js", 200, "hashchange"},
		{"GET", "/console/api.js", 200, "Authorization"},
		{"HEAD", "/console/style.css", 200, ""},
		{"GET", "/console", 301, ""},
		{"GET", "/console/missing.js", 404, ""},
		{"POST", "/console/", 405, ""},
	} {
		resp, body := do(c.method, c.path, nil)
		if resp.StatusCode != c.status || !strings.Contains(body, c.has) {
			t.Errorf("%s %s: %d %.80q, want %d with %q", c.method, c.path, resp.StatusCode, body, c.status, c.has)
		}
		if got := resp.Header.Get("Content-Security-Policy"); got != console.CSP {
			t.Errorf("%s %s: CSP %q", c.method, c.path, got)
		}
		for k, want := range map[string]string{"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"} {
			if resp.Header.Get(k) != want {
				t.Errorf("%s %s: %s %q", c.method, c.path, k, resp.Header.Get(k))
			}
		}
		if resp.Header.Get("Set-Cookie") != "" || resp.Header.Get("Server") != "" {
			t.Errorf("%s %s: Set-Cookie %q Server %q", c.method, c.path, resp.Header.Get("Set-Cookie"), resp.Header.Get("Server"))
		}
	}
	forged := map[string]string{"Paddock-Identity": "admin", "X-Forwarded-User": "admin"}
	for _, p := range []string{
		"/console/../v1/agents/sessions",
		"/console/%2e%2e/v1/agents/sessions",
		"/console/..%2fv1%2fagents%2fsessions",
		"/console/%2e%2e%2fv1%2fagents%2fsessions",
		"/v1/agents/sessions/../../console/",
		"/v1/agents/sessions/%2e%2e/%2e%2e/console/",
		"/console//v1/agents/sessions",
		"/console/./../v1/agents/sessions/" + s.ID,
	} {
		resp, body := do("GET", p, forged)
		if resp.StatusCode == 200 && (strings.Contains(body, s.ID) || strings.Contains(body, "hidden")) || strings.Contains(body, s.ID) {
			t.Errorf("GET %s without a token: %d %.200q", p, resp.StatusCode, body)
		}
	}
	// The API itself still asks for a token (so the check above can fail
	// only through the console's route).
	if resp, _ := do("GET", "/v1/agents/sessions", forged); resp.StatusCode != 401 {
		t.Errorf("the API without a token: %d", resp.StatusCode)
	}
	if resp, body := do("GET", "/v1/agents/sessions", map[string]string{"Authorization": "Bearer " + d.Token}); resp.StatusCode != 200 || !strings.Contains(body, s.ID) {
		t.Errorf("the API with the token: %d", resp.StatusCode)
	}
}
