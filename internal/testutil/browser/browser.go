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
	"os"
	"os/exec"
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
	// Flags are extra command-line switches for Chromium, name to value
	// (true for a switch without one), e.g. the console tests' trust of
	// their own test CA.
	Flags map[string]any
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
	for name, v := range o.Flags {
		opts = append(opts, chromedp.Flag(name, v))
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
