package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"paddock.dev/paddock/internal/testutil/browser"
)

// tsBrowserPage is the test page: it imports the built SDK as an ES
// module and, against the daemon at its own origin, creates a session,
// execs, streams an exec, writes and reads a file and deletes the session,
// then has a command held for approval in another; window.__result is
// what happened, as JSON.
const tsBrowserPage = `<!doctype html>
<meta charset="utf-8">
<title>paddock sdk in a browser</title>
<script type="module">
import { Paddock, ApprovalRequired } from "/sdk/index.js";
const out = { ua: navigator.userAgent };
try {
  const pd = new Paddock({ url: location.origin, token: %s });
  const s = await pd.createSession({ ttl_seconds: 600 });
  out.id = s.id;
  const r = await s.exec("echo hello from $((6 * 7))");
  out.exec = { exitCode: r.exitCode, stdout: r.stdout };
  const pieces = [];
  let exit = null;
  for await (const ev of s.execStream("for i in 1 2 3; do echo line$i; sleep 0.2; done; exit 3")) {
    if (ev.type === "output") pieces.push(ev.text);
    if (ev.type === "exit") exit = ev.exitCode;
  }
  out.stream = { text: pieces.join(""), exit };
  await s.writeFile("/workspace/b.txt", "from the browser\n");
  out.file = await s.readText("/workspace/b.txt");
  await s.delete();
  out.deleted = true;
  const held = await pd.createSession({ policy: { process: { ask: ["touch *"] } } });
  try {
    await held.exec("touch /workspace/x");
    out.approval = "not held";
  } catch (e) {
    out.approval = e instanceof ApprovalRequired ? e.approvalId : "not ApprovalRequired: " + String(e);
  }
  await held.delete();
} catch (e) {
  out.error = String((e && e.stack) || e);
}
window.__result = JSON.stringify(out);
</script>
`

// TestTSSDKBrowser runs the built TypeScript SDK in a real headless
// Chromium against a real `paddock serve` (procbox) through its gateway
// with TLS: a loopback server serves the page and the SDK's ESM files and
// passes /v1/ on to the gateway, so the page and the API share an origin.
// (The gateway does not answer CORS: a page on another origin gets 401 for
// its preflight, so cross-origin pages cannot use the API; see
// docs/STATUS.md.) The page creates a session, execs, reads a streamed
// exec to its exit code, writes and reads a file, and deletes the session,
// then gets ApprovalRequired (with its approval id) for a held command;
// the test checks each result, that the browser's fetch made the calls,
// and that the daemon shows the session deleted.
func TestTSSDKBrowser(t *testing.T) {
	tsSetup(t)
	bin, state, addr, env := daemonSetup(t)
	srv := startServe(t, bin, state, addr, env, "--stop-sandboxes")
	defer stopServe(t, srv)
	var apiURL, token string
	for _, e := range env[len(os.Environ()):] {
		if v, ok := strings.CutPrefix(e, "PADDOCK_URL="); ok {
			apiURL = v
		}
		if v, ok := strings.CutPrefix(e, "PADDOCK_TOKEN="); ok {
			token = v
		}
	}
	if apiURL == "" || token == "" {
		t.Fatalf("daemonSetup set no PADDOCK_URL or PADDOCK_TOKEN: %v", env[len(os.Environ()):])
	}
	target, err := url.Parse(apiURL)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(gatewayRoot(state))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatal("the gateway's root does not parse")
	}
	var fromBrowser atomic.Int32
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
		},
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}},
	}
	dist, err := filepath.Abs(filepath.Join(tsSDKDir, "dist"))
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := json.Marshal(token)
	page := fmt.Sprintf(tsBrowserPage, tok)
	mux := http.NewServeMux()
	mux.Handle("/sdk/", http.StripPrefix("/sdk/", http.FileServer(http.Dir(dist))))
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		// Fetch metadata headers are sent by a browser's fetch only.
		if r.Header.Get("Sec-Fetch-Mode") == "cors" && r.Header.Get("Authorization") != "" {
			fromBrowser.Add(1)
		}
		proxy.ServeHTTP(w, r)
	})
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, page)
	})
	web := httptest.NewServer(mux)
	t.Cleanup(web.Close)

	ctx := browser.New(t, browser.Options{Timeout: 3 * time.Minute})
	if err := chromedp.Do(ctx, chromedp.Navigate(web.URL+"/")); err != nil {
		t.Fatal(err)
	}
	raw, err := chromedp.Run(ctx, chromedp.Poll[string]("window.__result", chromedp.WithPollingTimeout(150*time.Second)))
	if err != nil {
		t.Fatalf("the page did not finish: %v\nserve logs:\n%s", err, serveLogs(srv))
	}
	var res struct {
		UA    string `json:"ua"`
		ID    string `json:"id"`
		Error string `json:"error"`
		Exec  struct {
			ExitCode int    `json:"exitCode"`
			Stdout   string `json:"stdout"`
		} `json:"exec"`
		Stream struct {
			Text string `json:"text"`
			Exit *int   `json:"exit"`
		} `json:"stream"`
		File     string `json:"file"`
		Deleted  bool   `json:"deleted"`
		Approval string `json:"approval"`
	}
	if err := json.Unmarshal([]byte(raw), &res); err != nil {
		t.Fatalf("window.__result %q: %v", raw, err)
	}
	if res.Error != "" {
		t.Fatalf("the SDK failed in the browser: %s\n(result so far: %s)", res.Error, raw)
	}
	if !strings.Contains(res.UA, "HeadlessChrome") {
		t.Errorf("user agent %q: not headless Chromium", res.UA)
	}
	if res.Exec.ExitCode != 0 || res.Exec.Stdout != "hello from 42\n" {
		t.Errorf("exec: %+v, want exit 0 and %q", res.Exec, "hello from 42\n")
	}
	if res.Stream.Text != "line1\nline2\nline3\n" || res.Stream.Exit == nil || *res.Stream.Exit != 3 {
		t.Errorf("execStream: %q exit %v, want three lines and exit 3", res.Stream.Text, res.Stream.Exit)
	}
	if res.File != "from the browser\n" {
		t.Errorf("file read back: %q", res.File)
	}
	if !res.Deleted {
		t.Errorf("delete did not finish: %s", raw)
	}
	if !strings.HasPrefix(res.Approval, "apr-") {
		t.Errorf("a held command: %q, want ApprovalRequired with its approval id", res.Approval)
	}
	if n := fromBrowser.Load(); n < 6 {
		t.Errorf("%d API calls came from the browser's fetch, want at least 6", n)
	}
	// The daemon shows the session deleted.
	req, _ := http.NewRequest("GET", apiURL+"/v1/agents/sessions/"+url.PathEscape(res.ID), nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := daemonHTTPClient(state).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var info struct {
		State string `json:"state"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil || info.State != "deleted" {
		t.Errorf("session %s after the page: %d state %q (%v), want deleted", res.ID, resp.StatusCode, info.State, err)
	}
}
