package console

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// TestHeadersOnEveryAnswer: files, the index, the redirect, a missing
// file, a bad path and a refused method all carry the CSP and the other
// safety headers.
func TestHeadersOnEveryAnswer(t *testing.T) {
	h := Handler()
	for _, c := range []struct {
		method, path string
		status       int
		ctype        string
	}{
		{"GET", "/console/", 200, "text/html; charset=utf-8"},
		{"GET", "/console/index.html", 200, "text/html; charset=utf-8"},
		{"GET", "/console/app.js", 200, "text/javascript; charset=utf-8"},
		{"HEAD", "/console/style.css", 200, "text/css; charset=utf-8"},
		{"GET", "/console", 301, ""},
		{"GET", "/console/nope.js", 404, "text/plain; charset=utf-8"},
		{"GET", "/console/vendor", 404, "text/plain; charset=utf-8"},
		{"GET", "/console/../go.mod", 404, "text/plain; charset=utf-8"},
		{"GET", "/console/./app.js", 404, "text/plain; charset=utf-8"},
		{"GET", "/console/" + strings.Repeat("a", MaxPathBytes), 404, "text/plain; charset=utf-8"},
		{"POST", "/console/", 405, "text/plain; charset=utf-8"},
		{"PUT", "/console/app.js", 405, "text/plain; charset=utf-8"},
	} {
		r := httptest.NewRequest(c.method, "/", nil)
		r.URL.Path = c.path
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		got := w.Result()
		if got.StatusCode != c.status {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, got.StatusCode, c.status)
		}
		if c.ctype != "" && got.Header.Get("Content-Type") != c.ctype {
			t.Errorf("%s %s: Content-Type %q, want %q", c.method, c.path, got.Header.Get("Content-Type"), c.ctype)
		}
		for k, want := range map[string]string{
			"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
			"Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY",
		} {
			if v := got.Header.Get(k); v != want {
				t.Errorf("%s %s: %s %q, want %q", c.method, c.path, k, v, want)
			}
		}
		if got.Header.Get("Set-Cookie") != "" {
			t.Errorf("%s %s sets a cookie", c.method, c.path)
		}
	}
}

// TestCSPIsStrict: the policy allows no inline script or style, no eval,
// nothing from another origin, and no framing.
func TestCSPIsStrict(t *testing.T) {
	for _, bad := range []string{"unsafe-inline", "unsafe-eval", "unsafe-hashes", "wasm-unsafe-eval", "*", "http:", "https:", "blob:"} {
		if strings.Contains(CSP, bad) {
			t.Errorf("the CSP allows %s: %s", bad, CSP)
		}
	}
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "base-uri 'none'", "form-action 'none'", "connect-src 'self'"} {
		if !strings.Contains(CSP, want) {
			t.Errorf("the CSP lacks %s: %s", want, CSP)
		}
	}
}

var (
	scriptTag   = regexp.MustCompile(`(?is)<script\b([^>]*)>(.*?)</script\s*>`)
	styleTag    = regexp.MustCompile(`(?is)<style\b`)
	handlerAttr = regexp.MustCompile(`(?is)<[a-z][^>]*\son[a-z]+\s*=`)
	styleAttr   = regexp.MustCompile(`(?is)<[a-z][^>]*\sstyle\s*=`)
	jsURL       = regexp.MustCompile(`(?i)javascript:`)
	srcAttr     = regexp.MustCompile(`(?i)\ssrc\s*=\s*"([^"]+)"`)
)

// TestNoInlineScript: every HTML file of the console loads its scripts
// from files of its own (each of which exists) and has no inline script,
// event handler attribute, style element or attribute, or javascript:
// URL. The CSP would block them in the browser; this catches them before.
func TestNoInlineScript(t *testing.T) {
	files := Files()
	n := 0
	err := fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".html") {
			return err
		}
		n++
		b, err := fs.ReadFile(files, p)
		if err != nil {
			return err
		}
		checkHTML(t.Errorf, p, string(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no HTML file was checked")
	}
}

func checkHTML(errorf func(string, ...any), name, html string) {
	scripts := scriptTag.FindAllStringSubmatch(html, -1)
	if len(scripts) == 0 && name == "index.html" {
		errorf("%s loads no script", name)
	}
	for _, m := range scripts {
		if strings.TrimSpace(m[2]) != "" {
			errorf("%s has an inline script: %.60q", name, m[2])
		}
		src := srcAttr.FindStringSubmatch(m[1])
		if src == nil {
			errorf("%s has a script with no src: %q", name, m[0])
			continue
		}
		if strings.Contains(src[1], ":") || strings.HasPrefix(src[1], "//") {
			errorf("%s loads a script from elsewhere: %s", name, src[1])
		} else if _, err := fs.Stat(Files(), src[1]); err != nil {
			errorf("%s loads %s, which is not a console file", name, src[1])
		}
	}
	for what, re := range map[string]*regexp.Regexp{"a style element": styleTag, "an event handler attribute": handlerAttr, "a style attribute": styleAttr, "a javascript: URL": jsURL} {
		if re.MatchString(html) {
			errorf("%s has %s", name, what)
		}
	}
}

// TestCheckHTMLCatches: the inline checks above see what they look for
// (each would pass vacuously on a regexp that matched nothing).
func TestCheckHTMLCatches(t *testing.T) {
	for _, html := range []string{
		`<script>alert(1)</script>`,
		`<script src="app.js">x()</script>`,
		`<script type="module"></script>`,
		`<script src="https://cdn.example/x.js"></script>`,
		`<script src="missing.js"></script>`,
		`<style>p{}</style>`,
		`<p onclick="x()">`,
		`<p style="color:red">`,
		`<a href="javascript:x()">`,
	} {
		caught := 0
		checkHTML(func(string, ...any) { caught++ }, "probe.html", html)
		if caught == 0 {
			t.Errorf("the inline checks let %q through", html)
		}
	}
}

// TestServesOnlyGETAndHEAD: a POST body is never read (405 first).
func TestServesOnlyGETAndHEAD(t *testing.T) {
	r := httptest.NewRequest("POST", "/console/", strings.NewReader(strings.Repeat("x", 1<<20)))
	w := httptest.NewRecorder()
	Handler().ServeHTTP(w, r)
	if w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != "GET, HEAD" {
		t.Errorf("POST: %d Allow %q", w.Code, w.Header().Get("Allow"))
	}
}
