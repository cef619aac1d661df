package console_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"paddock.dev/paddock/console"
	"paddock.dev/paddock/internal/testutil/browser"
)

// unitPage opens the console's files (no daemon) in a headless Chromium
// for tests that call one module's functions in the page.
func unitPage(t *testing.T) context.Context {
	t.Helper()
	srv := httptest.NewServer(console.Handler())
	t.Cleanup(srv.Close)
	ctx := browser.New(t, browser.Options{})
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/console/")); err != nil {
		t.Fatal(err)
	}
	return ctx
}

func evalString(t *testing.T, ctx context.Context, expr string) string {
	t.Helper()
	out, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// linkProbe calls terminal.js's link handler with uri, the person
// answering the confirm with yes, and reports what it opened and how.
const linkProbe = `(async (uri) => {
	const { openLink } = await import('/console/terminal.js');
	const seen = { opened: [], asked: 0 };
	const realOpen = window.open, realConfirm = window.confirm;
	window.open = (...args) => { seen.opened.push(args); return null; };
	window.confirm = () => { seen.asked++; return true; };
	try {
		seen.result = openLink(new MouseEvent('click'), uri);
	} finally {
		window.open = realOpen;
		window.confirm = realConfirm;
	}
	return JSON.stringify(seen);
})`

// TestTerminalLinkHandler: a hyperlink a program prints in the terminal
// opens only when it is http or https and of bounded length, after a
// confirm, in a new tab with noopener and noreferrer (so the tab gets no
// copy of the console's sessionStorage and no handle on it); anything
// else opens nothing.
func TestTerminalLinkHandler(t *testing.T) {
	ctx := unitPage(t)
	got := evalString(t, ctx, linkProbe+`('https://example.com/a?b=c')`)
	if want := `"opened":[["https://example.com/a?b=c","_blank","noopener,noreferrer"]],"asked":1,"result":true`; !strings.Contains(got, want) {
		t.Errorf("an https link: %s, want %s", got, want)
	}
	for _, uri := range []string{"javascript:alert(1)", "data:text/html,hi", "file:///etc/passwd", "blob:https://x/y", "/console/#/admin", "not a url", "https://example.com/" + strings.Repeat("a", 2100)} {
		got := evalString(t, ctx, linkProbe+`(`+jsString(uri)+`)`)
		if !strings.Contains(got, `"opened":[]`) || !strings.Contains(got, `"result":false`) {
			t.Errorf("%.40q opened: %s", uri, got)
		}
	}
}
