// Package preview is the gateway's side of preview URLs, the Caddy module
// http.handlers.paddock_preview. It sits in front of the reverse proxy to
// hostd on the preview routes (/preview/{token}/… and the host form
// <token>.preview.<domain>) and makes sure nothing of the caller's
// identity reaches a guest: Cookie, Authorization, Proxy-Authorization
// and every identity header are removed from the request, and Set-Cookie
// from the answer. No bearer token is asked for: the preview token in the
// URL is the credential, and hostd's preview handler checks it.
//
// hostd sets the answer's safety headers itself; the module adds them at
// the edge when they are missing (defence in depth), so a preview page
// never runs with the gateway's origin privileges: Content-Security-Policy
// sandbox, Referrer-Policy no-referrer, Cache-Control no-store.
package preview

import (
	"io"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"paddock.dev/paddock/gateway/auth"
)

// Safety headers the edge puts on a preview's answer when hostd did not.
const (
	DefaultCSP            = "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads"
	DefaultReferrerPolicy = "no-referrer"
	DefaultCacheControl   = "no-store"
)

// strippedRequestHeaders never reach a guest.
var strippedRequestHeaders = []string{"Cookie", "Authorization", "Proxy-Authorization"}

func init() {
	caddy.RegisterModule(Preview{})
}

// Preview is the http.handlers.paddock_preview module. It has no settings.
type Preview struct{}

// New returns the module.
func New() *Preview { return &Preview{} }

// CaddyModule implements caddy.Module.
func (Preview) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.paddock_preview",
		New: func() caddy.Module { return new(Preview) },
	}
}

// ServeHTTP implements caddyhttp.MiddlewareHandler.
func (p *Preview) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	for _, h := range strippedRequestHeaders {
		r.Header.Del(h)
	}
	auth.StripIdentity(r.Header)
	return next.ServeHTTP(&guardedWriter{ResponseWriterWrapper: &caddyhttp.ResponseWriterWrapper{ResponseWriter: w}}, r)
}

// guardedWriter fixes the answer's headers as they are written.
type guardedWriter struct {
	*caddyhttp.ResponseWriterWrapper
	wroteHeader bool
}

// WriteHeader hardens the final answer (101 Switching Protocols is one:
// nothing follows it on the connection) and strips Set-Cookie from every
// informational answer before it (103 Early Hints and the like), which a
// reverse proxy relays with the upstream's headers.
func (g *guardedWriter) WriteHeader(status int) {
	if !g.wroteHeader {
		switch {
		case status >= 200 || status == http.StatusSwitchingProtocols:
			g.wroteHeader = true
			Harden(g.Header())
		case status >= 100:
			stripResponseHeaders(g.Header())
		}
	}
	g.ResponseWriterWrapper.WriteHeader(status)
}

func (g *guardedWriter) Write(b []byte) (int, error) {
	if !g.wroteHeader {
		g.WriteHeader(http.StatusOK)
	}
	return g.ResponseWriterWrapper.Write(b)
}

func (g *guardedWriter) ReadFrom(r io.Reader) (int64, error) {
	if !g.wroteHeader {
		g.WriteHeader(http.StatusOK)
	}
	return g.ResponseWriterWrapper.ReadFrom(r)
}

// Harden removes Set-Cookie from a preview's answer and adds the safety
// headers it lacks.
func Harden(h http.Header) {
	stripResponseHeaders(h)
	for k, v := range map[string]string{
		"Content-Security-Policy": DefaultCSP,
		"Referrer-Policy":         DefaultReferrerPolicy,
		"Cache-Control":           DefaultCacheControl,
	} {
		if h.Get(k) == "" {
			h.Set(k, v)
		}
	}
}

// stripResponseHeaders removes what a preview's answer may never carry,
// informational or final.
func stripResponseHeaders(h http.Header) {
	h.Del("Set-Cookie")
}

// Interface guards.
var (
	_ caddyhttp.MiddlewareHandler = (*Preview)(nil)
	_ http.ResponseWriter         = (*guardedWriter)(nil)
)
