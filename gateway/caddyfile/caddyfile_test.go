package caddyfile

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"paddock.dev/paddock/hostd/api/routes"
	"paddock.dev/paddock/hostd/previews"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenCases render every shipped Caddyfile, the local one also for a
// listen address on every interface and a domain of its own.
var goldenCases = []struct {
	name    string
	variant Variant
	opts    Options
}{
	{"local", Local, Options{}},
	{"local-all-addresses", Local, Options{Listen: ":7788", Domain: "paddock.internal", AccessLog: "/var/log/paddock/access.log"}},
	{"domain", Domain, Options{Domain: "paddock.example.com", Email: "ops@example.com"}},
}

// TestAdaptGolden adapts every shipped Caddyfile to Caddy's JSON and
// compares both the rendered file and the JSON with testdata/NAME.caddyfiletest
// (the rendered Caddyfile, a line of dashes, the JSON), as Caddy's own
// caddyfile_adapt tests do. go test ./gateway/caddyfile -update rewrites them.
func TestAdaptGolden(t *testing.T) {
	seen := map[Variant]bool{}
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			seen[c.variant] = true
			o := c.opts
			o.HostdSocket = "/var/lib/paddock/hostd.sock"
			o.StorageDir = "/var/lib/paddock/gateway"
			text, err := Render(c.variant, o)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := Adapt(text)
			if err != nil {
				t.Fatalf("adapt: %v\n%s", err, text)
			}
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, raw, "", "\t"); err != nil {
				t.Fatal(err)
			}
			got := string(text) + "\n----------\n" + pretty.String() + "\n"
			path := filepath.Join("testdata", c.name+".caddyfiletest")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./gateway/caddyfile -update to make it)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("%s differs from what the Caddyfile adapts to now (-want +got; go test ./gateway/caddyfile -update if meant):\n%s", path, diff)
			}
		})
	}
	for _, v := range Variants() {
		if !seen[v] {
			t.Errorf("shipped Caddyfile %s has no golden case", v)
		}
	}
}

// TestShippedSettings checks what the golden files hold for the local
// file's security settings, so a golden update cannot drop one unnoticed.
func TestShippedSettings(t *testing.T) {
	text, err := Render(Local, Options{HostdSocket: "/s/hostd.sock", StorageDir: "/s/gateway"})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := Adapt(text)
	if err != nil {
		t.Fatal(err)
	}
	js := string(raw)
	// The previews' body limit is hostd's (the preview proxy's), with the
	// room every route gets at the edge.
	previewMax := fmt.Sprintf(`"max_size":%d`, routes.EdgeLimit(previews.MaxPreviewBodyBytes))
	for _, want := range []string{
		`"admin":{"disabled":true`, `"install_trust":false`, `"module":"internal"`,
		`"storage":{"module":"file_system","root":"/s/gateway"}`,
		`"read_header_timeout":10000000000`, `"read_timeout":300000000000`, `"read_idle_timeout":30000000000`, `"idle_timeout":120000000000`,
		`"max_header_bytes":65536`, `"handler":"paddock_auth"`, `"handler":"paddock_preview"`,
		`"handler":"paddock_limits"`, previewMax, `"dial":"unix//s/hostd.sock"`,
		`"listen":["127.0.0.1:7788"]`, `"disable_redirects":true`,
	} {
		if !strings.Contains(js, want) {
			t.Errorf("the local Caddyfile adapts without %s", want)
		}
	}
	if strings.Contains(js, "log_credentials") {
		t.Error("the local Caddyfile logs credentials")
	}
	// The API's body limits are the route table's (paddock_limits), taken
	// before the token check; the only size written in the file is the
	// previews' (hostd's preview limit, not an API route).
	if l, a := strings.Index(js, `"handler":"paddock_limits"`), strings.Index(js, `"handler":"paddock_auth"`); l < 0 || a < 0 || l > a {
		t.Errorf("paddock_limits (at %d) does not run before paddock_auth (at %d)", l, a)
	}
	if n, p := strings.Count(js, `"handler":"request_body"`), strings.Count(js, previewMax); n != p || n != 2 {
		t.Errorf("%d request_body handlers, %d of them the previews': the API's limits must come from the route table", n, p)
	}
}

