package console_test

import (
	"context"
	"encoding/base64"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
	"paddock.dev/paddock/hostd/daemon/daemontest"
	"paddock.dev/paddock/internal/testutil"
)

// hash is the page's location.hash.
func hash(t *testing.T, ctx context.Context) string {
	t.Helper()
	h, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.hash`))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestTenantSeesOnlyItsSessions: a tenant's token lists its own session
// and never another tenant's.
func TestTenantSeesOnlyItsSessions(t *testing.T) {
	tenants, toks := daemontest.TenantTokens(t, "alpha", "beta")
	ctx, d, _ := startConsole(t, withDaemon(tenants))
	bg := context.Background()
	mine, err := client.New(d.URL, toks[0]).CreateSession(bg, api.CreateRequest{Agent: "alpha-agent", TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := client.New(d.URL, toks[1]).CreateSession(bg, api.CreateRequest{Agent: "beta-agent", TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	signIn(t, ctx, toks[0])
	waitText(t, ctx, `#who`, "tenant alpha")
	waitText(t, ctx, `#sessions-body tr[data-id="`+mine.ID+`"]`, mine.ID)
	body := waitText(t, ctx, `#sessions-status`, "1 session")
	if all := waitText(t, ctx, `#sessions-body`, mine.ID); strings.Contains(all, theirs.ID) || strings.Contains(all, "beta-agent") {
		t.Errorf("tenant alpha's list shows beta's session: %q (%s)", all, body)
	}
	// Beta's session's panel: the API's 404, nothing of the session.
	goTo(t, ctx, "#/sessions/"+theirs.ID)
	waitText(t, ctx, `#main`, "not found")
	if txt, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#main`))); strings.Contains(txt, "beta-agent") {
		t.Errorf("tenant alpha's panel shows beta's session: %q", txt)
	}
	// The admin, by contrast, sees both (so the check above can fail).
	signIn(t, ctx, d.Token)
	waitText(t, ctx, `#sessions-body tr[data-id="`+theirs.ID+`"]`, theirs.ID)
	waitText(t, ctx, `#sessions-body tr[data-id="`+mine.ID+`"]`, mine.ID)
}

// TestSessionTokenSeesOnlyItsSession: a session token lands on its own
// session's panel, has no sessions list, and another session's panel
// shows the API's refusal rather than the session.
func TestSessionTokenSeesOnlyItsSession(t *testing.T) {
	ctx, d, base := startConsole(t)
	bg := context.Background()
	own, err := d.Client.CreateSession(bg, api.CreateRequest{Agent: "own", TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	other, err := d.Client.CreateSession(bg, api.CreateRequest{Agent: "other", TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	st, err := d.Client.MintToken(bg, own.ID, api.TokenRequest{Ops: []string{"read"}, TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	signIn(t, ctx, st.Token)
	waitText(t, ctx, `#who`, "session "+own.ID)
	if h := hash(t, ctx); h != "#/sessions/"+own.ID {
		t.Errorf("a session token landed on %q, want its own panel", h)
	}
	waitText(t, ctx, `#main`, own.ID)
	nav, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#nav`)))
	if strings.Contains(nav, "Sessions") || strings.Contains(nav, "Create") {
		t.Errorf("a session token's menu offers %q", nav)
	}
	// The sessions list sends it back to its own panel.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/console/#/sessions")); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); hash(t, ctx) != "#/sessions/"+own.ID; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("#/sessions with a session token stayed at %q", hash(t, ctx))
		}
	}
	// Another session's panel: the API refuses, nothing of it is shown.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/console/#/sessions/"+other.ID)); err != nil {
		t.Fatal(err)
	}
	// The panel shows the API's answer: a session token works only on its
	// own session (403).
	waitText(t, ctx, `#main`, "forbidden")
	if txt, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#main`))); strings.Contains(txt, "other") && strings.Contains(txt, "running") {
		t.Errorf("a session token sees another session: %q", txt)
	}
	shot(t, ctx, "session-token")
}

// TestSignOutAnd401: sign-out forgets the token; a token revoked while
// signed in sends the page back to sign-in with a message at its next
// call.
func TestSignOutAnd401(t *testing.T) {
	ctx, d, _ := startConsole(t)
	bg := context.Background()
	s, err := d.Client.CreateSession(bg, api.CreateRequest{Agent: "revoked", TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	signIn(t, ctx, d.Token)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#signout`)), chromedp.WaitVisible(chromedp.CSS(`#signin-form`))); err != nil {
		t.Fatal(err)
	}
	if n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`sessionStorage.length + localStorage.length`)); n != 0 {
		t.Errorf("after sign-out the browser still stores %d items", n)
	}
	if c, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.cookie`)); c != "" {
		t.Errorf("the console set a cookie: %q", c)
	}
	st, err := d.Client.MintToken(bg, s.ID, api.TokenRequest{Ops: []string{"read"}, TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	signIn(t, ctx, st.Token)
	if err := d.Client.RevokeToken(bg, s.ID, st.ID); err != nil {
		t.Fatal(err)
	}
	// The gateway caches an identity for a second; then the next call the
	// page makes (its panel's, on a move within the page: no reload, no
	// new whoami) is refused, and the page goes back to sign-in.
	time.Sleep(1500 * time.Millisecond)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.hash = '#/signin'`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#signin-form`))); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, `#flash`, "Signed out: ")
	if n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`sessionStorage.length`)); n != 0 {
		t.Errorf("a refused token is still stored")
	}
	// A stored token refused at a reload: the same.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[string](`sessionStorage.setItem('paddock.console.token', 'pdk_not_a_real_token'), 'ok'`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#signin-form`))); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, `#flash`, "refused")
	if n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`sessionStorage.length`)); n != 0 {
		t.Errorf("a refused token is still stored after a reload")
	}
	shot(t, ctx, "signin")
}

