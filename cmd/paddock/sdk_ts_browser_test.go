package main

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"paddock.dev/paddock/internal/testutil/browser"
)

// tsBrowserPage is the test page: it imports the built SDK as an ES
// module from its own origin and, against the daemon's gateway on
// another origin (CORS), creates a session, execs, streams an exec,
// writes and reads a file and deletes the session, then has a command held
// for approval in another; window.__result is what happened, as JSON.
const tsBrowserPage = `<!doctype html>
<meta charset="utf-8">
<title>paddock sdk in a browser</title>
<script type="module">
import { Paddock, ApprovalRequired } from "/sdk/index.js";
const out = { ua: navigator.userAgent };
try {
  const pd = new Paddock({ url: %s, token: %s });
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

// tsBrowserUnlistedPage is a page on an origin the gateway does not list:
// its call to the API must fail in the browser with fetch's TypeError.
const tsBrowserUnlistedPage = `<!doctype html>
<meta charset="utf-8">
<script type="module">
import { Paddock } from "/sdk/index.js";
const out = {};
try {
  const who = await new Paddock({ url: %s, token: %s }).whoami();
  out.answered = JSON.stringify(who);
} catch (e) {
  out.typeError = e instanceof TypeError;
  out.error = String(e);
}
window.__result = JSON.stringify(out);
</script>
`

// TestTSSDKBrowser runs the built TypeScript SDK in a real headless
// Chromium against a real `paddock serve` (procbox), called directly
// through its gateway with TLS from a page on another origin: a loopback
// server serves the page and the SDK's ESM files, and serve runs with
// --cors-origin set to that server's origin. (Chromium accepts the
// gateway's certificate by its public key, as a browser that trusts the
// gateway's CA would.) The page creates a session, execs, reads a
// streamed exec to its exit code, writes and reads a file, and deletes the
// session, then gets ApprovalRequired (with its approval id) for a held
// command; the test checks each result, that the browser's fetch made the
// calls from the page's origin (the gateway's access log), and that the
// daemon shows the session deleted. A second page, served on another
// loopback port that is not listed, gets fetch's TypeError for its call,
// and only its preflight ever reaches the gateway.
func TestTSSDKBrowser(t *testing.T) {
	tsSetup(t)
	bin, state, addr, env := daemonSetup(t)
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
	dist, err := filepath.Abs(filepath.Join(tsSDKDir, "dist"))
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := json.Marshal(token)
	api, _ := json.Marshal(apiURL)
	// pageServer serves page at / and the SDK under /sdk/, on a loopback
	// port of its own: an origin of its own.
	pageServer := func(page string) *httptest.Server {
		mux := http.NewServeMux()
		mux.Handle("/sdk/", http.StripPrefix("/sdk/", http.FileServer(http.Dir(dist))))
		mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, page)
		})
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		return srv
	}
	web := pageServer(fmt.Sprintf(tsBrowserPage, api, tok))
	other := pageServer(fmt.Sprintf(tsBrowserUnlistedPage, api, tok))

	srv := startServe(t, bin, state, addr, env, "--stop-sandboxes", "--cors-origin", web.URL)
	defer stopServe(t, srv)

	// The gateway's certificates (leaf and intermediate), for Chromium to
	// accept by their public keys.
	pem, err := os.ReadFile(gatewayRoot(state))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatal("the gateway's root does not parse")
	}
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	// --ignore-certificate-errors-spki-list names a certificate by the
	// base64 SHA-256 of its public key (taken with a profile of its own,
	// which browser.New gives).
	var spki []string
	for _, c := range conn.ConnectionState().PeerCertificates {
		sum := sha256.Sum256(c.RawSubjectPublicKeyInfo)
		spki = append(spki, base64.StdEncoding.EncodeToString(sum[:]))
	}
	conn.Close()

	ctx := browser.New(t, browser.Options{Timeout: 3 * time.Minute, Flags: map[string]any{
		"ignore-certificate-errors-spki-list": strings.Join(spki, ","),
	}})

	// The unlisted origin first: the browser blocks its call.
	if err := chromedp.Do(ctx, chromedp.Navigate(other.URL+"/")); err != nil {
		t.Fatal(err)
	}
	raw, err := chromedp.Run(ctx, chromedp.Poll[string]("window.__result", chromedp.WithPollingTimeout(60*time.Second)))
	if err != nil {
		t.Fatalf("the unlisted page did not finish: %v\nserve logs:\n%s", err, serveLogs(srv))
	}
	var blocked struct {
		Answered  string `json:"answered"`
		TypeError bool   `json:"typeError"`
		Error     string `json:"error"`
	}
	if err := json.Unmarshal([]byte(raw), &blocked); err != nil {
		t.Fatalf("window.__result %q: %v", raw, err)
	}
	if blocked.Answered != "" || !blocked.TypeError {
		t.Errorf("a page on the unlisted origin %s: %s, want fetch's TypeError", other.URL, raw)
	}
	if pre, calls := accessLogFrom(serveLogs(srv), other.URL); pre == 0 || calls != 0 {
		t.Errorf("from the unlisted origin the gateway saw %d preflights and %d calls with a token, want some and none", pre, calls)
	}

	if err := chromedp.Do(ctx, chromedp.Navigate(web.URL+"/")); err != nil {
		t.Fatal(err)
	}
	raw, err = chromedp.Run(ctx, chromedp.Poll[string]("window.__result", chromedp.WithPollingTimeout(150*time.Second)))
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
	if pre, calls := accessLogFrom(serveLogs(srv), web.URL); pre == 0 || calls < 6 {
		t.Errorf("from the page's origin the gateway saw %d preflights and %d calls of the browser's fetch, want some and at least 6", pre, calls)
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

// accessLogFrom counts the lines of the gateway's access log (JSON, in
// serve's stderr) for requests a browser's fetch sent from origin: the
// preflights (OPTIONS, no token) and the calls that carried a token.
func accessLogFrom(logs, origin string) (preflights, calls int) {
	for _, line := range strings.Split(logs, "\n") {
		var e struct {
			Request struct {
				Method  string              `json:"method"`
				Headers map[string][]string `json:"headers"`
			} `json:"request"`
		}
		if json.Unmarshal([]byte(line), &e) != nil || e.Request.Method == "" {
			continue
		}
		h := e.Request.Headers
		if len(h["Origin"]) != 1 || h["Origin"][0] != origin || len(h["Sec-Fetch-Mode"]) != 1 || h["Sec-Fetch-Mode"][0] != "cors" {
			continue
		}
		switch {
		case e.Request.Method == http.MethodOptions && len(h["Authorization"]) == 0:
			preflights++
		case len(h["Authorization"]) == 1:
			calls++
		}
	}
	return preflights, calls
}
