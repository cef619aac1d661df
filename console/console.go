// Package console is Paddock's web console: a few static files (HTML,
// JavaScript modules, CSS) embedded in the binary and served at /console/
// by the daemon, in front of hostd/api like /mcp (hostd/daemon). The page
// is a client of the public API: every action it takes is an API call
// carrying the bearer token the user signed in with, so the API's access
// checks, tenant scoping, limits and ledger apply to it as to any client.
//
// The files hold no secret and need no token to fetch. Every answer
// carries a strict Content-Security-Policy (CSP): scripts and styles only
// from the console's own files, no inline script or style, no eval, no
// framing, no forms posting anywhere. docs/console.md explains the
// choices, among them where the token lives in the browser.
package console

import (
	"bytes"
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed static
var static embed.FS

// Path is where the console is served; Path without its last slash
// redirects to it.
const Path = "/console/"

// CSP is the Content-Security-Policy of every console answer. It allows
// the console's own scripts, styles, images and fonts, API calls and
// WebSockets to its own origin, and nothing else: no inline script or
// style, no eval, no plugin, no frame of it anywhere, no form target.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// MaxPathBytes bounds the request path the console looks up.
const MaxPathBytes = 512

// Files returns the console's files, rooted at the static directory.
func Files() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embed holds static: only a broken build gets here
	}
	return sub
}

// Handler serves the console's files under Path. Only GET and HEAD are
// answered (405 otherwise); a directory or a missing file is 404. Every
// answer, errors included, carries the CSP and the other safety headers.
func Handler() http.Handler {
	files := Files()
	started := time.Now()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cache-Control", "no-cache")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			plain(w, http.StatusMethodNotAllowed, "console: only GET and HEAD")
			return
		}
		p := r.URL.Path
		if p == strings.TrimSuffix(Path, "/") {
			http.Redirect(w, r, Path, http.StatusMovedPermanently)
			return
		}
		if len(p) > MaxPathBytes || !strings.HasPrefix(p, Path) {
			plain(w, http.StatusNotFound, "console: no such file")
			return
		}
		name := strings.TrimPrefix(p, Path)
		if name == "" {
			name = "index.html"
		}
		if path.Clean("/"+name) != "/"+name || !fs.ValidPath(name) {
			plain(w, http.StatusNotFound, "console: no such file")
			return
		}
		b, err := fs.ReadFile(files, name)
		if err != nil { // a directory or a missing file
			plain(w, http.StatusNotFound, "console: no such file")
			return
		}
		ct, ok := types[path.Ext(name)]
		if !ok {
			ct = "application/octet-stream"
		}
		h.Set("Content-Type", ct)
		http.ServeContent(w, r, name, started, bytes.NewReader(b))
	})
}

// types are the content types of the console's files, by extension: a
// fixed table, so the answer does not depend on the host's mime.types.
var types = map[string]string{
	".html":  "text/html; charset=utf-8",
	".js":    "text/javascript; charset=utf-8",
	".css":   "text/css; charset=utf-8",
	".json":  "application/json",
	".png":   "image/png",
	".svg":   "image/svg+xml",
	".woff2": "font/woff2",
	".txt":   "text/plain; charset=utf-8",
}

func plain(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	w.Write([]byte(msg + "\n"))
}