// probePage is a preview's page whose script tries every way to the
// console's token it can think of, and writes what it got into its own
// DOM (#result) for the test to read.
const probePage = `<!doctype html><title>probe</title><pre id="result">not run</pre><script src="probe.js"></script>`

const probeScript = `
const out = { ran: true, origin: String(location.origin) };
const take = (name, f) => { try { out[name] = String(f()); } catch (e) { out[name] = 'blocked: ' + e.name; } };
const dump = (s) => JSON.stringify(Object.keys(s).map((k) => [k, s.getItem(k)]));
take('session', () => dump(sessionStorage));
take('local', () => dump(localStorage));
take('cookie', () => document.cookie);
take('opener', () => window.opener ? dump(window.opener.sessionStorage) : 'none');
take('opener_dom', () => window.opener ? window.opener.document.body.innerText : 'none');
take('parent', () => window.parent !== window ? dump(window.parent.sessionStorage) : 'none');
const show = () => { document.getElementById('result').textContent = JSON.stringify(out); };
const f = document.createElement('iframe');
f.src = '/console/';
f.onload = () => { take('frame', () => dump(f.contentWindow.sessionStorage)); show(); };
document.body.appendChild(f);
setTimeout(() => { if (!('frame' in out)) { out.frame = 'no load'; } show(); }, 3000);
show();
`

// TestPreviewCannotReadToken: a page served through a preview URL (same
// gateway, same host and port as the console, path form) runs its script
// but cannot read the signed-in console's token: not from storage, not
// through the console window that opened it, not by framing the console.
func TestPreviewCannotReadToken(t *testing.T) {
	ctx, d, base := startConsole(t)
	bg := context.Background()
	s, err := d.Client.CreateSession(bg, api.CreateRequest{Agent: "previewed", TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(testutil.EchoServerBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	for path, b := range map[string][]byte{"/tmp/echoserver": bin, "/tmp/site/probe.html": []byte(probePage), "/tmp/site/probe.js": []byte(probeScript)} {
		yes := true
		if err := d.Client.Call(bg, "PUT", s.ID, "/files/content", nil, api.FileWrite{Path: path, ContentBase64: base64.StdEncoding.EncodeToString(b), Mode: "0755", Parents: &yes}, nil); err != nil {
			t.Fatalf("write %s: %v", path, err)
		}
	}
	var job api.Job
	if err := d.Client.Call(bg, "POST", s.ID, "/jobs", nil, api.JobStart{Command: "/tmp/echoserver -addr 127.0.0.1:8000 -static /tmp/site"}, &job); err != nil {
		t.Fatal(err)
	}
	pv, err := d.Client.CreatePreview(bg, s.ID, api.PreviewRequest{Port: 8000, TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	probe := base + "/preview/" + pv.Token + "/static/probe.html"
	hc := gatewayClient(t)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		resp, err := hc.Get(probe)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the preview never served the probe page: %v", err)
		}
	}
	signIn(t, ctx, d.Token)
	stored, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify(Object.values(sessionStorage))`))
	if err != nil || !strings.Contains(stored, d.Token) {
		t.Fatalf("the console does not hold the token where the probe looks (%q, %v): the test would prove nothing", stored, err)
	}

	read := func(tab context.Context, where string) string {
		t.Helper()
		var got string
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			got, _ = chromedp.Run(tab, chromedp.Evaluate[string](`(document.getElementById('result') || {}).textContent || ''`))
			if strings.Contains(got, `"frame"`) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the probe's script did not finish: %q", where, got)
			}
		}
		t.Logf("%s: %s", where, got)
		if !strings.Contains(got, `"ran":true`) {
			t.Errorf("%s: the probe did not run: %q", where, got)
		}
		if strings.Contains(got, d.Token) || strings.Contains(got, "Signed in") {
			t.Errorf("%s: a preview page read the console's token or page: %s", where, got)
		}
		return got
	}

	// 1. The console's window opens the preview (window.opener is the
	// console).
	opened := chromedp.WaitNewTarget(ctx, func(i *target.Info) bool { return strings.Contains(i.URL, "/preview/") })
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](`window.open(`+jsString(probe)+`), undefined`, func(p *runtime.EvaluateParams) { p.UserGesture = ptrTo(true) })); err != nil {
		t.Fatal(err)
	}
	var id target.ID
	select {
	case id = <-opened:
	case <-time.After(20 * time.Second):
		t.Fatal("the console's window.open made no tab")
	}
	tab, cancel := chromedp.NewContext(ctx, chromedp.WithTargetID(id))
	defer cancel()
	read(tab, "opened by the console")

	// 2. The same tab as the console navigates to the preview: the
	// console's sessionStorage belongs to this tab and origin.
	if err := chromedp.Do(ctx, chromedp.Navigate(probe)); err != nil {
		t.Fatal(err)
	}
	got := read(ctx, "in the console's tab")
	if !strings.Contains(got, `"session":"blocked`) {
		t.Errorf("the preview page's storage was not blocked (opaque origin expected): %s", got)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/console/")); err != nil {
		t.Fatal(err)
	}
	if stored, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify(Object.values(sessionStorage))`)); !strings.Contains(stored, d.Token) {
		t.Errorf("back on the console the token is gone (%q): the probe ran in another storage than the console's", stored)
	}
}

func ptrTo[T any](v T) *T { return &v }
