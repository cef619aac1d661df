package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"paddock.dev/paddock/api"
	"paddock.dev/paddock/hostd/daemon/daemontest"
)

// TestCreateSessionThroughPage: signed in with a tenant's token, the
// create page shows what the policy compiles to and a refused policy's
// refusal before anything is made, does not create with it, and creates
// with a good one: the session is the tenant's, has the page's fields,
// its ledger names the tenant as the caller, and the page moves to its
// panel.
func TestCreateSessionThroughPage(t *testing.T) {
	tenants, toks := daemontest.TenantTokens(t, "alpha")
	ctx, d, _ := startConsole(t, withDaemon(tenants))
	errs := pageErrors(t, ctx)
	bg := context.Background()
	signIn(t, ctx, toks[0])
	goTo(t, ctx, "#/create")
	// The example policy (offline, an ask rule) compiles and is accepted.
	waitText(t, ctx, `#policy-ok`, "No refusal")
	waitText(t, ctx, `#policy-summary`, "network offline")
	waitText(t, ctx, `#policy-compiled`, "git push*")

	// An allowlist on a daemon with no egress: refused, shown, not made.
	setValue(t, ctx, `textarea[name=policy]`, `{"network": {"default": "deny", "allow": [{"host": "example.com"}]}}`)
	waitText(t, ctx, `#policy-refusals`, "serves no egress")
	shot(t, ctx, "create-refused")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#create-submit`))); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, `#flash`, "refused")
	if ss, err := d.Client.ListSessions(bg); err != nil || len(ss) != 0 {
		t.Fatalf("a refused policy made sessions: %v %v", ss, err)
	}

	// A good policy and the common fields.
	setValue(t, ctx, `textarea[name=policy]`, `{"preset": "offline", "process": {"ask": ["git push*"]}}`)
	waitText(t, ctx, `#policy-ok`, "No refusal")
	setValue(t, ctx, `input[name=agent]`, "made-by-page")
	setValue(t, ctx, `input[name=ttl_seconds]`, "900")
	setValue(t, ctx, `input[name=max_execs]`, "7")
	shot(t, ctx, "create")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#create-submit`))); err != nil {
		t.Fatal(err)
	}
	var ss []*api.Session
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		ss, _ = d.Client.ListSessions(bg)
		if len(ss) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no session made; the page says %q", waitText(t, ctx, `#flash`, ""))
		}
	}
	s := ss[0]
	if len(ss) != 1 || s.Agent != "made-by-page" || s.Budget == nil || s.Budget.MaxExecs == nil || *s.Budget.MaxExecs != 7 ||
		s.Policy.Process == nil || strings.Join(s.Policy.Process.Ask, ",") != "git push*" || s.ExpiresAt.Sub(s.CreatedAt) != 900*time.Second {
		t.Errorf("the page made %d sessions, the first %+v", len(ss), s)
	}
	if s.Tenant != "alpha" {
		t.Errorf("the page's session belongs to %q, not the signed-in tenant", s.Tenant)
	}
	es, err := d.Client.Events(bg, s.ID)
	if err != nil || len(es) == 0 || es[0].Actor != "tenant:alpha" {
		t.Errorf("the create's ledger entry: %+v %v, want the caller tenant:alpha", es, err)
	}
	for deadline := time.Now().Add(10 * time.Second); hash(t, ctx) != "#/sessions/"+s.ID; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after the create the page is at %q", hash(t, ctx))
		}
	}
	if e := errs(); len(e) > 0 {
		t.Errorf("the page logged errors: %q", e)
	}
}

// TestAdminPage: the admin sees the policy modules, the tenants with
// their session counts and the backends; a tenant sees "admin only".
func TestAdminPage(t *testing.T) {
	tenants, toks := daemontest.TenantTokens(t, "alpha", "beta")
	ctx, d, _ := startConsole(t, withDaemon(tenants))
	if _, err := d.Client.CreateSession(context.Background(), api.CreateRequest{TTLSeconds: 600}); err != nil {
		t.Fatal(err)
	}
	signIn(t, ctx, d.Token)
	goTo(t, ctx, "#/admin")
	waitText(t, ctx, `#policy-builtin`, "process")
	waitText(t, ctx, `#policy-last-error`, "No refused load")
	tn := waitText(t, ctx, `#admin-tenants`, "alpha")
	if !strings.Contains(tn, "beta") {
		t.Errorf("tenants section %q lacks beta", tn)
	}
	waitText(t, ctx, `#admin-backends`, "procbox (default)")
	shot(t, ctx, "admin")

	signIn(t, ctx, toks[0])
	goTo(t, ctx, "#/admin")
	waitText(t, ctx, `#admin-only`, "Admin only")
	if txt, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#main`))); strings.Contains(txt, "beta") {
		t.Errorf("a tenant's admin page shows other tenants: %q", txt)
	}
}

