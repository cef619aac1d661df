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

// domProbe tries h() from dom.js with one attribute and reports whether
// it took it ("ok:" and the attribute as set) or refused it.
const domProbe = `(async (tag, attr, value) => {
	const { h } = await import('/console/dom.js');
	try {
		const el = h(tag, { [attr]: value });
		return 'ok:' + el.getAttribute(attr);
	} catch (e) {
		return 'refused: ' + e.message;
	}
})`

// TestDomURLAllowlist: dom.js's h() puts in a link or source only a
// relative link (a path or #fragment) or an http, https or blob URL;
// every other scheme is refused, however it is spelled.
func TestDomURLAllowlist(t *testing.T) {
	ctx := unitPage(t)
	probe := func(tag, attr, value string) string {
		return evalString(t, ctx, domProbe+`(`+jsString(tag)+`, `+jsString(attr)+`, `+jsString(value)+`)`)
	}
	for _, v := range []string{"#/sessions/ses-0123456789abcdef", "./panel.css", "/console/", "panel.css", "https://127.0.0.1:7788/preview/pvw-1/", "http://localhost/", "blob:https://127.0.0.1/0b7e", ""} {
		if got := probe("a", "href", v); got != "ok:"+v {
			t.Errorf("href %q: %s", v, got)
		}
	}
	for _, v := range []string{"javascript:alert(1)", " JaVaScRiPt:alert(1)", "java\tscript:alert(1)", "\x01javascript:alert(1)", "data:text/html,<script>alert(1)</script>", "vbscript:x", "file:///etc/passwd", "ftp://x/", "about:blank", "mailto:a@b", "http://[::1"} {
		for _, at := range [][2]string{{"a", "href"}, {"img", "src"}, {"form", "action"}, {"button", "formaction"}, {"a", "HREF"}} {
			if got := probe(at[0], at[1], v); !strings.HasPrefix(got, "refused: ") {
				t.Errorf("%s %s=%q was taken: %s", at[0], at[1], v, got)
			}
		}
	}
	// Other attributes still take text as it is.
	if got := probe("a", "title", "data:not a link"); got != "ok:data:not a link" {
		t.Errorf("title: %s", got)
	}
}
