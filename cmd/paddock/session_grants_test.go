package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCLISessionGrants: `paddock session grant/grants/ungrant` against
// `paddock serve`: a value from stdin and a secret from the daemon's
// PADDOCK_SECRET_<REF>, shown without their values (table and --json),
// revoked one and all; a missing variable and a missing source are usage
// errors naming what to fix.
func TestCLISessionGrants(t *testing.T) {
	bin, state, addr, env := daemonSetup(t)
	const envSecret = "cli-env-secret-93ab"
	const stdinSecret = "Bearer cli-stdin-secret-51fe"
	srv := startServe(t, bin, state, addr, append(env, "PADDOCK_SECRET_CLI_REF="+envSecret), "--stop-sandboxes")
	defer stopServe(t, srv)
	pd := func(stdin string, args ...string) (string, string, int) {
		t.Helper()
		var in []byte
		if stdin != "" {
			in = []byte(stdin)
		}
		out, se, code := runCLI(t, bin, env, in, args...)
		if strings.Contains(out+se, envSecret) || strings.Contains(out+se, "stdin-secret") {
			t.Errorf("%v printed a secret: %q %q", args, out, se)
		}
		return out, se, code
	}
	var s struct{ ID string }
	out, se, code := pd("", "--json", "session", "run")
	if err := json.Unmarshal([]byte(out), &s); err != nil || code != 0 {
		t.Fatalf("session run: %q %q %d", out, se, code)
	}
	out, se, code = pd(stdinSecret+"\n", "session", "grant", s.ID, "--host", "api.example.com", "--value-stdin", "--path", "/v1/*", "--method", "GET")
	if code != 0 || !strings.Contains(out, "gr-") || !strings.Contains(out, "api.example.com") || !strings.Contains(out, "/v1/*") {
		t.Fatalf("grant --value-stdin: %d %q %q", code, out, se)
	}
	var g struct {
		ID        string `json:"id"`
		SecretRef string `json:"secret_ref"`
		Header    string `json:"header"`
	}
	out, se, code = pd("", "--json", "session", "grant", s.ID, "--host", "*.example.org", "--secret-ref", "CLI_REF", "--header", "X-Api-Key", "--ttl-seconds", "120")
	if err := json.Unmarshal([]byte(out), &g); err != nil || code != 0 || g.SecretRef != "CLI_REF" || g.Header != "X-Api-Key" {
		t.Fatalf("grant --secret-ref: %d %q %q", code, out, se)
	}
	if out, _, code := pd("", "session", "grants", s.ID); code != 0 || strings.Count(out, "gr-") != 2 || !strings.Contains(out, "CLI_REF") {
		t.Errorf("grants: %d %q", code, out)
	}
	for _, tc := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"", []string{"session", "grant", s.ID, "--host", "a.example", "--secret-ref", "NOPE"}, "PADDOCK_SECRET_NOPE"},
		{"", []string{"session", "grant", s.ID, "--host", "a.example"}, "--secret-ref"},
		{"x", []string{"session", "grant", s.ID, "--host", "a.example", "--value-stdin", "--secret-ref", "CLI_REF"}, "exactly one"},
		{"x", []string{"session", "grant", s.ID, "--host", "a.example", "--value-stdin", "--header", "Cookie"}, "Cookie"},
	} {
		if _, se, code := pd(tc.stdin, tc.args...); code != exitUsage || !strings.Contains(se, tc.want) {
			t.Errorf("%v: code %d stderr %q, want a usage error naming %q", tc.args, code, se, tc.want)
		}
	}
	if _, _, code := pd("", "session", "ungrant", s.ID, g.ID); code != 0 {
		t.Errorf("ungrant one: %d", code)
	}
	if _, _, code := pd("", "session", "ungrant", s.ID, g.ID); code == 0 {
		t.Error("ungrant of a revoked grant succeeded")
	}
	if out, _, _ := pd("", "--json", "session", "grants", s.ID); strings.Count(out, "gr-") != 1 {
		t.Errorf("after ungrant one: %q", out)
	}
	if _, _, code := pd("", "session", "ungrant", s.ID); code != 0 {
		t.Errorf("ungrant all: %d", code)
	}
	if out, _, _ := pd("", "session", "grants", s.ID); strings.Contains(out, "gr-") {
		t.Errorf("after ungrant all: %q", out)
	}
	if out, _, _ := pd("", "session", "timeline", s.ID); !strings.Contains(out, "grant.create") || !strings.Contains(out, "grant.revoke") {
		t.Errorf("timeline: %q", out)
	}
	pd("", "session", "rm", s.ID)
}
