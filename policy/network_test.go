package policy

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"paddock.dev/paddock/egress"
	"paddock.dev/paddock/egress/rules"
)

// diffPolicies are the policies the differential test compiles: presets,
// every kind of host pattern, and entries with every kind of limit.
var diffPolicies = []string{
	`{}`,
	`{"preset": "offline"}`,
	`{"preset": "open"}`,
	`{"preset": "developer-safe"}`,
	`{"network": {"default": "deny"}}`,
	`{"network": {"allow": ["example.com", "*.example.com", "203.0.113.7", "2001:db8::1", "[2001:db8::2]", "::ffff:198.51.100.1", "EXAMPLE.org."]}}`,
	`{"preset": "developer-safe", "network": {"allow": [
		{"host": "github.com", "methods": ["GET", "HEAD"], "paths": ["/org/*"]},
		{"host": "api.example.com", "methods": ["POST"]},
		{"host": "paths.example.com", "paths": ["/a/*", "/b", "/c/*/d", "/e%20f/*", "/!$&'()*+,;=:@"]},
		{"host": "*.limited.test", "methods": ["DELETE"], "paths": ["/x/*"]},
		{"host": "both.test", "methods": ["GET"], "paths": ["/only/*"]},
		{"host": "both.test"},
		"*.api.example.com",
		{"host": "198.51.100.7", "methods": ["GET"]}
	]}}`,
	`{"network": {"allow": [
		{"host": "many.test", "methods": ["GET"], "paths": ["/1", "/2", "/3", "/4"]},
		{"host": "many.test", "methods": ["POST"], "paths": ["/p/*"]},
		{"host": "*.many.test", "paths": ["/w"]},
		{"host": "2001:db8::9", "paths": ["/v6/*"]}
	]}}`,
}

// diffHosts are hosts tried against every policy, on top of the egress/addr
// fuzz corpus.
var diffHosts = []string{
	"", "example.com", "EXAMPLE.COM", "example.com.", "example.com..", "a.example.com", "a.b.example.com",
	".example.com", "example.com.evil.net", "evilexample.com", "example.org", "github.com", "api.github.com",
	"raw.githubusercontent.com", "githubusercontent.com", "crates.io", "static.crates.io", "pypi.org",
	"api.example.com", "v1.api.example.com", "paths.example.com", "x.limited.test", "limited.test",
	"both.test", "many.test", "a.many.test", "203.0.113.7", "203.0.113.8", "::ffff:203.0.113.7",
	"[203.0.113.7]", "2001:db8::1", "2001:DB8:0::1", "[2001:db8::1]", "2001:db8::2", "198.51.100.1",
	"::ffff:198.51.100.1", "198.51.100.7", "2001:db8::9", "fe80::1%eth0", "203.0.113.7/32", "1.2.3.4/8",
	"\u212aa.example.com", "\u212a.example.com", "é.EXAMPLE.com", "a.example.com\x00", "\xff.example.com",
	"[\xff.example.com]", "[]", "[", "example.com:443", "localhost", "::1", "0x7f.1",
}

// diffPaths are request paths, on top of the egress/rules fuzz corpus.
var diffPaths = []string{
	"/", "/org", "/org/", "/org/repo.git/info/refs", "/org/../admin", "/orgx/repo", "/other",
	"/a/", "/a/b/c", "/b", "/b/", "/c/x/d", "/c/x/y/d", "/c//d", "/e%20f/g", "/e%20F/g", "/e f/g",
	"/!$&'()*+,;=:@", "/x/y", "/only/1", "/1", "/2", "/4", "/5", "/p/q", "/w", "/v6/a", "/%2e%2e/x",
	"", "*", "/a?b", "/" + strings.Repeat("a", 2047), "/" + strings.Repeat("a", 2048),
}

var diffMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT", "", "get", "BREW"}

// corpus reads the string inputs of a Go fuzz corpus directory.
func corpus(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[1], "string(") {
			continue
		}
		s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "string("), ")"))
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		t.Fatalf("no inputs in %s", dir)
	}
	return out
}

