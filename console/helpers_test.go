package console_test

// Shared helpers of the console's browser tests (C1 owns this file; the
// panel's and the terminal's tests use it too).
//
// startConsole runs a real daemon (daemontest: procbox sandboxes unless
// told otherwise) behind the real gateway (Caddy with its internal CA, TLS)
// and a real headless Chromium. Chromium is told to accept certificates
// whose public key is one of this gateway's (the leaf certificates and the
// internal CA's intermediate, each first verified in Go against the test
// CA's root): --ignore-certificate-errors-spki-list, so no other bad
// certificate is accepted and nothing is installed in a trust store.

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"paddock.dev/paddock/gateway"
	"paddock.dev/paddock/gateway/caddyfile"
	"paddock.dev/paddock/hostd/daemon/daemontest"
	"paddock.dev/paddock/internal/testutil/browser"
)

// consoleOptions are what startConsole's options change.
type consoleOptions struct {
	daemon        []daemontest.Option
	width, height int
	timeout       time.Duration
}

// option changes one part of startConsole.
type option func(*consoleOptions)

// withDaemon passes options to the test daemon (a fake backend, tenants…).
func withDaemon(o ...daemontest.Option) option {
	return func(c *consoleOptions) { c.daemon = append(c.daemon, o...) }
}

// withWindow sets the browser window's size (default 1280×900).
func withWindow(w, h int) option { return func(c *consoleOptions) { c.width, c.height = w, h } }

// withTimeout bounds the whole test's use of the browser (default 3 min).
func withTimeout(d time.Duration) option { return func(c *consoleOptions) { c.timeout = d } }

// running is the gateway of the test that runs now (Caddy runs one per
// process, so console tests never run in parallel).
var running struct {
	sync.Mutex
	base   string
	client *http.Client
}

// consoleBase is the running gateway's https://localhost:PORT.
func consoleBase(t *testing.T) string {
	t.Helper()
	running.Lock()
	defer running.Unlock()
	if running.base == "" {
		t.Fatal("no console running: call startConsole first")
	}
	return running.base
}

// gatewayClient is an HTTP client that trusts the running gateway's CA.
func gatewayClient(t *testing.T) *http.Client {
	t.Helper()
	consoleBase(t)
	running.Lock()
	defer running.Unlock()
	return running.client
}

// startConsole starts a daemon, the gateway in front of it, and a
// browser, and returns the browser's context, the daemon and the
// gateway's base URL (https://localhost:PORT). All stop when t ends.
func startConsole(t *testing.T, opts ...option) (context.Context, *daemontest.Daemon, string) {
	t.Helper()
	o := consoleOptions{timeout: 3 * time.Minute}
	for _, f := range opts {
		f(&o)
	}
	d := daemontest.New(t, append([]daemontest.Option{daemontest.WithSocket()}, o.daemon...)...)
	base, client, spki := startGateway(t, d.Socket)
	ctx := browser.New(t, browser.Options{Width: o.width, Height: o.height, Timeout: o.timeout, Flags: map[string]any{
		"ignore-certificate-errors-spki-list": strings.Join(spki, ","),
	}})
	running.Lock()
	running.base, running.client = base, client
	running.Unlock()
	t.Cleanup(func() {
		running.Lock()
		running.base, running.client = "", nil
		running.Unlock()
	})
	return ctx, d, base
}

