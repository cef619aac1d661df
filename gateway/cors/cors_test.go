package cors

import (
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/google/go-cmp/cmp"
)

func TestParseOrigin(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{"https://app.example.com", "https://app.example.com", ""},
		{"HTTPS://App.Example.COM", "https://app.example.com", ""},
		{"https://app.example.com:443", "https://app.example.com", ""}, // a browser drops the default port
		{"http://localhost:80", "http://localhost", ""},
		{"http://127.0.0.1:5173", "http://127.0.0.1:5173", ""},
		{"https://app.example.com:80", "https://app.example.com:80", ""},
		{"https://[::1]:8443", "https://[::1]:8443", ""},
		{"https://[0:0::1]", "https://[::1]", ""},
		{"https://xn--bcher-kva.example", "https://xn--bcher-kva.example", ""},

		{"*", "", "no wildcards"},
		{"https://*.example.com", "", "no wildcards"},
		{"null", "", "null"},
		{"NULL", "", "null"},
		{"", "", "want scheme://host"},
		{"app.example.com", "", "want scheme://host"},
		{"ftp://app.example.com", "", "https or http"},
		{"file://", "", "https or http"},
		{"https://app.example.com/", "", "no path"},
		{"https://app.example.com/app", "", "no path"},
		{"https://app.example.com?x=1", "", "no path"},
		{"https://user@app.example.com", "", "no path"},
		{"https://app.example.com:", "", "no port after it"},
		{"https://app.example.com:0", "", "1 to 65535"},
		{"https://app.example.com:65536", "", "1 to 65535"},
		{"https://app.example.com:08443", "", "1 to 65535"},
		{"https://app example.com", "", "printable ASCII"},
		{"https://bücher.example", "", "xn--"},
		{"https://app_x.example.com", "", "host name or an IP"},
		{"https://-app.example.com", "", "host name or an IP"},
		{"https://[fe80::1%25eth0]", "", "zone"},
		{"https://", "", "want scheme://host"},
		{"https://" + strings.Repeat("a", 300), "", "at most 300"},
	} {
		got, err := ParseOrigin(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %q, error %v; want an error with %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestParseOriginsLimits(t *testing.T) {
	var many []string
	for range MaxOrigins {
		many = append(many, "https://app.example.com")
	}
	got, err := ParseOrigins(many)
	if err != nil || len(got) != 1 {
		t.Errorf("%d copies of one origin: %v, %v; want it once", MaxOrigins, got, err)
	}
	if _, err := ParseOrigins(append(many, "https://b.example.com")); err == nil || !strings.Contains(err.Error(), "at most 64") {
		t.Errorf("%d origins: %v, want refused", MaxOrigins+1, err)
	}
	if _, err := ParseOrigins([]string{"https://a.example", "null"}); err == nil {
		t.Error("a list with null was taken")
	}
}

func TestUnmarshalCaddyfile(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
		err  string
	}{
		{"paddock_cors https://a.example http://localhost:5173", []string{"https://a.example", "http://localhost:5173"}, ""},
		{"paddock_cors https://a.example {\n origins https://b.example https://c.example\n}", []string{"https://a.example", "https://b.example", "https://c.example"}, ""},
		{"paddock_cors", nil, "no origin listed"},
		{"paddock_cors *", nil, "no wildcards"},
		{"paddock_cors {\n origins\n}", nil, "wrong argument count"},
		{"paddock_cors https://a.example {\n credentials true\n}", nil, "unknown setting"},
	} {
		var got CORS
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
		if diff := cmp.Diff(c.want, got.Origins); diff != "" {
			t.Errorf("%q (-want +got):\n%s", c.in, diff)
		}
	}
	// A module loaded from JSON is checked at provision.
	for _, list := range [][]string{nil, {"https://a.example/"}, {"null"}} {
		m := New(list...)
		err := m.Provision(caddy.Context{})
		if err == nil {
			err = m.Validate()
		}
		if err == nil {
			t.Errorf("origins %q were taken", list)
		}
	}
}

// provisioned is the module for origins, ready to serve.
func provisioned(t *testing.T, origins ...string) *CORS {
	t.Helper()
	m := New(origins...)
	if err := m.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	return m
}

// answer is what a request got through the module: next stands for the
// token check and hostd, and answers 401 as paddock_auth does without a
// token.
type answer struct {
	code       int
	header     http.Header
	reachedAPI bool
}

func serve(t *testing.T, m *CORS, method, path string, hdr map[string][]string) answer {
	t.Helper()
	r := httptest.NewRequest(method, "https://paddock.example:7788"+path, nil)
	for k, vs := range hdr {
		for _, v := range vs {
			r.Header.Add(k, v)
		}
	}
	w := httptest.NewRecorder()
	var reached bool
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		reached = true
		w.WriteHeader(http.StatusUnauthorized)
		return nil
	})
	if err := m.ServeHTTP(w, r, next); err != nil {
		t.Fatal(err)
	}
	return answer{w.Code, w.Result().Header, reached}
}