// TestNetworkMatchesRules holds http.rego to egress/rules: for every
// policy, the Rego-backed egress.Policy answers AllowsName, Tunnel and
// Decide as the compiled policy itself does (Allow, Inspect and Rule; the
// reasons are worded apart). Inputs: the tables above and the fuzz
// corpora of egress/rules (paths) and egress/addr (hosts).
func TestNetworkMatchesRules(t *testing.T) {
	e := mustBuiltin(t)
	hosts := append(append([]string{}, diffHosts...), corpus(t, "../egress/addr/testdata/fuzz/FuzzCanonicalHost")...)
	paths := append(append([]string{}, diffPaths...), corpus(t, "../egress/rules/testdata/fuzz/FuzzCanonicalPath")...)
	// Under -race or -short, one request in eight (the tunnel and name
	// answers are all compared).
	step := 1
	if raceEnabled || testing.Short() {
		step = 8
	}
	n, k := 0, 0
	for pi, raw := range diffPolicies {
		var in rules.PolicyInput
		if err := json.Unmarshal([]byte(raw), &in); err != nil {
			t.Fatalf("policy %d: %v", pi, err)
		}
		c, err := rules.Compile(in)
		if err != nil {
			t.Fatalf("policy %d: %v", pi, err)
		}
		p := e.Network("ses-diff", c)
		for _, h := range hosts {
			if got, want := p.AllowsName(h), c.AllowsName(h); got != want {
				t.Errorf("policy %d AllowsName(%q) = %v; egress/rules says %v", pi, h, got, want)
			}
			for _, port := range []int{80, 443, 8080, 0, 65535, 65536, -1} {
				n++
				if got, want := p.Tunnel(h, port), c.Tunnel(h, port); !sameDecision(got, want) {
					t.Errorf("policy %d Tunnel(%q, %d) = %+v; egress/rules says %+v", pi, h, port, got, want)
				}
			}
			// Requests: every method and path where the host has
			// limits (that is where they matter), a sample elsewhere.
			ms, ps := diffMethods, paths
			if d := c.Tunnel(h, 443); !d.Inspect {
				ms, ps = diffMethods[:3], paths[:4]
			}
			for _, m := range ms {
				for _, path := range ps {
					for _, port := range []int{443, 80} {
						if k++; k%step != 0 {
							continue
						}
						n++
						r := egress.Request{Sandbox: "ses-diff", Host: h, Port: port, Scheme: "https", Method: m, Path: path}
						if got, want := p.Decide(r), c.Decide(r); !sameDecision(got, want) {
							t.Errorf("policy %d Decide(%s %q %s:%d) = %+v; egress/rules says %+v", pi, m, path, h, port, got, want)
						}
					}
				}
			}
		}
	}
	// Every byte, raw and escaped (both hex cases), under a limited
	// entry: the canonical path check, character by character.
	var in rules.PolicyInput
	if err := json.Unmarshal([]byte(diffPolicies[6]), &in); err != nil {
		t.Fatal(err)
	}
	c, err := rules.Compile(in)
	if err != nil {
		t.Fatal(err)
	}
	p := e.Network("ses-diff", c)
	for b := 0; b < 256; b++ {
		for _, path := range []string{
			"/org/x" + string(rune(b)), "/org/x" + string([]byte{byte(b)}),
			"/org/x" + strings.ToUpper(hexEscape(b)), "/org/x" + hexEscape(b),
			"/paths" + hexEscape(b), "/a/" + strings.ToUpper(hexEscape(b)),
		} {
			for _, h := range []string{"github.com", "paths.example.com"} {
				n++
				r := egress.Request{Host: h, Port: 443, Scheme: "https", Method: "GET", Path: path}
				if got, want := p.Decide(r), c.Decide(r); !sameDecision(got, want) {
					t.Errorf("Decide(GET %q %s) = %+v; egress/rules says %+v", path, h, got, want)
				}
			}
		}
	}
	t.Logf("%d tunnel and request decisions compared, %d hosts, %d paths", n, len(hosts), len(paths))
}

func hexEscape(b int) string { return "%" + strconv.FormatInt(int64(b)|0x100, 16)[1:] }

func sameDecision(a, b egress.Decision) bool {
	return a.Allow == b.Allow && a.Inspect == b.Inspect && a.Rule == b.Rule && (a.Allow || a.Reason != "")
}

