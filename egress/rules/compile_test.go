package rules

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// compileJSON compiles a policy written as JSON.
func compileJSON(t *testing.T, in string) (*Compiled, error) {
	t.Helper()
	var p PolicyInput
	if err := json.Unmarshal([]byte(in), &p); err != nil {
		t.Fatalf("decoding %s: %v", in, err)
	}
	return Compile(p)
}

func mustCompile(t *testing.T, in string) *Compiled {
	t.Helper()
	c, err := compileJSON(t, in)
	if err != nil {
		t.Fatalf("Compile(%s): %v", in, err)
	}
	return c
}

func TestCompileErrors(t *testing.T) {
	many := make([]string, MaxAllowEntries+1)
	for i := range many {
		many[i] = fmt.Sprintf("%q", fmt.Sprintf("h%d.example.com", i))
	}
	manyPaths := make([]string, MaxPaths+1)
	for i := range manyPaths {
		manyPaths[i] = fmt.Sprintf(`"/p%d"`, i)
	}
	tests := []struct {
		name, in, want string
	}{
		{"unknown preset", `{"preset": "safe"}`, `preset "safe" is unknown`},
		{"preset is case-sensitive", `{"preset": "Offline"}`, `preset "Offline" is unknown`},
		{"unknown default", `{"network": {"default": "block"}}`, `network.default "block" is unknown`},
		{"unknown enforcement", `{"network": {"enforcement": "lenient"}}`, `network.enforcement "lenient" is unknown`},
		{"offline with allow", `{"preset": "offline", "network": {"allow": ["a.example"]}}`, "preset offline allows no network"},
		{"offline with default allow", `{"preset": "offline", "network": {"default": "allow"}}`, "contradicts preset offline"},
		{"developer-safe with default allow", `{"preset": "developer-safe", "network": {"default": "allow"}}`, "contradicts preset developer-safe"},
		{"open with default deny", `{"preset": "open", "network": {"default": "deny"}}`, "contradicts preset open"},
		{"open with allow", `{"preset": "open", "network": {"allow": ["a.example"]}}`, `needs network.default "deny"`},
		{"default allow with allow", `{"network": {"default": "allow", "allow": ["a.example"]}}`, `needs network.default "deny"`},
		{"too many entries", `{"network": {"allow": [` + strings.Join(many, ",") + `]}}`, "257 entries, more than 256"},
		{"empty host", `{"network": {"allow": [""]}}`, "network.allow[0]: host is empty"},
		{"lone dot", `{"network": {"allow": ["."]}}`, "host is empty"},
		{"host too long", `{"network": {"allow": ["` + strings.Repeat("a.", 127) + `com"]}}`, "more than 253"},
		{"label too long", `{"network": {"allow": ["` + strings.Repeat("a", 64) + `.com"]}}`, "more than 63"},
		{"empty label", `{"network": {"allow": ["a..example.com"]}}`, "empty label"},
		{"two trailing dots", `{"network": {"allow": ["example.com.."]}}`, "empty label"},
		{"space", `{"network": {"allow": ["exa mple.com"]}}`, `' ' is not allowed`},
		{"slash", `{"network": {"allow": ["example.com/path"]}}`, `'/' is not allowed`},
		{"port", `{"network": {"allow": ["example.com:443"]}}`, "neither a name nor an IP"},
		{"scheme", `{"network": {"allow": ["https://example.com"]}}`, "neither a name nor an IP"},
		{"non-ascii", `{"network": {"allow": ["exämple.com"]}}`, "not ASCII"},
		{"kelvin sign", `{"network": {"allow": ["\u212aelvin.example"]}}`, "not ASCII"},
		{"bare star", `{"network": {"allow": ["*"]}}`, "whole first label"},
		{"star inside", `{"network": {"allow": ["a*.example.com"]}}`, "whole first label"},
		{"star deeper", `{"network": {"allow": ["a.*.example.com"]}}`, "whole first label"},
		{"double star", `{"network": {"allow": ["*.*.example.com"]}}`, "whole first label"},
		{"wildcard on a tld", `{"network": {"allow": ["*.com"]}}`, "at least two labels"},
		{"numeric tld", `{"network": {"allow": ["1.2.3"]}}`, "last label is numeric"},
		{"wildcard on an ip", `{"network": {"allow": ["*.1.2.3.4"]}}`, "last label is numeric"},
		{"zoned ip", `{"network": {"allow": ["fe80::1%eth0"]}}`, "neither a name nor an IP"},
		{"trace", `{"network": {"allow": [{"host": "a.example", "methods": ["GET", "TRACE"]}]}}`, "methods[1]: TRACE is never allowed"},
		{"connect", `{"network": {"allow": [{"host": "a.example", "methods": ["connect"]}]}}`, "methods[0]: CONNECT is never allowed"},
		{"unknown method", `{"network": {"allow": [{"host": "a.example", "methods": ["PROPFIND"]}]}}`, `"PROPFIND" is not one of GET, HEAD`},
		{"empty methods", `{"network": {"allow": [{"host": "a.example", "methods": []}]}}`, "methods is empty"},
		{"empty paths", `{"network": {"allow": [{"host": "a.example", "paths": []}]}}`, "paths is empty"},
		{"relative path", `{"network": {"allow": [{"host": "a.example", "paths": ["org/*"]}]}}`, "must start with /"},
		{"path with dotdot", `{"network": {"allow": [{"host": "a.example", "paths": ["/org/../*"]}]}}`, `".." segment`},
		{"path with encoded slash", `{"network": {"allow": [{"host": "a.example", "paths": ["/org%2f*"]}]}}`, "%2f encodes '/'"},
		{"path with query", `{"network": {"allow": [{"host": "a.example", "paths": ["/org?x=*"]}]}}`, "not a path character"},
		{"path too long", `{"network": {"allow": [{"host": "a.example", "paths": ["/` + strings.Repeat("a", MaxPatternLen) + `"]}]}}`, "more than 256"},
		{"too many paths", `{"network": {"allow": [{"host": "a.example", "paths": [` + strings.Join(manyPaths, ",") + `]}]}}`, "33 paths, more than 32"},
		{"error names the entry", `{"network": {"allow": ["a.example", {"host": "B.example", "paths": ["x"]}]}}`, "network.allow[1] (b.example): paths[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := compileJSON(t, tt.in)
			if err == nil {
				t.Fatalf("compiled to %v; want an error containing %q", c.Summary(), tt.want)
			}
			if !errors.Is(err, ErrInvalidPolicy) {
				t.Errorf("%v does not wrap ErrInvalidPolicy", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %q; want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestCompileSummary(t *testing.T) {
	devSafe := DeveloperSafeHosts()
	devSafeRules := make([]string, len(devSafe))
	for i, h := range devSafe {
		devSafeRules[i] = "allow * " + h
	}
	tests := []struct {
		name string
		in   string
		want Summary
	}{
		{"no policy", `{}`, Summary{Mode: "open", Enforcement: "strict"}},
		{"preset open", `{"preset": "open"}`, Summary{Mode: "open", Preset: "open", Enforcement: "strict"}},
		{"network without default or entries", `{"network": {"enforcement": "best-effort"}}`, Summary{Mode: "open", Enforcement: "best-effort"}},
		{"default allow", `{"network": {"default": "allow"}}`, Summary{Mode: "open", Enforcement: "strict"}},
		{"preset offline", `{"preset": "offline"}`, Summary{Mode: "offline", Preset: "offline", Enforcement: "strict"}},
		{"preset offline, default deny", `{"preset": "offline", "network": {"default": "deny", "allow": []}}`, Summary{Mode: "offline", Preset: "offline", Enforcement: "strict"}},
		{"default deny alone is offline", `{"network": {"default": "deny"}}`, Summary{Mode: "offline", Enforcement: "strict"}},
		{
			name: "developer-safe is the spec's list, in order",
			in:   `{"preset": "developer-safe"}`,
			want: Summary{Mode: "allowlist", Preset: "developer-safe", AllowHosts: []string{
				"github.com", "*.github.com", "*.githubusercontent.com", "crates.io", "*.crates.io",
				"static.crates.io", "pypi.org", "files.pythonhosted.org", "registry.npmjs.org",
				"proxy.golang.org", "sum.golang.org",
			}, HTTPRules: devSafeRules, Enforcement: "strict"},
		},
		{
			name: "developer-safe merged with allow entries, de-duplicated",
			in:   `{"preset": "developer-safe", "network": {"default": "deny", "allow": ["example.com", "PyPI.org.", "github.com", "Example.COM"]}}`,
			want: Summary{Mode: "allowlist", Preset: "developer-safe",
				AllowHosts:  append(DeveloperSafeHosts(), "example.com"),
				HTTPRules:   append(devSafeRules[:len(devSafeRules):len(devSafeRules)], "allow * example.com"),
				Enforcement: "strict"},
		},
		{
			name: "allow entries without a default deny by default",
			in:   `{"network": {"allow": ["a.example", "*.a.example"]}}`,
			want: Summary{Mode: "allowlist", AllowHosts: []string{"a.example", "*.a.example"},
				HTTPRules: []string{"allow * a.example", "allow * *.a.example"}, Enforcement: "strict"},
		},
		{
			name: "limited entries become one rule per path, methods in canonical order",
			in: `{"network": {"default": "deny", "allow": ["pypi.org",
				{"host": "github.com", "methods": ["head", "GET", "GET"], "paths": ["/org/*", "/other/*.git/*", "/org/*"]},
				{"host": "api.example", "methods": ["POST"]},
				{"host": "docs.example", "paths": ["/caf%c3%a9/*"]}]}}`,
			want: Summary{Mode: "allowlist",
				AllowHosts: []string{"pypi.org", "github.com", "api.example", "docs.example"},
				HTTPRules: []string{
					"allow * pypi.org",
					"allow GET,HEAD github.com/org/*",
					"allow GET,HEAD github.com/other/*.git/*",
					"allow POST api.example",
					"allow * docs.example/caf%C3%A9/*",
				}, Enforcement: "strict"},
		},
		{
			name: "identical limited entries merge; different ones stay",
			in: `{"network": {"allow": [
				{"host": "a.example", "methods": ["GET"], "paths": ["/x/*"]},
				{"host": "A.example.", "methods": ["GET"], "paths": ["/x/*"]},
				{"host": "a.example", "methods": ["POST"], "paths": ["/x/*"]}]}}`,
			want: Summary{Mode: "allowlist", AllowHosts: []string{"a.example"},
				HTTPRules: []string{"allow GET a.example/x/*", "allow POST a.example/x/*"}, Enforcement: "strict"},
		},
		{
			name: "an unlimited entry supersedes limited ones for its host, wherever it comes",
			in: `{"network": {"allow": [
				{"host": "a.example", "methods": ["GET"]},
				"b.example",
				{"host": "a.example", "paths": ["/x"]},
				"a.example",
				{"host": "a.example", "methods": ["PUT"]}]}}`,
			want: Summary{Mode: "allowlist", AllowHosts: []string{"a.example", "b.example"},
				HTTPRules: []string{"allow * a.example", "allow * b.example"}, Enforcement: "strict"},
		},
		{
			name: "a limited entry for a preset host adds nothing",
			in:   `{"preset": "developer-safe", "network": {"allow": [{"host": "github.com", "methods": ["GET"]}]}}`,
			want: Summary{Mode: "allowlist", Preset: "developer-safe", AllowHosts: DeveloperSafeHosts(), HTTPRules: devSafeRules, Enforcement: "strict"},
		},
		{
			name: "wildcard and exact are different patterns",
			in:   `{"network": {"allow": ["*.example.com", {"host": "example.com", "methods": ["GET"]}]}}`,
			want: Summary{Mode: "allowlist", AllowHosts: []string{"*.example.com", "example.com"},
				HTTPRules: []string{"allow * *.example.com", "allow GET example.com"}, Enforcement: "strict"},
		},
		{
			name: "ip literals in canonical form",
			in:   `{"network": {"allow": ["203.0.113.7", "::ffff:203.0.113.7", "[2001:DB8::0:1]", {"host": "2001:db8::1", "paths": ["/x"]}]}}`,
			want: Summary{Mode: "allowlist", AllowHosts: []string{"203.0.113.7", "2001:db8::1"},
				HTTPRules: []string{"allow * 203.0.113.7", "allow * 2001:db8::1"}, Enforcement: "strict"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustCompile(t, tt.in)
			if diff := cmp.Diff(tt.want, c.Summary()); diff != "" {
				t.Errorf("Summary (-want +got):\n%s", diff)
			}
			if c.Mode() != tt.want.Mode || c.Offline() != (tt.want.Mode == "offline") || c.Open() != (tt.want.Mode == "open") {
				t.Errorf("Mode %q Offline %v Open %v; want mode %q", c.Mode(), c.Offline(), c.Open(), tt.want.Mode)
			}
		})
	}
}

func TestCompileNilNetworkIsPresetAlone(t *testing.T) {
	for _, preset := range []string{"", PresetOffline, PresetDeveloperSafe, PresetOpen} {
		a, err := Compile(PolicyInput{Preset: preset})
		if err != nil {
			t.Fatal(err)
		}
		b, err := Compile(PolicyInput{Preset: preset, Network: &Network{}})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(a.Summary(), b.Summary()); diff != "" {
			t.Errorf("preset %q: nil network and empty network differ:\n%s", preset, diff)
		}
	}
}

func TestUnenforced(t *testing.T) {
	c := mustCompile(t, `{"network": {"allow": [{"host": "github.com", "methods": ["GET"]}], "enforcement": "best-effort"}}`)
	if !c.HasLimits() {
		t.Fatal("HasLimits = false")
	}
	c.AddUnenforced("http method and path rules: no TLS interception")
	c.AddUnenforced("http method and path rules: no TLS interception")
	c.AddUnenforced("ports other than 80 and 443")
	want := Summary{Mode: "allowlist", AllowHosts: []string{"github.com"}, HTTPRules: []string{"allow GET github.com"},
		Enforcement: "best-effort",
		Unenforced:  []string{"http method and path rules: no TLS interception", "ports other than 80 and 443"}}
	got := c.Summary()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Summary (-want +got):\n%s", diff)
	}
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON := `{"mode":"allowlist","allow_hosts":["github.com"],"http_rules":["allow GET github.com"],"enforcement":"best-effort","unenforced":["http method and path rules: no TLS interception","ports other than 80 and 443"]}`
	if string(b) != wantJSON {
		t.Errorf("JSON:\n got %s\nwant %s", b, wantJSON)
	}
	if s := mustCompile(t, `{"preset": "developer-safe"}`); s.HasLimits() {
		t.Error("developer-safe HasLimits = true")
	}
}

func TestEntries(t *testing.T) {
	c := mustCompile(t, `{"network": {"allow": ["A.example.", {"host": "b.example", "methods": ["get"], "paths": ["/x/%aa"]}]}}`)
	want := []AllowEntry{{Host: "a.example"}, {Host: "b.example", Methods: []string{"GET"}, Paths: []string{"/x/%AA"}}}
	if diff := cmp.Diff(want, c.Entries()); diff != "" {
		t.Errorf("Entries (-want +got):\n%s", diff)
	}
	// The entries compile back to the same policy.
	again, err := Compile(PolicyInput{Network: &Network{Allow: c.Entries()}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(c.Summary(), again.Summary()); diff != "" {
		t.Errorf("recompiled (-first +second):\n%s", diff)
	}
}

func TestDeveloperSafeHostsIsACopy(t *testing.T) {
	h := DeveloperSafeHosts()
	h[0] = "evil.example"
	if DeveloperSafeHosts()[0] != "github.com" {
		t.Fatal("DeveloperSafeHosts shares its slice")
	}
}