func preflight(origin string) map[string][]string {
	return map[string][]string{
		"Origin": {origin}, "Access-Control-Request-Method": {"POST"},
		"Access-Control-Request-Headers": {"authorization,content-type,idempotency-key"},
	}
}

// corsHeaders are the Access-Control-* headers of h.
func corsHeaders(h http.Header) http.Header {
	out := http.Header{}
	for k, v := range h {
		if strings.HasPrefix(k, "Access-Control-") {
			out[k] = v
		}
	}
	return out
}

func TestServeHTTP(t *testing.T) {
	const app = "https://app.example.com"
	m := provisioned(t, app, "http://localhost:5173")

	t.Run("listed preflight", func(t *testing.T) {
		a := serve(t, m, "OPTIONS", "/v1/agents/sessions", preflight(app))
		if a.code != http.StatusNoContent || a.reachedAPI {
			t.Fatalf("%d, reached the token check %v: want 204 answered at the edge", a.code, a.reachedAPI)
		}
		want := http.Header{
			"Access-Control-Allow-Origin":  {app},
			"Access-Control-Allow-Methods": {"DELETE, GET, POST, PUT"},
			"Access-Control-Allow-Headers": {"Authorization, Content-Type, Idempotency-Key, If-Match, Last-Event-ID, Mcp-Session-Id, Mcp-Protocol-Version"},
			"Access-Control-Max-Age":       {"7200"},
		}
		if diff := cmp.Diff(want, corsHeaders(a.header)); diff != "" {
			t.Errorf("preflight headers (-want +got):\n%s", diff)
		}
		if vary := a.header.Values("Vary"); !slices.Contains(vary, "Origin") {
			t.Errorf("Vary %q lacks Origin", vary)
		}
	})

	t.Run("listed call", func(t *testing.T) {
		a := serve(t, m, "GET", "/v1/whoami", map[string][]string{"Origin": {"http://localhost:5173"}})
		if !a.reachedAPI || a.code != http.StatusUnauthorized {
			t.Fatalf("%d, reached %v: a call goes on to the token check", a.code, a.reachedAPI)
		}
		want := http.Header{
			"Access-Control-Allow-Origin":   {"http://localhost:5173"},
			"Access-Control-Expose-Headers": {"Idempotent-Replayed, Mcp-Session-Id, WWW-Authenticate"},
		}
		if diff := cmp.Diff(want, corsHeaders(a.header)); diff != "" {
			t.Errorf("call headers (-want +got):\n%s", diff)
		}
		if !slices.Contains(a.header.Values("Vary"), "Origin") {
			t.Errorf("Vary %q lacks Origin", a.header.Values("Vary"))
		}
		// An OPTIONS that is not a preflight is a call like any other.
		a = serve(t, m, "OPTIONS", "/v1/whoami", map[string][]string{"Origin": {app}})
		if !a.reachedAPI || a.header.Get("Access-Control-Allow-Methods") != "" {
			t.Errorf("OPTIONS without Access-Control-Request-Method: reached %v, %v", a.reachedAPI, a.header)
		}
	})

	t.Run("no origin", func(t *testing.T) {
		for _, method := range []string{"GET", "OPTIONS"} {
			a := serve(t, m, method, "/v1/whoami", nil)
			if !a.reachedAPI || len(corsHeaders(a.header)) != 0 {
				t.Errorf("%s without Origin: reached %v, CORS headers %v", method, a.reachedAPI, corsHeaders(a.header))
			}
		}
	})

	t.Run("previews and console", func(t *testing.T) {
		for _, p := range []string{"/preview/tok-1/", "/preview/tok-1/api", "/console", "/console/", "/console/app.js"} {
			for _, hdr := range []map[string][]string{preflight(app), {"Origin": {app}}} {
				a := serve(t, m, "OPTIONS", p, hdr)
				if !a.reachedAPI || len(a.header) != 0 {
					t.Errorf("%s: reached %v, headers %v: want it untouched", p, a.reachedAPI, a.header)
				}
			}
		}
	})
}