func TestOptions(t *testing.T) {
	base := Options{HostdSocket: "/run/paddock/hostd.sock", StorageDir: "/var/lib/paddock/gateway"}
	with := func(f func(*Options)) Options { o := base; f(&o); return o }
	for _, c := range []struct {
		name    string
		variant Variant
		opts    Options
		want    string // in the error; "" for none
		sites   string
	}{
		{"default", Local, base, "", "https://localhost:7788, https://127.0.0.1:7788"},
		{"ipv6 loopback", Local, with(func(o *Options) { o.Listen = "[::1]:9000" }), "", "https://localhost:9000, https://[::1]:9000"},
		{"an address", Local, with(func(o *Options) { o.Listen = "10.1.2.3:7788" }), "", "https://10.1.2.3:7788"},
		{"a host name", Local, with(func(o *Options) { o.Listen = "box.lan:7788" }), "", "https://box.lan:7788"},
		{"no port", Local, with(func(o *Options) { o.Listen = "127.0.0.1" }), "want HOST:PORT", ""},
		{"bad port", Local, with(func(o *Options) { o.Listen = "127.0.0.1:99999" }), "port", ""},
		{"relative socket", Local, with(func(o *Options) { o.HostdSocket = "hostd.sock" }), "absolute", ""},
		{"space in a path", Local, with(func(o *Options) { o.StorageDir = "/var/lib/my paddock" }), "cannot take", ""},
		{"brace in a path", Local, with(func(o *Options) { o.HostdSocket = "/run/{x}/hostd.sock" }), "cannot take", ""},
		{"bad domain", Local, with(func(o *Options) { o.Domain = "a b" }), "not a host name", ""},
		{"relative access log", Local, with(func(o *Options) { o.AccessLog = "access.log" }), "absolute path", ""},
		{"relative log", Local, with(func(o *Options) { o.Log = "caddy.log" }), "absolute path", ""},
		{"log discarded", Local, with(func(o *Options) { o.Log = "discard" }), "", "https://localhost:7788, https://127.0.0.1:7788"},
		{"domain needs one", Domain, base, "needs a domain", ""},
		{"domain", Domain, with(func(o *Options) { o.Domain = "p.example.com" }), "", "p.example.com"},
		{"domain on a port", Domain, with(func(o *Options) { o.Domain = "p.example.com"; o.Listen = ":8443" }), "", "p.example.com:8443"},
		{"bad email", Domain, with(func(o *Options) { o.Domain = "p.example.com"; o.Email = "nobody" }), "not an address", ""},
		{"cors origins", Local, with(func(o *Options) { o.CORSOrigins = []string{"https://app.example.com", "http://localhost:5173"} }), "", "https://localhost:7788, https://127.0.0.1:7788"},
		{"cors wildcard", Local, with(func(o *Options) { o.CORSOrigins = []string{"*"} }), "--cors-origin", ""},
		{"cors null", Local, with(func(o *Options) { o.CORSOrigins = []string{"null"} }), "never allowed", ""},
		{"cors path", Domain, with(func(o *Options) { o.Domain = "p.example.com"; o.CORSOrigins = []string{"https://app.example.com/x"} }), "no path", ""},
		{"cors brace", Local, with(func(o *Options) { o.CORSOrigins = []string{"https://a.example}"} }), "want scheme://host", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := c.opts.data(c.variant)
			if c.want != "" {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("error %v, want one saying %q", err, c.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.SiteAddresses != c.sites {
				t.Errorf("sites %q, want %q", d.SiteAddresses, c.sites)
			}
			text, err := Render(c.variant, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Adapt(text); err != nil {
				t.Errorf("adapt: %v", err)
			}
		})
	}
}

// TestRenderText: an operator's Caddyfile gets the same values, and one
// without template actions comes out unchanged.
func TestRenderText(t *testing.T) {
	o := Options{HostdSocket: "/run/paddock/hostd.sock", StorageDir: "/var/lib/paddock/gateway", AuthCacheTTL: 3 * time.Second}
	plain := "localhost:8080 {\n\trespond \"hi {http.request.uri}\"\n}\n"
	out, err := RenderText("mine", plain, o)
	if err != nil || string(out) != plain {
		t.Errorf("a plain Caddyfile came out as %q, %v", out, err)
	}
	out, err = RenderText("mine", "{{template \"common\" .}}\nlocalhost:8080 {\n\timport paddock_routes\n}\n", o)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "hostd_socket /run/paddock/hostd.sock") || !strings.Contains(string(out), "cache_ttl 3s") {
		t.Errorf("the shipped snippets were not rendered:\n%s", out)
	}
	if _, err := Adapt(out); err != nil {
		t.Error(err)
	}
	// A file written against the old shipped one, with the body sizes as
	// values, still renders (with the table's sizes) and adapts.
	out, err = RenderText("mine", "localhost:8080 {\n\trequest_body {\n\t\tmax_size {{.UploadBody}}\n\t}\n\trespond ok\n}\n", o)
	if err != nil || !strings.Contains(string(out), "max_size 5242880") {
		t.Errorf("a file with {{.UploadBody}}: %v\n%s", err, out)
	}
	if _, err := Adapt(out); err != nil {
		t.Error(err)
	}
	if _, err := RenderText("mine", "{{.Nope}}", o); err == nil {
		t.Error("an unknown value rendered")
	}
}

// handlerLists returns every list of handlers in a Caddy JSON config.
func handlerLists(v any) [][]string {
	var out [][]string
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if k == "handle" {
				if list, ok := x.([]any); ok {
					var names []string
					for _, h := range list {
						if m, ok := h.(map[string]any); ok {
							names = append(names, fmt.Sprint(m["handler"]))
						}
					}
					out = append(out, names)
				}
			}
			out = append(out, handlerLists(x)...)
		}
	case []any:
		for _, x := range v {
			out = append(out, handlerLists(x)...)
		}
	}
	return out
}

