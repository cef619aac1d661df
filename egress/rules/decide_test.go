package rules

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"paddock.dev/paddock/egress"
)

func TestAllowsNameWildcards(t *testing.T) {
	tests := []struct {
		name   string
		policy string
		host   string
		want   bool
	}{
		{"exact", `["example.com"]`, "example.com", true},
		{"exact does not cover subdomains", `["example.com"]`, "foo.example.com", false},
		{"wildcard covers a subdomain", `["*.example.com"]`, "foo.example.com", true},
		{"wildcard covers deeper subdomains", `["*.example.com"]`, "a.b.example.com", true},
		{"wildcard does not cover the suffix itself", `["*.example.com"]`, "example.com", false},
		{"both cover both: suffix", `["example.com", "*.example.com"]`, "example.com", true},
		{"both cover both: subdomain", `["example.com", "*.example.com"]`, "foo.example.com", true},
		{"no suffix confusion", `["*.example.com"]`, "fooexample.com", false},
		{"no suffix confusion, exact", `["example.com"]`, "evilexample.com", false},
		{"no prefix match", `["example.com"]`, "example.com.evil.net", false},
		{"no prefix match, wildcard", `["*.example.com"]`, "a.example.com.evil.net", false},
		{"empty label is not a subdomain", `["*.example.com"]`, ".example.com", false},
		{"uppercase pattern", `["EXAMPLE.com"]`, "example.com", true},
		{"uppercase wildcard pattern", `["*.Example.COM"]`, "foo.example.com", true},
		{"uppercase host", `["example.com"]`, "Example.COM", true},
		{"trailing dot in pattern", `["example.com."]`, "example.com", true},
		{"trailing dot in wildcard pattern", `["*.example.com."]`, "foo.example.com", true},
		{"trailing dot in host", `["example.com"]`, "example.com.", true},
		{"ipv4 literal", `["203.0.113.7"]`, "203.0.113.7", true},
		{"ipv4 literal mismatch", `["203.0.113.7"]`, "203.0.113.8", false},
		{"ipv6 literal", `["2001:db8::1"]`, "2001:db8:0::1", true},
		{"ipv6 literal in brackets", `["2001:db8::1"]`, "[2001:db8::1]", true},
		{"mapped ipv4 host", `["203.0.113.7"]`, "::ffff:203.0.113.7", true},
		{"ip does not match a name", `["example.com"]`, "203.0.113.7", false},
		{"empty host", `["example.com"]`, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustCompile(t, `{"network": {"default": "deny", "allow": `+tt.policy+`}}`)
			if got := c.AllowsName(tt.host); got != tt.want {
				t.Errorf("AllowsName(%q) = %v; want %v", tt.host, got, tt.want)
			}
			d := c.Tunnel(tt.host, 443)
			if d.Allow != tt.want {
				t.Errorf("Tunnel(%q, 443) = %+v; want Allow %v", tt.host, d, tt.want)
			}
		})
	}
}

func TestPresetsDecide(t *testing.T) {
	offline := mustCompile(t, `{"preset": "offline"}`)
	open := mustCompile(t, `{}`)
	dev := mustCompile(t, `{"preset": "developer-safe"}`)

	for _, h := range []string{"github.com", "example.com", "localhost"} {
		if offline.AllowsName(h) {
			t.Errorf("offline allows name %s", h)
		}
		if d := offline.Tunnel(h, 443); d.Allow || d.Rule != RuleOffline {
			t.Errorf("offline Tunnel(%s) = %+v", h, d)
		}
		if d := offline.Decide(egress.Request{Host: h, Port: 80, Method: "GET", Path: "/"}); d.Allow {
			t.Errorf("offline Decide(%s) = %+v", h, d)
		}
		if !open.AllowsName(h) {
			t.Errorf("open does not allow name %s", h)
		}
		if d := open.Decide(egress.Request{Host: h, Port: 8080, Method: "DELETE", Path: "/x"}); !d.Allow || d.Rule != RuleOpen || d.Inspect {
			t.Errorf("open Decide(%s) = %+v", h, d)
		}
	}

	for _, h := range []string{"github.com", "api.github.com", "objects.githubusercontent.com", "crates.io",
		"static.crates.io", "index.crates.io", "pypi.org", "files.pythonhosted.org", "registry.npmjs.org",
		"proxy.golang.org", "sum.golang.org"} {
		if !dev.AllowsName(h) {
			t.Errorf("developer-safe does not allow %s", h)
		}
		d := dev.Decide(egress.Request{Host: h, Port: 443, Scheme: "https", Method: "POST", Path: "/anything/../at/all"})
		if !d.Allow || d.Inspect {
			t.Errorf("developer-safe Decide(%s) = %+v; unlimited hosts take any request", h, d)
		}
	}
	for _, h := range []string{"githubusercontent.com", "example.com", "npmjs.org", "www.pypi.org",
		"golang.org", "github.com.evil.net", "notgithub.com"} {
		if dev.AllowsName(h) {
			t.Errorf("developer-safe allows %s", h)
		}
	}
}