// TestNetworkDataIsACopy checks that rules.Data gives the caller values
// of its own and the index the module reads.
func TestNetworkDataIsACopy(t *testing.T) {
	c, err := rules.Compile(rules.PolicyInput{Network: &rules.Network{Allow: []rules.AllowEntry{
		{Host: "a.test", Methods: []string{"GET"}, Paths: []string{"/x/*"}}, {Host: "*.b.test"}, {Host: "10.0.0.1"},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	d := c.Data()
	if len(d.Entries) != 3 || d.Exact["a.test"][0] != 0 || d.Wildcards[0] != 1 || d.IPs[0] != 2 || d.Entries[2].CIDR != "10.0.0.1/32" || d.Entries[1].Suffix != ".b.test" {
		t.Fatalf("Data = %+v", d)
	}
	d.Entries[0].Paths[0] = "/changed"
	d.Methods[0] = "BREW"
	if c.Data().Entries[0].Paths[0] != "/x/*" || rules.Methods[0] != "GET" {
		t.Error("Data shares its slices with the compiled policy")
	}
}

// TestKnownMethodsMatch holds http.rego's list of methods to rules.Methods.
func TestKnownMethodsMatch(t *testing.T) {
	e := mustBuiltin(t)
	for _, m := range append(append([]string{}, rules.Methods...), "TRACE", "CONNECT", "BREW") {
		want := false
		for _, k := range rules.Methods {
			want = want || k == m
		}
		ok, rule, err := e.GrantApplies(context.Background(), GrantInput{Hosts: []string{"h.test"}, Paths: []string{"/*"}, Scheme: "https", Host: "h.test", Port: 443, Method: m, Path: "/x"})
		if err != nil || ok != want {
			t.Errorf("grant limited to paths, method %s: %v %s %v; want %v", m, ok, rule, err, want)
		}
	}
}

func TestGrantApplies(t *testing.T) {
	e := mustBuiltin(t)
	gh := GrantInput{Session: "ses-1", Grant: "g1", Hosts: []string{"api.github.com", "*.githubusercontent.com"}}
	limited := gh
	limited.Methods, limited.Paths = []string{"get"}, []string{"/repos/org/*", "/user"}
	tests := []struct {
		name   string
		grant  GrantInput
		scheme string
		host   string
		port   int
		method string
		path   string
		want   string
	}{
		{"applies", gh, "https", "api.github.com", 443, "POST", "/anything", "grant.applies"},
		{"wildcard", gh, "https", "raw.githubusercontent.com", 443, "GET", "/x", "grant.applies"},
		{"wildcard is not its suffix", gh, "https", "githubusercontent.com", 443, "GET", "/x", "grant.host"},
		{"plain http", gh, "http", "api.github.com", 443, "GET", "/", "grant.scheme"},
		{"another port", gh, "https", "api.github.com", 8443, "GET", "/", "grant.port"},
		{"another host", gh, "https", "github.com", 443, "GET", "/", "grant.host"},
		{"suffix confusion", gh, "https", "api.github.com.evil.test", 443, "GET", "/", "grant.host"},
		{"path not canonical", gh, "https", "api.github.com", 443, "GET", "/a/../b", "grant.path_not_canonical"},
		{"within limits", limited, "https", "api.github.com", 443, "GET", "/repos/org/x/pulls", "grant.applies"},
		{"second path", limited, "https", "api.github.com", 443, "GET", "/user", "grant.applies"},
		{"another method", limited, "https", "api.github.com", 443, "DELETE", "/repos/org/x", "grant.method"},
		{"another path", limited, "https", "api.github.com", 443, "GET", "/repos/other/x", "grant.path"},
		{"path prefix is not enough", limited, "https", "api.github.com", 443, "GET", "/users", "grant.path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.grant
			in.Scheme, in.Host, in.Port, in.Method, in.Path = tt.scheme, tt.host, tt.port, tt.method, tt.path
			ok, rule, err := e.GrantApplies(context.Background(), in)
			if err != nil || rule != tt.want || ok != (tt.want == "grant.applies") {
				t.Errorf("GrantApplies = %v, %q, %v; want rule %q", ok, rule, err, tt.want)
			}
		})
	}
	for _, bad := range []GrantInput{
		{Hosts: nil},
		{Hosts: make([]string, MaxGrantHosts+1)},
		{Hosts: []string{"*.com"}},
		{Hosts: []string{"a.test"}, Methods: []string{"TRACE"}},
		{Hosts: []string{"a.test"}, Paths: []string{"no-slash"}},
	} {
		bad.Scheme, bad.Host, bad.Port, bad.Method, bad.Path = "https", "a.test", 443, "GET", "/"
		if ok, _, err := e.GrantApplies(context.Background(), bad); ok || !errors.Is(err, ErrInvalidInput) {
			t.Errorf("GrantApplies(%+v) = %v, %v; want ErrInvalidInput", bad, ok, err)
		}
	}
}

func TestApproval(t *testing.T) {
	e := mustBuiltin(t)
	ctx := context.Background()
	agent := Actor{Kind: "session", Name: "tok-1", Tenant: "acme", Session: "ses-1"}
	tests := []struct {
		name  string
		in    ApprovalInput
		allow bool
		rule  string
		ttl   time.Duration
	}{
		{"request", ApprovalInput{Action: ActionRequest, Actor: agent, Requester: agent}, true, "approval.request", 10 * time.Minute},
		{"admin decides", ApprovalInput{Action: ActionDecide, Actor: Actor{Kind: "admin", Name: "root"}, SessionTenant: "acme", Requester: agent}, true, "approval.admin", 0},
		{"tenant may not", ApprovalInput{Action: ActionDecide, Actor: Actor{Kind: "tenant", Name: "acme", Tenant: "acme"}, SessionTenant: "acme", Requester: agent}, false, "approval.admin_only", 0},
		{"agent may not approve its own command", ApprovalInput{Action: ActionDecide, Actor: agent, SessionTenant: "acme", Requester: agent}, false, "approval.not_self", 0},
		{"unknown actor", ApprovalInput{Action: ActionDecide, Actor: Actor{Kind: "robot"}}, false, "approval.admin_only", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := e.Approval(ctx, tt.in)
			if err != nil || d.Allow != tt.allow || d.Rule != tt.rule || d.TTL != tt.ttl {
				t.Errorf("Approval = %+v, %v; want allow %v rule %s ttl %v", d, err, tt.allow, tt.rule, tt.ttl)
			}
			if !d.Allow && d.Reason == "" {
				t.Error("a refusal without a reason")
			}
		})
	}
	if d, err := e.Approval(ctx, ApprovalInput{Action: "approve", Actor: Actor{Kind: "admin"}}); d.Allow || !errors.Is(err, ErrInvalidInput) {
		t.Errorf("unknown action: %+v %v", d, err)
	}
}
