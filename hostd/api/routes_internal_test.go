package api

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"paddock.dev/paddock/hostd/api/routes"
	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/sandboxes"
	"paddock.dev/paddock/hostd/workspace"
)

// TestRouteTableBound: every row of the route table has a handler and
// every handler has a row; bindRoutes names what is missing either way
// (New panics on it, so no daemon starts with a route half added).
func TestRouteTableBound(t *testing.T) {
	s := New(nil, sha256.Sum256(nil), nil)
	hs := s.handlers()
	if _, err := bindRoutes(routes.All(), hs); err != nil {
		t.Fatal(err)
	}
	if len(hs) != len(routes.All()) {
		t.Errorf("%d handlers for %d rows", len(hs), len(routes.All()))
	}
	// A row without a handler, and a handler without a row, are named.
	missing := map[string]handler{}
	for p, h := range hs {
		if p != "GET /v1/whoami" {
			missing[p] = h
		}
	}
	missing["GET /v1/nowhere"] = hs["GET /healthz"]
	_, err := bindRoutes(routes.All(), missing)
	if err == nil || !strings.Contains(err.Error(), "route GET /v1/whoami (hostd/api/routes) has no handler") ||
		!strings.Contains(err.Error(), "handler for GET /v1/nowhere has no row") {
		t.Errorf("bindRoutes with a row unbound and a stray handler: %v", err)
	}
	// The mux serves exactly the rows.
	if got, want := len(s.Routes()), len(routes.All()); got != want {
		t.Errorf("Routes() has %d patterns, the table %d", got, want)
	}
}

// TestRouteBodyLimits holds the table's body limits to the limits the
// session manager and the guest enforce behind them, and checks that
// decode, the upload chunk and the Idempotency-Key reader use the limit of
// the route the request came in on.
func TestRouteBodyLimits(t *testing.T) {
	for _, c := range []struct {
		pattern string
		want    int64
	}{
		{"PUT /v1/agents/sessions/{id}/uploads/{upload}", workspace.MaxUploadChunk},
		{"PUT /v1/agents/sessions/{id}/files/content", (workspace.MaxFileWriteBytes/3+1)*4 + 4096},
		{"POST /v1/sandboxes/{id}/fs/write", (sandboxes.MaxSandboxFileBytes/3+1)*4 + 64<<10},
		{"POST /v1/agents/sessions/{id}/exec", MaxBodyBytes},
		{"POST /v1/sandboxes", MaxBodyBytes},
	} {
		rt, ok := routes.Lookup(c.pattern)
		if !ok || rt.BodyLimit != c.want {
			t.Errorf("%s: row %+v, want a body limit of %d", c.pattern, rt, c.want)
		}
	}
	// A body of the row's limit decodes; one byte more is 413.
	for _, rt := range routes.All() {
		for _, n := range []int64{rt.BodyLimit, rt.BodyLimit + 1} {
			body := `{"path":"` + strings.Repeat("a", int(n)-len(`{"path":""}`)) + `"}`
			r := httptest.NewRequest(rt.Method(), "/", strings.NewReader(body))
			r.Pattern = rt.Pattern
			var v struct {
				Path string `json:"path"`
			}
			err := decode(nil, r, &v)
			if tooLarge := errors.Is(err, errTooLarge); tooLarge != (n > rt.BodyLimit) {
				t.Errorf("%s: a body of %d bytes (limit %d): %v", rt.Pattern, n, rt.BodyLimit, err)
			}
		}
	}
}

// TestHandlersNeedCaller calls every non-public route's handler, wrapped
// as its row says but without the caller check in front, with no caller
// in the context: each answers 401 and the handler does not run. Nothing
// acts for nobody, nor for the admin by default.
func TestHandlersNeedCaller(t *testing.T) {
	s := New(nil, sha256.Sum256(nil), nil)
	for _, rt := range routes.All() {
		if rt.Access == auth.AccessPublic {
			continue
		}
		ran := false
		h := s.guarded(rt, func(w http.ResponseWriter, r *http.Request) error { ran = true; return nil })
		path := strings.NewReplacer("{id}", "ses-0123456789abcdef", "{job}", "job-1", "{upload}", "upl-1",
			"{approval}", "apr-1", "{token}", "tok-1", "{grant}", "gr-1", "{preview}", "prv-1").Replace(rt.Path())
		r := httptest.NewRequest(rt.Method(), path, strings.NewReader("{}"))
		r.Pattern = rt.Pattern
		err := h(httptest.NewRecorder(), r)
		if !errors.Is(err, errUnauthorized) || ran {
			t.Errorf("%s with no caller: %v (handler ran: %v), want 401 without running", rt.Pattern, err, ran)
		}
		// With a caller, the same wrapping lets the handler run.
		ran = false
		r = r.WithContext(auth.WithIdentity(context.Background(), auth.Identity{Kind: auth.KindAdmin}))
		if err := h(httptest.NewRecorder(), r); err != nil || !ran {
			t.Errorf("%s as the admin: %v (handler ran: %v)", rt.Pattern, err, ran)
		}
	}
}

// TestWhoamiNeedsCaller: whoami with no caller in the context is 401,
// not a blank identity.
func TestWhoamiNeedsCaller(t *testing.T) {
	s := New(nil, sha256.Sum256(nil), nil)
	w := httptest.NewRecorder()
	err := s.whoami(w, httptest.NewRequest("GET", "/v1/whoami", nil))
	if !errors.Is(err, errUnauthorized) || w.Body.Len() != 0 {
		t.Errorf("whoami with no caller: %v, body %q", err, w.Body.String())
	}
}