// startGateway runs the shipped local gateway in front of hostd's socket
// and returns its base URL, a client trusting its CA, and the SPKI hashes
// (base64 SHA-256) of the certificates it presents.
func startGateway(t *testing.T, socket string) (string, *http.Client, []string) {
	t.Helper()
	// Not t.TempDir: Caddy may still write a certificate as it stops.
	dir, err := os.MkdirTemp("", "pdkcon")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for i := 0; i < 40 && os.RemoveAll(dir) != nil; i++ {
			time.Sleep(50 * time.Millisecond)
		}
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	g, err := gateway.Start(gateway.Config{Options: caddyfile.Options{
		Listen: addr, HostdSocket: socket, StorageDir: filepath.Join(dir, "caddy"),
		AccessLog: filepath.Join(dir, "access.log"), Log: filepath.Join(dir, "caddy.log"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Stop() })
	pem, err := os.ReadFile(g.RootCertPath())
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatal("the gateway's root.crt holds no certificate")
	}
	seen := map[string]bool{}
	var spki []string
	for _, name := range []string{"localhost", "127.0.0.1"} {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, &tls.Config{RootCAs: roots, ServerName: name})
		if err != nil {
			t.Fatalf("TLS to the gateway as %s: %v", name, err)
		}
		for _, c := range conn.ConnectionState().PeerCertificates {
			sum := sha256.Sum256(c.RawSubjectPublicKeyInfo)
			if h := base64.StdEncoding.EncodeToString(sum[:]); !seen[h] {
				seen[h] = true
				spki = append(spki, h)
			}
		}
		conn.Close()
	}
	_, port, _ := net.SplitHostPort(addr)
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return "https://localhost:" + port, client, spki
}

// signIn opens the console's sign-in page, pastes tok and waits until the
// page says who it is signed in as.
func signIn(t *testing.T, ctx context.Context, tok string) {
	t.Helper()
	base := consoleBase(t)
	err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/console/#/signin"),
		chromedp.Evaluate[chromedp.Void](`sessionStorage.clear()`),
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS(`#signin-form input[name=token]`)),
		chromedp.SendKeys(chromedp.CSS(`#signin-form input[name=token]`), tok),
		chromedp.Click(chromedp.CSS(`#signin-form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#who`)),
	)
	if err != nil {
		t.Fatalf("sign in: %v", err)
	}
}

// shot takes a screenshot of the page. With PADDOCK_SCREENSHOTS=1 (make
// screenshots) it is written to docs/console/NAME.png for docs/console.md;
// otherwise the test only checks that one can be taken.
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if len(png) < 8 || string(png[1:4]) != "PNG" {
		t.Fatalf("screenshot %s: not a PNG (%d bytes)", name, len(png))
	}
	if os.Getenv("PADDOCK_SCREENSHOTS") != "1" {
		return
	}
	dir := filepath.Join("..", "docs", "console")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitText waits until the element sel's text contains want, and returns
// the text.
func waitText(t *testing.T, ctx context.Context, sel, want string) string {
	t.Helper()
	var got string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		got, _ = chromedp.Run(ctx, chromedp.Evaluate[string](`(document.querySelector(`+jsString(sel)+`) || {}).textContent || ""`))
		if strings.Contains(got, want) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never held %q; it holds %q", sel, want, got)
		}
	}
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// pageErrors collects, from now until the test ends, the page's console
// errors and uncaught exceptions, but not failed network loads (a 401 or
// 404 the page handles is logged by the browser as one). A CSP violation
// is such an error. Call the returned func to read what came so far.
func pageErrors(t *testing.T, ctx context.Context) func() []string {
	t.Helper()
	var mu sync.Mutex
	var msgs []string
	seq := chromedp.Console(ctx)
	go func() {
		for m, err := range seq {
			if err != nil {
				return
			}
			if (m.Type == chromedp.ConsoleError || m.IsException()) && m.Source != "network" {
				mu.Lock()
				msgs = append(msgs, m.String())
				mu.Unlock()
			}
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), msgs...)
	}
}

// setValue sets a form control's value as typing would (an input event
// follows), for long texts SendKeys would type slowly.
func setValue(t *testing.T, ctx context.Context, sel, v string) {
	t.Helper()
	js := `(() => { const el = document.querySelector(` + jsString(sel) + `); if (!el) return false;
		el.value = ` + jsString(v) + `; el.dispatchEvent(new Event('input', {bubbles: true})); return true; })()`
	ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
	if err != nil || !ok {
		t.Fatalf("set %s: %v (found %v)", sel, err, ok)
	}
}

// goTo opens a console page by its hash route (#/create…).
func goTo(t *testing.T, ctx context.Context, route string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(consoleBase(t)+"/console/"+route)); err != nil {
		t.Fatal(err)
	}
}
