package routes

import (
	"net/http/httptest"
	"strings"
	"testing"

	"paddock.dev/paddock/hostd/auth"
)

// TestTable: every row is a valid "METHOD /path" pattern with a valid
// access, a positive body limit, and appears once; Lookup finds each.
func TestTable(t *testing.T) {
	seen := map[string]bool{}
	for _, rt := range All() {
		if seen[rt.Pattern] {
			t.Errorf("%s: two rows", rt.Pattern)
		}
		seen[rt.Pattern] = true
		if rt.Method() == "" || !strings.HasPrefix(rt.Path(), "/") {
			t.Errorf("%s: not METHOD /path", rt.Pattern)
		}
		if !rt.Access.Valid() {
			t.Errorf("%s: access %q is neither a class nor a grantable op", rt.Pattern, rt.Access)
		}
		if rt.BodyLimit <= 0 {
			t.Errorf("%s: body limit %d", rt.Pattern, rt.BodyLimit)
		}
		if rt.Access == auth.AccessPublic && (rt.Idempotent || rt.Ticket) {
			t.Errorf("%s: a public route is neither idempotent-keyed nor ticketed (it has no caller)", rt.Pattern)
		}
		if got, ok := Lookup(rt.Pattern); !ok || got != rt {
			t.Errorf("Lookup(%s) = %+v, %v", rt.Pattern, got, ok)
		}
	}
	for _, rt := range Outside() {
		if got, ok := Lookup(rt.Pattern); !ok || got != rt || seen[rt.Pattern] || rt.BodyLimit <= 0 || !rt.Access.Valid() {
			t.Errorf("outside row %+v: Lookup %+v %v, or also a row of All, or no limit or access", rt, got, ok)
		}
	}
	if _, ok := Lookup("GET /v1/nowhere"); ok {
		t.Error("Lookup found a pattern that is no row")
	}
}

// TestMatch: requests find their row as hostd's router finds it; paths
// that are not clean, or that no row has, find none.
func TestMatch(t *testing.T) {
	for _, c := range []struct {
		method, target, want string // want "": no row
	}{
		{"GET", "/v1/agents/sessions/ses-1/pty?ticket=x", "GET /v1/agents/sessions/{id}/pty"},
		{"HEAD", "/v1/agents/sessions/ses-1", "GET /v1/agents/sessions/{id}"},
		{"PUT", "/v1/agents/sessions/ses-1/uploads/upl-1", "PUT /v1/agents/sessions/{id}/uploads/{upload}"},
		{"POST", "/v1/sandboxes/sbx-1/fs/write", "POST /v1/sandboxes/{id}/fs/write"},
		{"GET", "/healthz", "GET /healthz"},
		{"POST", "/mcp", "POST /mcp"},
		{"GET", "/mcp", "GET /mcp"},
		{"DELETE", "/mcp", "DELETE /mcp"},
		{"POST", "/mcp/x", ""},
		{"GET", "/console", "GET /console"},
		{"GET", "/console/", "GET /console/"},
		{"GET", "/console/app.js", "GET /console/"},
		{"HEAD", "/console/vendor/x.js", "GET /console/"},
		{"POST", "/console/", ""},
		{"GET", "/console/../v1/whoami", ""},
		{"GET", "/v1/agents/sessions//pty", ""},
		{"GET", "/v1/agents/sessions/x/../ses-1/pty", ""},
		{"GET", "/v1/agents/sessions/./pty", ""},
		{"DELETE", "/v1/agents/sessions/ses-1/pty", ""},
		{"GET", "/v1/agents/sessions/ses-1/pty/x", ""},
		{"GET", "/preview/tok/", ""},
		{"GET", "/", ""},
	} {
		r := httptest.NewRequest(c.method, "/", nil)
		r.URL.Path, _, _ = strings.Cut(c.target, "?")
		rt, ok := Match(r)
		if ok != (c.want != "") || rt.Pattern != c.want {
			t.Errorf("%s %s: %q (%v), want %q", c.method, c.target, rt.Pattern, ok, c.want)
		}
	}
}

// TestEdgeLimit: a whole MiB of room at least, never below the limit.
func TestEdgeLimit(t *testing.T) {
	for n, want := range map[int64]int64{1: 2 * MiB, MiB: 2 * MiB, MiB + 1: 3 * MiB, 4 * MiB: 5 * MiB} {
		if got := EdgeLimit(n); got != want {
			t.Errorf("EdgeLimit(%d) = %d, want %d", n, got, want)
		}
	}
	if DefaultEdgeLimit != EdgeLimit(JSONBody) {
		t.Errorf("DefaultEdgeLimit %d, EdgeLimit(JSONBody) %d", DefaultEdgeLimit, EdgeLimit(JSONBody))
	}
}

// TestMCPBody: /mcp takes a request carrying the largest file write as
// base64 (with room for the JSON-RPC), and only /mcp's POST is that
// large: its GET and DELETE keep the JSON limit.
func TestMCPBody(t *testing.T) {
	rt, ok := Lookup("POST /mcp")
	if b64 := int64((MCPWriteBytes + 2) / 3 * 4); !ok || rt.BodyLimit < b64+4096 || rt.BodyLimit > b64+MiB {
		t.Errorf("POST /mcp: %+v, want a limit just above %d", rt, b64)
	}
	for _, p := range []string{"GET /mcp", "DELETE /mcp"} {
		if rt, ok := Lookup(p); !ok || rt.BodyLimit != JSONBody {
			t.Errorf("%s: %+v, want the JSON limit", p, rt)
		}
	}
}