// unlabelled lists the page's controls and links that have no
// accessible name: an input, select or textarea without a label (or
// aria-label/aria-labelledby), a button or link without text.
const unlabelled = `(() => {
	const bad = [];
	const named = (el) => {
		if (el.labels && [...el.labels].some((l) => l.textContent.trim())) return true;
		if ((el.getAttribute('aria-label') || '').trim()) return true;
		const by = el.getAttribute('aria-labelledby');
		if (by && by.split(/\s+/).some((id) => (document.getElementById(id) || {}).textContent)) return true;
		if (el.tagName === 'BUTTON' || el.tagName === 'A') return el.textContent.trim() !== '';
		return false;
	};
	for (const el of document.querySelectorAll('input, select, textarea, button, a[href]')) {
		if (el.type === 'hidden') continue;
		if (!named(el)) bad.push(el.outerHTML.slice(0, 100));
	}
	return bad;
})()`

// TestLabelsAndKeyboard: every control on every page has a label, the
// console can be signed in to and out of with the keyboard alone, and no
// page logs an error (a CSP violation would be one).
func TestLabelsAndKeyboard(t *testing.T) {
	tenants, _ := daemontest.TenantTokens(t, "alpha")
	ctx, d, base := startConsole(t, withDaemon(tenants))
	errs := pageErrors(t, ctx)
	if _, err := d.Client.CreateSession(context.Background(), api.CreateRequest{TTLSeconds: 600}); err != nil {
		t.Fatal(err)
	}
	check := func(page, ready string) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(ready))); err != nil {
			t.Fatalf("%s: %v", page, err)
		}
		bad, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](unlabelled))
		if err != nil {
			t.Fatal(err)
		}
		if len(bad) > 0 {
			t.Errorf("%s: controls without a label: %q", page, bad)
		}
	}
	// Sign in by keyboard: the token field has the focus, Enter submits.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/console/"), chromedp.WaitVisible(chromedp.CSS(`#signin-form`))); err != nil {
		t.Fatal(err)
	}
	check("sign-in", `#signin-form`)
	if f, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.activeElement.name || ''`)); f != "token" {
		t.Errorf("the sign-in page's focus is on %q, not the token field", f)
	}
	if err := chromedp.Do(ctx, chromedp.KeyEvent(d.Token+kb.Enter), chromedp.WaitVisible(chromedp.CSS(`#who`))); err != nil {
		t.Fatalf("keyboard sign-in: %v", err)
	}
	check("sessions", `#sessions-body tr`)
	goTo(t, ctx, "#/create")
	check("create", `#policy-result p`)
	goTo(t, ctx, "#/admin")
	check("admin", `#admin-backends table`)
	// Tab reaches Sign out, and Enter on it signs out.
	reached := false
	for range 40 {
		if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.Tab)); err != nil {
			t.Fatal(err)
		}
		if id, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.activeElement.id`)); id == "signout" {
			reached = true
			break
		}
	}
	if !reached {
		t.Fatal("Tab never reached the Sign out button")
	}
	if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(chromedp.CSS(`#signin-form`))); err != nil {
		t.Fatalf("keyboard sign-out: %v", err)
	}
	if e := errs(); len(e) > 0 {
		t.Errorf("the pages logged errors: %q", e)
	}
}

// TestNarrowScreen: at 400 px wide no page scrolls sideways.
func TestNarrowScreen(t *testing.T) {
	ctx, d, _ := startConsole(t, withWindow(400, 900))
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(400, 900)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Client.CreateSession(context.Background(), api.CreateRequest{Agent: "a-rather-long-agent-name-for-a-narrow-screen", TTLSeconds: 600}); err != nil {
		t.Fatal(err)
	}
	fits := func(page string) {
		t.Helper()
		w, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](`[document.scrollingElement.scrollWidth, window.innerWidth]`))
		if err != nil {
			t.Fatal(err)
		}
		if w[1] != 400 {
			t.Fatalf("the window is %d px wide, not 400", w[1])
		}
		if w[0] > w[1] {
			t.Errorf("%s scrolls sideways at %d px: %d px wide", page, w[1], w[0])
		}
	}
	signIn(t, ctx, d.Token)
	waitText(t, ctx, `#sessions-body`, "a-rather-long-agent-name")
	fits("sessions")
	shot(t, ctx, "sessions-narrow")
	goTo(t, ctx, "#/create")
	waitText(t, ctx, `#policy-result`, "refus")
	fits("create")
	shot(t, ctx, "create-narrow")
	goTo(t, ctx, "#/admin")
	waitText(t, ctx, `#admin-backends`, "procbox")
	fits("admin")
}