func TestTunnel(t *testing.T) {
	c := mustCompile(t, `{"network": {"allow": [
		"pypi.org",
		{"host": "github.com", "methods": ["GET", "HEAD"], "paths": ["/org/*"]},
		"*.example.com",
		{"host": "api.example.com", "methods": ["GET"]},
		{"host": "*.limited.example", "paths": ["/a"]},
		{"host": "x.limited.example", "paths": ["/b"]}]}}`)
	open := mustCompile(t, `{"preset": "open"}`)
	tests := []struct {
		name string
		c    *Compiled
		host string
		port int
		want egress.Decision
	}{
		{"unlimited host, 443", c, "pypi.org", 443, egress.Decision{Allow: true, Rule: "allow * pypi.org"}},
		{"unlimited host, 80", c, "pypi.org", 80, egress.Decision{Allow: true, Rule: "allow * pypi.org"}},
		{"port 22 refused", c, "pypi.org", 22, egress.Decision{Rule: RulePorts, Reason: "port 22 of pypi.org is not allowed: only 80 and 443 are"}},
		{"port 8443 refused", c, "github.com", 8443, egress.Decision{Rule: RulePorts, Reason: "port 8443 of github.com is not allowed: only 80 and 443 are"}},
		{"port 0 refused", c, "pypi.org", 0, egress.Decision{Rule: RulePorts, Reason: "port 0 of pypi.org is not allowed: only 80 and 443 are"}},
		{"limited host needs inspection", c, "github.com", 443, egress.Decision{Allow: true, Rule: "allow GET,HEAD github.com/org/*", Inspect: true}},
		{"unlimited wildcard wins over a limited exact entry", c, "api.example.com", 443, egress.Decision{Allow: true, Rule: "allow * *.example.com"}},
		{"two limited entries", c, "x.limited.example", 443, egress.Decision{Allow: true, Rule: "allow * *.limited.example/a; allow * x.limited.example/b", Inspect: true}},
		{"unknown host", c, "evil.example", 443, egress.Decision{Rule: RuleDefaultDeny, Reason: "evil.example is not in the allow list"}},
		{"unknown ipv6 host", c, "2001:db8::1", 443, egress.Decision{Rule: RuleDefaultDeny, Reason: "[2001:db8::1] is not in the allow list"}},
		{"open, any port", open, "anything.example", 5432, egress.Decision{Allow: true, Rule: RuleOpen}},
		{"open, port out of range", open, "anything.example", 70000, egress.Decision{Rule: RuleOpen, Reason: "port 70000 is out of range"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.c.Tunnel(tt.host, tt.port)); diff != "" {
				t.Errorf("Tunnel(%q, %d) (-want +got):\n%s", tt.host, tt.port, diff)
			}
		})
	}
}