// TestAttackerOrigins: a page whose origin is not exactly a listed one
// gets no CORS header, its preflight is not answered (it meets the token
// check, which refuses it), and its calls carry nothing that lets the
// browser show it the answer.
func TestAttackerOrigins(t *testing.T) {
	m := provisioned(t, "https://app.example.com", "http://127.0.0.1:5173")
	for _, origin := range []string{
		"null",
		"https://evil.test",
		"https://app.example.com.evil.test", // a listed origin as a prefix
		"https://evil-app.example.com",
		"https://evil.app.example.com", // a subdomain of a listed host
		"https://example.com",
		"https://app.example.co",
		"http://app.example.com",       // a listed host, another scheme
		"https://app.example.com:8443", // a listed host, another port
		"https://app.example.com:443",  // not as a browser writes it
		"https://APP.EXAMPLE.COM",
		"https://app.example.com/",
		"https://app.example.com, https://evil.test",
		"https://127.0.0.1:5173",
		"http://127.0.0.1:5174",
		"http://localhost:5173", // the same machine under another name
		"http://127.0.0.1",
		"*",
		"",
	} {
		for _, method := range []string{"OPTIONS", "GET", "POST"} {
			hdr := map[string][]string{"Origin": {origin}}
			if method == "OPTIONS" {
				hdr = preflight(origin)
			}
			a := serve(t, m, method, "/v1/agents/sessions", hdr)
			if !a.reachedAPI || a.code != http.StatusUnauthorized || len(corsHeaders(a.header)) != 0 {
				t.Errorf("%s from %q: %d, reached the token check %v, CORS headers %v", method, origin, a.code, a.reachedAPI, corsHeaders(a.header))
			}
		}
	}
	// Two Origin headers, one of them listed: neither is believed.
	a := serve(t, m, "OPTIONS", "/v1/agents/sessions", map[string][]string{
		"Origin": {"https://evil.test", "https://app.example.com"}, "Access-Control-Request-Method": {"POST"},
	})
	if !a.reachedAPI || len(corsHeaders(a.header)) != 0 {
		t.Errorf("two Origin headers: reached %v, CORS headers %v", a.reachedAPI, corsHeaders(a.header))
	}
}

// TestListsCoverTheAPI holds the lists to what the API and the
// TypeScript SDK use: every request header docs/api/openapi.yaml names
// and every one the SDK's transport sets is allowed (or one a browser
// sends freely), every response header the document names is exposed,
// and every method of the route table is allowed.
func TestListsCoverTheAPI(t *testing.T) {
	doc, err := os.ReadFile("../../docs/api/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	params := regexp.MustCompile(`(?m)^\s+name: ([A-Za-z-]+)\n\s+in: header`).FindAllStringSubmatch(string(doc), -1)
	if len(params) < 3 {
		t.Fatalf("found %d header parameters in openapi.yaml; the pattern no longer matches it", len(params))
	}
	for _, p := range params {
		if !slices.Contains(AllowHeaders, p[1]) {
			t.Errorf("openapi.yaml's request header %s is not in AllowHeaders", p[1])
		}
	}
	resp := regexp.MustCompile(`(?m)^\s+([A-Z][A-Za-z]*(?:-[A-Z][A-Za-z]*)+): \{\$ref: "#/components/headers/`).FindAllStringSubmatch(string(doc), -1)
	if len(resp) == 0 {
		t.Fatal("found no response headers in openapi.yaml; the pattern no longer matches it")
	}
	for _, h := range resp {
		if !slices.Contains(ExposeHeaders, h[1]) {
			t.Errorf("openapi.yaml's response header %s is not in ExposeHeaders", h[1])
		}
	}
	src, err := os.ReadFile("../../sdk/ts/src/client.ts")
	if err != nil {
		t.Fatal(err)
	}
	sent := regexp.MustCompile(`\["([A-Za-z-]+)"\] = |\{ ([A-Z][A-Za-z]+): `).FindAllStringSubmatch(string(src), -1)
	if len(sent) < 4 {
		t.Fatalf("found %d headers the TS SDK sets; the pattern no longer matches client.ts", len(sent))
	}
	for _, s := range sent {
		name := s[1] + s[2]
		if name != "Accept" && !slices.Contains(AllowHeaders, name) { // Accept: sent freely by a browser
			t.Errorf("the TS SDK sends %s, which AllowHeaders lacks", name)
		}
	}
	methods := AllowMethods()
	for _, m := range []string{"GET", "POST", "PUT", "DELETE"} {
		if !slices.Contains(methods, m) {
			t.Errorf("AllowMethods %v lacks %s", methods, m)
		}
	}
}
