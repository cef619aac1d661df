package limits

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"paddock.dev/paddock/hostd/api/routes"
)

// concrete is a request path for a route's pattern.
func concrete(path string) string {
	return strings.NewReplacer("{id}", "ses-1", "{job}", "job-1", "{upload}", "upl-1", "{approval}", "apr-1",
		"{token}", "tok-1", "{grant}", "gr-1", "{preview}", "prv-1").Replace(path)
}

// zeros is a reader of n zero bytes that keeps no buffer.
type zeros struct{ n int64 }

func (z *zeros) Read(p []byte) (int, error) {
	if z.n == 0 {
		return 0, io.EOF
	}
	k := min(int64(len(p)), z.n)
	clear(p[:k])
	z.n -= k
	return int(k), nil
}

// send runs the module for a request to rt with a body of n bytes whose
// length is known up front (Content-Length) or not (chunked), and reports
// the status: 200 when hostd (next) read the whole body, else the
// module's or the read's error status.
func send(t *testing.T, rt routes.Route, n int64, known bool) int {
	t.Helper()
	r := httptest.NewRequest(rt.Method(), concrete(rt.Path()), io.NopCloser(&zeros{n}))
	r.ContentLength = -1
	if known {
		r.ContentLength = n
	}
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		got, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			return err
		}
		if got != n {
			t.Errorf("%s: hostd got %d bytes of %d", rt.Pattern, got, n)
		}
		return nil
	})
	err := Limits{}.ServeHTTP(httptest.NewRecorder(), r, next)
	if err == nil {
		return http.StatusOK
	}
	var he caddyhttp.HandlerError
	if errors.As(err, &he) {
		return he.StatusCode
	}
	t.Fatalf("%s: %v", rt.Pattern, err)
	return 0
}

// TestBodyLimitsFollowTheTable: for every route of hostd's table (and
// /mcp, served in front of hostd/api), a body
// of the gateway's limit for it gets through whole and one byte more is
// refused with 413, whether its length is sent up front or not; the
// gateway's limit is never below hostd's (so hostd's own 413 answers a
// body just over its limit) and has at most 2 MiB of room above it.
func TestBodyLimitsFollowTheTable(t *testing.T) {
	// The rows served in front of hostd/api (/mcp) count as well.
	rows := append(routes.All(), routes.Outside()...)
	for _, rt := range rows {
		r := httptest.NewRequest(rt.Method(), concrete(rt.Path()), nil)
		edge := BodyLimit(r)
		if edge != routes.EdgeLimit(rt.BodyLimit) {
			t.Errorf("%s: the gateway's limit is %d, the table's row %d gives %d", rt.Pattern, edge, rt.BodyLimit, routes.EdgeLimit(rt.BodyLimit))
		}
		if edge < rt.BodyLimit || edge > rt.BodyLimit+2*routes.MiB {
			t.Errorf("%s: the gateway's limit %d is not hostd's %d plus room", rt.Pattern, edge, rt.BodyLimit)
		}
	}
	// Sending the bodies costs time: one route of each limit.
	seen := map[int64]bool{}
	for _, rt := range rows {
		if seen[rt.BodyLimit] || rt.Method() == http.MethodGet {
			continue
		}
		seen[rt.BodyLimit] = true
		edge := routes.EdgeLimit(rt.BodyLimit)
		for _, known := range []bool{true, false} {
			if got := send(t, rt, edge, known); got != http.StatusOK {
				t.Errorf("%s: a body of the limit (%d, length known %v): %d", rt.Pattern, edge, known, got)
			}
			if got := send(t, rt, edge+1, known); got != http.StatusRequestEntityTooLarge {
				t.Errorf("%s: a body one byte over the limit (%d, length known %v): %d, want 413", rt.Pattern, edge+1, known, got)
			}
		}
	}
	if len(seen) < 4 {
		t.Errorf("only %d distinct body limits were sent: %v", len(seen), seen)
	}
}

// TestBodyLimitFigures pins the limits the gateway has always had at the
// edge (docs/gateway.md lists them), now worked out from the table.
func TestBodyLimitFigures(t *testing.T) {
	for _, c := range []struct {
		method, path string
		want         int64
	}{
		{"POST", "/v1/agents/sessions/ses-1/exec", 2 << 20},
		{"PUT", "/v1/agents/sessions/ses-1/uploads/upl-1", 5 << 20},
		{"PUT", "/v1/agents/sessions/ses-1/files/content", 12 << 20},
		{"POST", "/v1/sandboxes/sbx-1/fs/write", 44 << 20},
		{"POST", "/v1/nowhere", 2 << 20},                              // no route: a JSON route's
		{"PUT", "/v1/agents/sessions/ses-1/uploads/upl-1/x", 2 << 20}, // not the upload route
	} {
		if got := BodyLimit(httptest.NewRequest(c.method, c.path, nil)); got != c.want {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, got, c.want)
		}
	}
}
