// Package limits is the gateway's per-route request body limit, the
// Caddy module http.handlers.paddock_limits. It finds the route a request
// is for in hostd's route table (hostd/api/routes), matching it exactly
// as hostd's own router does, and caps the body at that row's limit plus
// room (routes.EdgeLimit): a body hostd would take always gets through,
// and one far over it is refused with 413 at the edge, before a byte of
// it crosses to hostd. The limits are the table's, so none is written in
// a Caddyfile and none can drift from hostd's.
//
// A request no row matches (hostd answers it 404) gets what a JSON route
// gets (routes.DefaultEdgeLimit).
package limits

import (
	"errors"
	"io"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"paddock.dev/paddock/hostd/api/routes"
)

func init() {
	caddy.RegisterModule(Limits{})
}

// Limits is the http.handlers.paddock_limits module. It has no settings:
// every limit comes from the route table.
type Limits struct{}

// CaddyModule implements caddy.Module.
func (Limits) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.paddock_limits",
		New: func() caddy.Module { return new(Limits) },
	}
}

// BodyLimit is the largest body the gateway lets through for r.
func BodyLimit(r *http.Request) int64 {
	if rt, ok := routes.Match(r); ok {
		return routes.EdgeLimit(rt.BodyLimit)
	}
	return routes.DefaultEdgeLimit
}

// ServeHTTP implements caddyhttp.MiddlewareHandler, as Caddy's own
// request_body does: a body that says it is too large is refused at once,
// and one that turns out too large while it is read fails the read with
// 413.
func (Limits) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if r.Body == nil {
		return next.ServeHTTP(w, r)
	}
	n := BodyLimit(r)
	r.Body = tooLarge{http.MaxBytesReader(w, r.Body, n)}
	if r.ContentLength > n {
		return caddyhttp.Error(http.StatusRequestEntityTooLarge, &http.MaxBytesError{Limit: n})
	}
	return next.ServeHTTP(w, r)
}

// tooLarge makes a read past the limit an error with status 413, so the
// reverse proxy and the error routes answer with it.
type tooLarge struct{ io.ReadCloser }

func (t tooLarge) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		err = caddyhttp.Error(http.StatusRequestEntityTooLarge, err)
	}
	return n, err
}

// Interface guard.
var _ caddyhttp.MiddlewareHandler = Limits{}
