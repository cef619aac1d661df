package console_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"paddock.dev/paddock/console"
	"paddock.dev/paddock/internal/testutil/browser"
)

// streamProbe runs api.js's stream() in the page against a fake fetch
// whose body arrives in the given chunks, and returns what it saw: the
// events, the last id, the request's headers, or the error's code.
const streamProbe = `(async (chunks, lastEventId) => {
	const { api, token } = await import('/console/api.js');
	token.set('pdk_probe_token');
	const seen = { events: [], headers: {} };
	window.fetch = async (path, init) => {
		for (const [k, v] of init.headers) seen.headers[k] = v;
		seen.path = path;
		const enc = new TextEncoder();
		const body = new ReadableStream({ start(c) { for (const x of chunks) c.enqueue(enc.encode(x)); c.close(); } });
		return new Response(body, { status: 200, headers: { 'Content-Type': 'text/event-stream' } });
	};
	try {
		seen.last = await api.stream('/v1/x/stream', { lastEventId, onEvent: (e) => seen.events.push([e.type, e.id, e.data, e.json === undefined ? null : e.json]) });
	} catch (e) {
		seen.error = e.code || e.message;
	}
	return JSON.stringify(seen);
})`

// TestAPIStream: the console's SSE reader (api.stream, used by the panel
// for events and exec output) joins events split anywhere across chunks,
// takes CRLF and comments, keeps the last id, sends the bearer token and
// Last-Event-ID, and refuses an event over its size bound.
func TestAPIStream(t *testing.T) {
	srv := httptest.NewServer(console.Handler())
	t.Cleanup(srv.Close)
	ctx := browser.New(t, browser.Options{})
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/console/")); err != nil {
		t.Fatal(err)
	}
	run := func(chunks []string, last string) string {
		t.Helper()
		args := `[` + strings.Join(func() []string {
			q := make([]string, len(chunks))
			for i, c := range chunks {
				q[i] = jsString(c)
			}
			return q
		}(), ",") + `]`
		out, err := chromedp.Run(ctx, chromedp.Evaluate[string](streamProbe+`(`+args+`, `+jsString(last)+`)`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	got := run([]string{": hello\r\n", "id: 1\r\nevent: output\r\nda", "ta: {\"a\":1}\r\n\r\nid: 2\n", "data: line one\ndata: line two\n\n", "event: exit\ndata: 0\n\n"}, "7")
	for _, want := range []string{
		`["output","1","{\"a\":1}",{"a":1}]`,
		`["message","2","line one\nline two",null]`,
		`["exit","2","0",0]`,
		`"last":"2"`,
		`"authorization":"Bearer pdk_probe_token"`,
		`"last-event-id":"7"`,
		`"accept":"text/event-stream"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("stream saw %s\nwant it to hold %s", got, want)
		}
	}
	if strings.Contains(got, "hello") {
		t.Errorf("a comment became an event: %s", got)
	}
	// One event over the bound (1 MiB), sent in pieces: refused.
	big := strings.Repeat("x", 256<<10)
	got = run([]string{"data: " + big, big, big, big, big + "\n\n"}, "")
	if !strings.Contains(got, `"error":"console_event_too_large"`) {
		t.Errorf("an event over 1 MiB: %.300s", got)
	}
}

// TestAPIErrors: api.js turns an error answer into an ApiError with the
// status, the API's code and message and a held command's approval id,
// and a 401 also tells the app (the event that sends it to sign-in).
func TestAPIErrors(t *testing.T) {
	srv := httptest.NewServer(console.Handler())
	t.Cleanup(srv.Close)
	ctx := browser.New(t, browser.Options{})
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/console/")); err != nil {
		t.Fatal(err)
	}
	const probe = `(async () => {
		const { api } = await import('/console/api.js');
		const answers = [
			[428, {error: 'approval required: git push', code: 'approval_required', approval_id: 'apr-0123'}],
			[401, {error: 'unauthenticated: token revoked', code: 'unauthenticated'}],
			[502, 'gateway down'],
		];
		let told = 0;
		window.addEventListener('paddock:unauthorized', () => { told++; });
		const out = [];
		for (const [status, body] of answers) {
			window.fetch = async () => new Response(typeof body === 'string' ? body : JSON.stringify(body), { status, headers: { 'Content-Type': typeof body === 'string' ? 'text/plain' : 'application/json' } });
			try { await api.post('/v1/x', { a: 1 }); out.push('no error'); }
			catch (e) { out.push([e.name, e.status, e.code, e.message, e.approvalId]); }
		}
		return JSON.stringify({ out, told });
	})()`
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](probe, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"out":[["ApiError",428,"approval_required","approval required: git push","apr-0123"],` +
		`["ApiError",401,"unauthenticated","unauthenticated: token revoked",""],` +
		`["ApiError",502,"","gateway down",""]],"told":1}`
	if got != want {
		t.Errorf("api errors:\n got %s\nwant %s", got, want)
	}
}