func TestDecideMethodsAndPaths(t *testing.T) {
	c := mustCompile(t, `{"network": {"allow": [
		"pypi.org",
		{"host": "github.com", "methods": ["GET", "HEAD"], "paths": ["/org/*"]},
		{"host": "uploads.example", "methods": ["PUT", "POST"]},
		{"host": "docs.example", "paths": ["/public/*", "/caf%C3%A9"]}]}}`)
	const ghRule = "allow GET,HEAD github.com/org/*"
	tests := []struct {
		name         string
		method, host string
		path         string
		allow        bool
		rule         string
		reason       string // substring, for denials
	}{
		{"allowed GET", "GET", "github.com", "/org/repo.git/info/refs", true, ghRule, ""},
		{"allowed HEAD", "HEAD", "github.com", "/org/", true, ghRule, ""},
		{"host matched case-insensitively", "GET", "GitHub.com", "/org/x", true, ghRule, ""},
		{"POST refused", "POST", "github.com", "/org/x", false, ghRule,
			"POST github.com/org/x is not allowed (rule: allow GET,HEAD github.com/org/*)"},
		{"TRACE refused", "TRACE", "github.com", "/org/x", false, ghRule, "TRACE github.com/org/x is not allowed"},
		{"CONNECT refused", "CONNECT", "github.com", "/org/x", false, ghRule, "CONNECT github.com/org/x is not allowed"},
		{"lower-case method refused", "get", "github.com", "/org/x", false, ghRule, "get github.com/org/x is not allowed"},
		{"empty method refused", "", "github.com", "/org/x", false, ghRule, "(no method) github.com/org/x"},
		{"other path refused", "GET", "github.com", "/other/x", false, ghRule, "GET github.com/other/x is not allowed"},
		{"prefix without slash refused", "GET", "github.com", "/org", false, ghRule, ""},
		{"look-alike prefix refused", "GET", "github.com", "/organisation/x", false, ghRule, ""},
		{"path case matters", "GET", "github.com", "/ORG/x", false, ghRule, ""},
		// traversal attacks
		{"dotdot", "GET", "github.com", "/org/../admin", false, ghRule, `".." segment, and limited rules match canonical paths only`},
		{"dotdot at end", "GET", "github.com", "/org/x/..", false, ghRule, `".." segment`},
		{"dot", "GET", "github.com", "/org/./x", false, ghRule, `"." segment`},
		{"encoded dotdot", "GET", "github.com", "/org/%2e%2e/admin", false, ghRule, "%2e encodes '.'"},
		{"encoded dotdot upper", "GET", "github.com", "/org/%2E%2E/admin", false, ghRule, "%2E encodes '.'"},
		{"mixed dotdot", "GET", "github.com", "/org/.%2e/admin", false, ghRule, "%2e encodes '.'"},
		{"double encoding", "GET", "github.com", "/org/%252e%252e/admin", false, ghRule, "%25 encodes '%'"},
		{"double slash", "GET", "github.com", "/org//x", false, ghRule, "empty segment (//)"},
		{"leading double slash", "GET", "github.com", "//org/x", false, ghRule, "empty segment (//)"},
		{"backslash", "GET", "github.com", "/org/..\\admin", false, ghRule, "backslash"},
		{"encoded backslash", "GET", "github.com", "/org/..%5cadmin", false, ghRule, "%5c encodes"},
		{"encoded slash", "GET", "github.com", "/org%2f..%2fadmin", false, ghRule, "%2f encodes '/'"},
		{"tomcat dotdot", "GET", "github.com", "/org/..;/admin", false, ghRule, `"..;" segment`},
		{"nul", "GET", "github.com", "/org/x\x00", false, ghRule, `path "/org/x\x00"`},
		{"query not stripped", "GET", "github.com", "/org/x?y=1", false, ghRule, "not a path character"},
		{"empty path", "GET", "github.com", "", false, ghRule, "empty"},
		{"lower-case escape", "GET", "docs.example", "/caf%c3%a9", false, "allow * docs.example/public/*; allow * docs.example/caf%C3%A9", "escapes should be upper case"},
		// methods only, paths only
		{"methods-only entry, any path", "PUT", "uploads.example", "/any/where", true, "allow POST,PUT uploads.example", ""},
		{"methods-only entry, other method", "GET", "uploads.example", "/any/where", false, "allow POST,PUT uploads.example", ""},
		{"methods-only entry still needs a canonical path", "PUT", "uploads.example", "/a/../b", false, "allow POST,PUT uploads.example", `".." segment`},
		{"paths-only entry, any method", "DELETE", "docs.example", "/public/x", true, "allow * docs.example/public/*", ""},
		{"paths-only entry, second pattern", "GET", "docs.example", "/caf%C3%A9", true, "allow * docs.example/caf%C3%A9", ""},
		{"paths-only entry, two rules named", "GET", "docs.example", "/private", false, "allow * docs.example/public/*; allow * docs.example/caf%C3%A9",
			"GET docs.example/private is not allowed (rules: allow * docs.example/public/*; allow * docs.example/caf%C3%A9)"},
		{"paths-only entry refuses TRACE", "TRACE", "docs.example", "/public/x", false, "allow * docs.example/public/*; allow * docs.example/caf%C3%A9", "TRACE docs.example/public/x is not allowed"},
		{"paths-only entry refuses an unknown method", "PROPFIND", "docs.example", "/public/x", false, "allow * docs.example/public/*; allow * docs.example/caf%C3%A9", ""},
		// unlimited host
		{"unlimited host takes any method", "PATCH", "pypi.org", "/simple/", true, "allow * pypi.org", ""},
		{"unlimited host takes a non-canonical path", "GET", "pypi.org", "/a/../b", true, "allow * pypi.org", ""},
		{"unknown host", "GET", "example.org", "/", false, RuleDefaultDeny, "example.org is not in the allow list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := c.Decide(egress.Request{Sandbox: "s1", Host: tt.host, Port: 443, Scheme: "https", Method: tt.method, Path: tt.path})
			if d.Allow != tt.allow || d.Rule != tt.rule {
				t.Errorf("Decide = %+v; want Allow %v, Rule %q", d, tt.allow, tt.rule)
			}
			if tt.allow && d.Reason != "" {
				t.Errorf("allowed with a reason: %q", d.Reason)
			}
			if !tt.allow && (d.Reason == "" || !strings.Contains(d.Reason, tt.reason)) {
				t.Errorf("Reason = %q; want it to contain %q", d.Reason, tt.reason)
			}
			wantInspect := tt.host != "pypi.org" && tt.rule != RuleDefaultDeny
			if d.Inspect != wantInspect {
				t.Errorf("Inspect = %v; want %v", d.Inspect, wantInspect)
			}
		})
	}
}

