package previews

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const tok = "pvw-abcdefghijklmnopqrstuvwxyz234567abcdefghijklmnopqrst"

func testCall(prefix, host string, secure bool) *previewCall {
	return &previewCall{target: &PreviewTarget{ID: "pv-0123456789abcdef", Port: 9222}, prefix: prefix, host: host, secure: secure}
}

// TestRewriteDevTools: Chrome's own /json/list and /json/version shapes
// (hosted and local frontends, the Compat field) get their WebSocket
// addresses moved to the preview, in the path and the host form, ws and
// wss; every other field stays as it was; documents without such URLs,
// or that are not JSON, are left alone.
func TestRewriteDevTools(t *testing.T) {
	const list = `[ {
   "description": "",
   "devtoolsFrontendUrl": "https://chrome-devtools-frontend.appspot.com/serve_rev/@5f4e/inspector.html?ws=127.0.0.1:9222/devtools/page/DAB7",
   "devtoolsFrontendUrlCompat": "https://chrome-devtools-frontend.appspot.com/serve_rev/@5f4e/inspector.html?ws=127.0.0.1:9222/devtools/page/DAB7",
   "faviconUrl": "https://example.com/favicon.ico",
   "id": "DAB7",
   "title": "Example & <Domain>",
   "type": "page",
   "url": "https://example.com/?a=1&b=2",
   "webSocketDebuggerUrl": "ws://127.0.0.1:9222/devtools/page/DAB7"
}, {
   "description": "",
   "devtoolsFrontendUrl": "/devtools/inspector.html?ws=localhost:9222/devtools/page/E1&panel=console",
   "id": "E1",
   "type": "service_worker",
   "webSocketDebuggerUrl": "ws://localhost:9222/devtools/page/E1"
} ]`
	const version = `{
   "Browser": "HeadlessChrome/120.0.6099.109",
   "Protocol-Version": "1.3",
   "User-Agent": "Mozilla/5.0 (X11; Linux x86_64)",
   "V8-Version": "12.0.267.10",
   "webSocketDebuggerUrl": "ws://127.0.0.1:9222/devtools/browser/b0b8a4fb-bb17"
}`
	pathForm := "/preview/" + tok
	for _, tc := range []struct {
		name string
		doc  string
		call *previewCall
		want any // decoded JSON; nil: left alone
	}{
		{"list, path form", list, testCall(pathForm, "127.0.0.1:7788", false), []any{
			map[string]any{
				"description":               "",
				"devtoolsFrontendUrl":       "https://chrome-devtools-frontend.appspot.com/serve_rev/@5f4e/inspector.html?ws=127.0.0.1:7788" + pathForm + "/devtools/page/DAB7",
				"devtoolsFrontendUrlCompat": "https://chrome-devtools-frontend.appspot.com/serve_rev/@5f4e/inspector.html?ws=127.0.0.1:7788" + pathForm + "/devtools/page/DAB7",
				"faviconUrl":                "https://example.com/favicon.ico",
				"id":                        "DAB7",
				"title":                     "Example & <Domain>",
				"type":                      "page",
				"url":                       "https://example.com/?a=1&b=2",
				"webSocketDebuggerUrl":      "ws://127.0.0.1:7788" + pathForm + "/devtools/page/DAB7",
			},
			map[string]any{
				"description":          "",
				"devtoolsFrontendUrl":  pathForm + "/devtools/inspector.html?ws=127.0.0.1:7788" + pathForm + "/devtools/page/E1&panel=console",
				"id":                   "E1",
				"type":                 "service_worker",
				"webSocketDebuggerUrl": "ws://127.0.0.1:7788" + pathForm + "/devtools/page/E1",
			},
		}},
		{"version, host form behind https", version, testCall("", tok+".preview.example.com", true), map[string]any{
			"Browser":              "HeadlessChrome/120.0.6099.109",
			"Protocol-Version":     "1.3",
			"User-Agent":           "Mozilla/5.0 (X11; Linux x86_64)",
			"V8-Version":           "12.0.267.10",
			"webSocketDebuggerUrl": "wss://" + tok + ".preview.example.com/devtools/browser/b0b8a4fb-bb17",
		}},
		{"wss frontend parameter", `{"devtoolsFrontendUrl":"/devtools/inspector.html?ws=127.0.0.1:9222/devtools/page/A"}`, testCall(pathForm, "gw.example", true), map[string]any{
			"devtoolsFrontendUrl": pathForm + "/devtools/inspector.html?wss=gw.example" + pathForm + "/devtools/page/A",
		}},
		{"nothing to rewrite", `[{"id":"x","url":"about:blank"}]`, testCall(pathForm, "h", false), nil},
		{"not a ws URL", `{"webSocketDebuggerUrl":"http://127.0.0.1:9222/x"}`, testCall(pathForm, "h", false), nil},
		{"not JSON", `<html>`, testCall(pathForm, "h", false), nil},
		{"a number", `42`, testCall(pathForm, "h", false), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, ok := rewriteDevTools([]byte(tc.doc), tc.call)
			if tc.want == nil {
				if ok {
					t.Errorf("rewrote %s into %s", tc.doc, out)
				}
				return
			}
			if !ok {
				t.Fatal("not rewritten")
			}
			var got any
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("%s: %v", out, err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// TestPreviewLocation: a guest's redirect to its own path or to its own
// localhost address stays under the preview; anything else is left alone.
func TestPreviewLocation(t *testing.T) {
	path := testCall("/preview/"+tok, "127.0.0.1:7788", false)
	host := testCall("", tok+".preview.example.com", true)
	for _, tc := range []struct {
		call      *previewCall
		loc, want string
	}{
		{path, "/login?next=/a", "/preview/" + tok + "/login?next=/a"},
		{path, "http://localhost:9222/x/y?z=1", "http://127.0.0.1:7788/preview/" + tok + "/x/y?z=1"},
		{path, "http://127.0.0.1:9222/", "http://127.0.0.1:7788/preview/" + tok + "/"},
		{path, "http://[::1]:9222/a%2Fb", "http://127.0.0.1:7788/preview/" + tok + "/a%2Fb"},
		{path, "http://localhost:9999/other-port", "http://localhost:9999/other-port"},
		{path, "https://example.com/away", "https://example.com/away"},
		{path, "//example.com/away", "//example.com/away"},
		{path, "relative/path", "relative/path"},
		{host, "/login", "/login"},
		{host, "http://localhost:9222/x", "https://" + tok + ".preview.example.com/x"},
	} {
		if got := tc.call.location(tc.loc); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.loc, got, tc.want)
		}
	}
}

// TestPreviewHostToken: only <label>.preview.<domain> (any case, any
// port, a trailing dot) is the host form.
func TestPreviewHostToken(t *testing.T) {
	h := &previewHandler{domain: "example.com"}
	for host, want := range map[string]string{
		tok + ".preview.example.com":       tok,
		"PVW-ABC.Preview.Example.Com:8443": "pvw-abc",
		"x.preview.example.com.":           "x",
		"preview.example.com":              "",
		"a.b.preview.example.com":          "",
		"x.preview.example.com.evil.test":  "",
		"x.preview.example.org":            "",
		"x.previewexample.com":             "",
		"[::1]:7788":                       "",
		"":                                 "",
	} {
		got, ok := h.hostToken(host)
		if got != want || ok != (want != "") {
			t.Errorf("%q: %q %v, want %q", host, got, ok, want)
		}
	}
	if _, ok := (&previewHandler{}).hostToken(tok + ".preview.example.com"); ok {
		t.Error("the host form without a domain")
	}
}

// FuzzRewriteDevTools: any document either passes unchanged or becomes
// valid JSON; nothing panics.
func FuzzRewriteDevTools(f *testing.F) {
	f.Add([]byte(`[{"webSocketDebuggerUrl":"ws://127.0.0.1:9222/devtools/page/A","devtoolsFrontendUrl":"/devtools/inspector.html?ws=127.0.0.1:9222/devtools/page/A"}]`))
	f.Add([]byte(`{"webSocketDebuggerUrl":"ws://[::1]:9222/x?y=%zz"}`))
	f.Add([]byte(`{"devtoolsFrontendUrl":"?ws=&wss=a/b&ws=%"}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		for _, c := range []*previewCall{testCall("/preview/"+tok, "h:1", false), testCall("", "x.preview.e", true)} {
			out, ok := rewriteDevTools(doc, c)
			if ok && !json.Valid(out) {
				t.Errorf("%q became invalid JSON %q", doc, out)
			}
		}
	})
}
