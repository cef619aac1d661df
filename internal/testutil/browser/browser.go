// Package browser starts a real headless Chromium (Debian's chromium,
// installed by scripts/install-deps.sh) for the tests that drive a page:
// the web console's and the TypeScript SDK's browser run. It uses
// chromedp over the DevTools protocol; there is no fake browser.
//
// Chromium runs with a fresh profile in the test's temporary directory and
// with its background networking off: the machines this runs on have no
// way out, and a browser that tries one at every start is slow and noisy.
package browser

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Path is where Debian's chromium package puts the browser. PADDOCK_CHROMIUM
// overrides it.
const Path = "/usr/bin/chromium"

// Executable returns the browser to run: PADDOCK_CHROMIUM, else Path. The
// test fails (it does not skip) when there is none: make test installs it.
func Executable(t testing.TB) string {
	t.Helper()
	p := os.Getenv("PADDOCK_CHROMIUM")
	if p == "" {
		p = Path
	}
	if _, err := exec.LookPath(p); err != nil {
		t.Fatalf("no Chromium at %s (scripts/install-deps.sh installs Debian's chromium; PADDOCK_CHROMIUM names another): %v", p, err)
	}
	return p
}

// Options are the browser's size and the bound on the whole test's use
// of it.
type Options struct {
	// Width and Height of the window (default 1280×900).
	Width, Height int
	// Timeout bounds everything done with the returned context (default
	// 2 minutes).
	Timeout time.Duration
	// TrustSPKI are base64 SHA-256 hashes of certificates' public keys
	// (SPKIHash) that Chromium accepts in a server's chain although no
	// root it trusts signed them: a test's gateway with its own CA.
	TrustSPKI []string
}

// SPKIHash is how --ignore-certificate-errors-spki-list names a
// certificate: the base64 SHA-256 of its SubjectPublicKeyInfo.
func SPKIHash(c *x509.Certificate) string {
	sum := sha256.Sum256(c.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// New starts a headless Chromium and returns a chromedp context for one
// tab in it. The browser is stopped when the test ends. Extra tabs:
// chromedp.NewContext(ctx).
func New(t testing.TB, o Options) context.Context {
	t.Helper()
	if o.Width == 0 {
		o.Width, o.Height = 1280, 900
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Minute
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(Executable(t)),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Headless,
		chromedp.DisableGPU,
		chromedp.WindowSize(o.Width, o.Height),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("metrics-recording-only", true),
	}
	if len(o.TrustSPKI) > 0 {
		// Taken only with a profile of its own (UserDataDir above).
		opts = append(opts, chromedp.Flag("ignore-certificate-errors-spki-list", strings.Join(o.TrustSPKI, ",")))
	}
	if os.Geteuid() == 0 {
		// Chromium refuses to run as root with its own sandbox on.
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	ctx, cancelTimeout := context.WithTimeout(ctx, o.Timeout)
	t.Cleanup(func() {
		cancelTimeout()
		cancelCtx()
		cancelAlloc()
	})
	// Start the browser now, so a failure to start is this call's.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return ctx
}