func TestDecidePort(t *testing.T) {
	c := mustCompile(t, `{"network": {"allow": [{"host": "github.com", "methods": ["GET"]}]}}`)
	d := c.Decide(egress.Request{Host: "github.com", Port: 8080, Scheme: "http", Method: "GET", Path: "/"})
	if d.Allow || d.Rule != RulePorts {
		t.Errorf("Decide on port 8080 = %+v", d)
	}
	d = c.Decide(egress.Request{Host: "github.com", Port: 80, Scheme: "http", Method: "GET", Path: "/"})
	if !d.Allow {
		t.Errorf("Decide on port 80 = %+v", d)
	}
}

func TestDecideReasonBounds(t *testing.T) {
	c := mustCompile(t, `{"network": {"allow": [{"host": "github.com", "paths": ["/1","/2","/3","/4","/5"]}]}}`)
	long := "/" + strings.Repeat("x", 1000)
	d := c.Decide(egress.Request{Host: "github.com", Port: 443, Method: "GET", Path: long})
	if d.Allow {
		t.Fatal("allowed")
	}
	if len(d.Reason) > 400 {
		t.Errorf("reason of %d bytes: %q", len(d.Reason), d.Reason)
	}
	if !strings.Contains(d.Rule, "; and 2 more") {
		t.Errorf("Rule = %q; want at most 3 rules named", d.Rule)
	}
	d = c.Decide(egress.Request{Host: "github.com", Port: 443, Method: "G\nET", Path: "/1"})
	if d.Allow || !strings.Contains(d.Reason, `"G\nET"`) {
		t.Errorf("odd method: %+v", d)
	}
}

// TestLimitsForGrants: the same limits, as a credential grant uses them.
func TestLimitsForGrants(t *testing.T) {
	l, err := NewLimits([]string{"GET"}, []string{"/org/repo.git/*"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		method, path string
		want         bool
	}{
		{"GET", "/org/repo.git/info/refs", true},
		{"POST", "/org/repo.git/git-upload-pack", false},
		{"GET", "/org/repo.git/../other.git/info/refs", false},
		{"GET", "/org/repo.git/%2e%2e/x", false},
		{"GET", "/org/other.git/info/refs", false},
		{"BREW", "/org/repo.git/x", false},
	} {
		if got := l.Allows(tt.method, tt.path); got != tt.want {
			t.Errorf("Allows(%q, %q) = %v; want %v", tt.method, tt.path, got, tt.want)
		}
	}
	var none Limits
	if !none.Unlimited() || !none.Allows("BREW", "/../x") {
		t.Error("the zero Limits should cover every request")
	}
	paths, err := NewLimits(nil, []string{"/x"})
	if err != nil {
		t.Fatal(err)
	}
	if !paths.Allows("DELETE", "/x") || paths.Allows("TRACE", "/x") || paths.Allows("BREW", "/x") {
		t.Error("paths-only limits: any known method, and only those")
	}
	if _, err := NewLimits([]string{"TRACE"}, nil); err == nil {
		t.Error("TRACE accepted")
	}
}

func TestConcurrentUse(t *testing.T) {
	c := mustCompile(t, `{"preset": "developer-safe", "network": {"allow": [{"host": "a.example", "methods": ["GET"]}]}}`)
	done := make(chan bool)
	for range 4 {
		go func() {
			for range 200 {
				c.AllowsName("github.com")
				c.Decide(egress.Request{Host: "a.example", Port: 443, Method: "GET", Path: "/x"})
				c.AddUnenforced("x")
				_ = c.Summary()
			}
			done <- true
		}()
	}
	for range 4 {
		<-done
	}
}
