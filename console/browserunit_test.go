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

// routeProbe signs the page in against a fake fetch (whoami says admin,
// every other call is a 404), goes to hash, and reports what the main
// area then shows and whether the page asked the API about a session.
const routeProbe = `(async (hash) => {
	const calls = [];
	window.fetch = async (path) => {
		calls.push(String(path));
		if (String(path) === '/v1/whoami') return new Response('{"kind":"admin"}', { status: 200, headers: { 'Content-Type': 'application/json' } });
		return new Response('{"error":"no such thing","code":"not_found"}', { status: 404, headers: { 'Content-Type': 'application/json' } });
	};
	sessionStorage.setItem('paddock.console.token', 'pdk_probe_token');
	location.hash = '#/admin';
	await new Promise((r) => setTimeout(r, 300));
	calls.length = 0;
	location.hash = hash;
	await new Promise((r) => setTimeout(r, 500));
	const nf = document.querySelector('#not-found');
	return JSON.stringify({ notFound: nf ? nf.textContent : '', calls });
})`

// TestHashRouteChecked: a session route whose id is not a session id
// ("..", an API path, a malformed % escape, extra parts) shows Not found
// and makes no API call about it; a malformed escape no longer leaves the
// page stuck; a well-formed id goes on to the panel.
func TestHashRouteChecked(t *testing.T) {
	ctx := unitPage(t)
	for _, hash := range []string{"#/sessions/..", "#/sessions/%2e%2e", "#/sessions/%E0%A4%A", "#/sessions/%", "#/sessions/ses-0123/extra", "#/sessions/..%2F..%2Fv1%2Fadmin", "#/sessions/SES-ABC", "#/sessions/ses-", "#/sessions/ses-0123.", "#/sessions/ses-" + strings.Repeat("a", 61), "#/x/%zz"} {
		got := evalString(t, ctx, routeProbe+`(`+jsString(hash)+`)`)
		if !strings.Contains(got, "Not found") || strings.Contains(got, "/v1/agents/sessions/") {
			t.Errorf("%s: %s", hash, got)
		}
	}
	// A created session's id, a fork child's and a grandchild's (the
	// parent's id cut to 32 characters, "-f" and 12 hex digits).
	for _, id := range []string{"ses-0123456789abcdef", "ses-7c10ae14b077d009-f37b67f4f794f", "ses-7c10ae14b077d009-f37b67f4f79-f0a1b2c3d4e5f"} {
		got := evalString(t, ctx, routeProbe+`('#/sessions/`+id+`')`)
		if strings.Contains(got, "Not found") || !strings.Contains(got, "/v1/agents/sessions/"+id) {
			t.Errorf("a good id %s: %s", id, got)
		}
	}
}

// TestSignInFieldNotAPassword: the sign-in token field is no password
// field (browsers and password managers offer to save what goes in one,
// whatever autocomplete says), has autocomplete off and keeps its label;
// its characters are masked by CSS until "Show the token" is ticked.
func TestSignInFieldNotAPassword(t *testing.T) {
	ctx := unitPage(t)
	got := evalString(t, ctx, `(async () => {
		sessionStorage.clear();
		location.hash = '#/signin';
		for (let i = 0; i < 50 && !document.querySelector('#signin-form input[name=token]'); i++) await new Promise((r) => setTimeout(r, 100));
		const input = document.querySelector('#signin-form input[name=token]');
		const label = document.querySelector('label[for="' + input.id + '"]');
		const masked = getComputedStyle(input).webkitTextSecurity;
		document.querySelector('#signin-show').click();
		const shown = getComputedStyle(input).webkitTextSecurity;
		return [input.type, input.autocomplete, label ? label.textContent : '', masked, shown, document.querySelectorAll('input[type=password]').length].join('|');
	})()`)
	if want := "text|off|Token|disc|none|0"; got != want {
		t.Errorf("the token field: %s, want %s", got, want)
	}
}
