package auth

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/google/go-cmp/cmp"

	"paddock.dev/paddock/hostd/api/routes"
)

func TestUnmarshalCaddyfile(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Auth
		err  string
	}{
		{"paddock_auth /run/h.sock", Auth{HostdSocket: "/run/h.sock"}, ""},
		{"paddock_auth {\n hostd_socket /s\n cache_ttl 2s\n timeout 1s\n}", Auth{HostdSocket: "/s", CacheTTL: caddy.Duration(2 * time.Second), Timeout: caddy.Duration(time.Second)}, ""},
		{"paddock_auth /a /b", Auth{}, "wrong argument count"},
		{"paddock_auth {\n cache_ttl soon\n}", Auth{}, "cache_ttl"},
		{"paddock_auth {\n verify_locally\n}", Auth{}, "unknown setting"},
	} {
		var got Auth
		err := got.UnmarshalCaddyfile(caddyfile.NewTestDispenser(c.in))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if diff := cmp.Diff(c.want, got, cmp.AllowUnexported(Auth{}), cmp.Comparer(func(a, b *http.Client) bool { return a == b })); diff != "" {
			t.Errorf("%q (-want +got):\n%s", c.in, diff)
		}
	}
	if err := (&Auth{}).Validate(); err == nil {
		t.Error("a module without hostd_socket validated")
	}
}

func TestStripIdentity(t *testing.T) {
	h := http.Header{}
	for _, k := range []string{"Paddock-Identity", "Paddock-Tenant", "X-Paddock-Actor", "X-Forwarded-User", "Remote-User", "X-Auth-Request-Email", "Authorization", "Idempotency-Key", "If-Match"} {
		h.Set(k, "v")
	}
	StripIdentity(h)
	var left []string
	for k := range h {
		left = append(left, k)
	}
	if diff := cmp.Diff([]string{"Authorization", "Idempotency-Key", "If-Match"}, left, cmpSorted); diff != "" {
		t.Errorf("left after stripping (-want +got):\n%s", diff)
	}
}

var cmpSorted = cmp.Transformer("sort", func(in []string) []string {
	out := append([]string(nil), in...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
})

func TestIsTicketRequest(t *testing.T) {
	for _, c := range []struct {
		method, target, authz string
		want                  bool
	}{
		{"GET", "/v1/agents/sessions/ses-1/pty?ticket=abc&cols=80", "", true},
		{"GET", "/v1/agents/sessions/ses-1/pty?ticket=abc", "Bearer x", false}, // a token: checked as one
		{"GET", "/v1/agents/sessions/ses-1/pty", "", false},
		{"GET", "/v1/agents/sessions/ses-1/pty?ticket=", "", false},
		{"POST", "/v1/agents/sessions/ses-1/pty?ticket=abc", "", false},
		{"GET", "/v1/agents/sessions/ses-1/exec?ticket=abc", "", false},
		{"GET", "/v1/agents/sessions/ses-1/pty/x?ticket=abc", "", false},
		{"GET", "/v1/agents/sessions/a/b/pty?ticket=abc", "", false},
		{"GET", "/v1/agents/sessions//pty?ticket=abc", "", false},
		{"HEAD", "/v1/agents/sessions/ses-1/pty?ticket=abc", "", false},
		{"POST", "/v1/agents/sessions/ses-1/pty-ticket?ticket=abc", "", false},
		{"GET", "/v1/agents/sessions/ses-1/events?ticket=abc", "", false},
	} {
		r := httptest.NewRequest(c.method, c.target, nil)
		if c.authz != "" {
			r.Header.Set("Authorization", c.authz)
		}
		if got := IsTicketRequest(r); got != c.want {
			t.Errorf("%s %s (Authorization %q): %v, want %v", c.method, c.target, c.authz, got, c.want)
		}
	}
	// Every route hostd's table marks as taking a ticket does at the edge,
	// and no other: the gateway has no list of its own.
	tickets := 0
	for _, rt := range routes.All() {
		path := strings.NewReplacer("{id}", "ses-1", "{job}", "job-1", "{upload}", "upl-1", "{approval}", "apr-1",
			"{token}", "tok-1", "{grant}", "gr-1", "{preview}", "prv-1").Replace(rt.Path())
		r := httptest.NewRequest(rt.Method(), path+"?ticket=abc", nil)
		if got := IsTicketRequest(r); got != rt.Ticket {
			t.Errorf("%s with a ticket: ticket request %v, the table says %v", rt.Pattern, got, rt.Ticket)
		}
		if rt.Ticket {
			tickets++
		}
	}
	if tickets == 0 {
		t.Error("no route of the table takes a ticket: the terminal's has lost its mark")
	}
}

// TestServeHTTP runs the module against a stand-in hostd on a unix socket
// that knows one token: 401 in hostd's shape at the edge, the identity
// header set for hostd, and the cache sparing hostd repeated questions.
func TestServeHTTP(t *testing.T) {
	dir, err := os.MkdirTemp("", "pga")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "h.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var asked atomic.Int32
	hostd := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		if r.Header.Get("Authorization") != "Bearer good" {
			w.WriteHeader(401)
			w.Write([]byte(`{"error": "hostd says no"}`))
			return
		}
		json.NewEncoder(w).Encode(map[string]string{"kind": "tenant", "tenant": "acme"})
	})}
	go hostd.Serve(ln)
	defer hostd.Close()

	a := New(sock)
	a.CacheTTL = caddy.Duration(time.Minute)
	ctx, cancel := caddy.NewContext(caddy.Context{Context: t.Context()})
	defer cancel()
	if err := a.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	var seen http.Header
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		seen = r.Header.Clone()
		w.WriteHeader(204)
		return nil
	})
	call := func(authz string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/v1/agents/sessions", nil)
		r.Header.Set("Paddock-Identity", "admin")
		if authz != "" {
			r.Header.Set("Authorization", authz)
		}
		w := httptest.NewRecorder()
		seen = nil
		if err := a.ServeHTTP(w, r, next); err != nil {
			t.Fatal(err)
		}
		return w
	}
	if w := call(""); w.Code != 401 || seen != nil || !strings.Contains(w.Body.String(), `"error"`) || errCode(w) != "unauthenticated" {
		t.Errorf("no token: %d %q", w.Code, w.Body)
	}
	if w := call("Bearer bad"); w.Code != 401 || w.Body.String() != `{"error": "hostd says no"}` || seen != nil {
		t.Errorf("a bad token: %d %q, want hostd's own answer", w.Code, w.Body)
	}
	for range 3 {
		if w := call("Bearer good"); w.Code != 204 || seen.Get(IdentityHeader) != "tenant:acme" || seen.Get("Authorization") != "Bearer good" {
			t.Errorf("a good token: %d, hostd would see %v", w.Code, seen)
		}
	}
	if n := asked.Load(); n != 2 { // none for no token, one for the bad one, one for the good one (then cached)
		t.Errorf("hostd was asked %d times, want 2", n)
	}
	hostd.Close()
	if w := call("Bearer other"); w.Code != http.StatusBadGateway || errCode(w) != "bad_gateway" {
		t.Errorf("hostd gone: %d %q", w.Code, w.Body)
	}
}

// errCode is the code of an error body, "" when it has none.
func errCode(w *httptest.ResponseRecorder) string {
	var body struct {
		Code string `json:"code"`
	}
	json.Unmarshal(w.Body.Bytes(), &body)
	return body.Code
}