// TestCORSPlacement: with --cors-origin, both shipped files run
// paddock_cors before the body limit and the token check on the API's
// routes, and on /healthz, and never on a preview's; without it none runs.
func TestCORSPlacement(t *testing.T) {
	for _, v := range Variants() {
		for _, origins := range [][]string{nil, {"https://app.example.com"}} {
			o := Options{HostdSocket: "/s/hostd.sock", StorageDir: "/s/gateway", Domain: "p.example.com", CORSOrigins: origins}
			if v == Local {
				o.Domain = ""
			}
			text, err := Render(v, o)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := Adapt(text)
			if err != nil {
				t.Fatal(err)
			}
			var cfg any
			if err := json.Unmarshal(raw, &cfg); err != nil {
				t.Fatal(err)
			}
			var withCORS, api int
			for _, list := range handlerLists(cfg) {
				i := slices.Index(list, "paddock_cors")
				if i >= 0 {
					withCORS++
				}
				if slices.Contains(list, "paddock_preview") && i >= 0 {
					t.Errorf("%s: a preview route runs paddock_cors: %v", v, list)
				}
				if a := slices.Index(list, "paddock_auth"); a >= 0 {
					api++
					if l := slices.Index(list, "paddock_limits"); len(origins) > 0 && (i < 0 || i > a || i > l) {
						t.Errorf("%s: the API's handlers %v: paddock_cors must come before paddock_limits and paddock_auth", v, list)
					}
				}
			}
			if want := 2 * api; len(origins) > 0 && withCORS != want {
				t.Errorf("%s: paddock_cors in %d lists of handlers, want %d (the API's and /healthz)", v, withCORS, want)
			}
			if len(origins) == 0 && (withCORS != 0 || strings.Contains(string(text), "paddock_cors")) {
				t.Errorf("%s without --cors-origin runs paddock_cors", v)
			}
			if len(origins) > 0 && !strings.Contains(string(raw), `"origins":["https://app.example.com"]`) {
				t.Errorf("%s: the origins are not in the config: %s", v, raw)
			}
		}
	}
}
