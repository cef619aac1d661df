package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCLISessionRunPolicy: `paddock session run --allow/--preset/--policy`
// against `paddock serve`: the policy is compiled into the record, the
// sandbox gets the egress proxy, a host outside the policy is refused by
// it (naming the host), and bad policies are refused before anything is
// made.
func TestCLISessionRunPolicy(t *testing.T) {
	bin, state, addr, env := daemonSetup(t)
	srv := startServe(t, bin, state, addr, env, "--stop-sandboxes")
	defer stopServe(t, srv)
	pd := func(stdin string, args ...string) (string, string, int) {
		t.Helper()
		var in []byte
		if stdin != "" {
			in = []byte(stdin)
		}
		return runCLI(t, bin, env, in, args...)
	}
	var s struct {
		ID     string
		Policy struct {
			Mode       string
			AllowHosts []string `json:"allow_hosts"`
		}
	}
	out, se, code := pd("", "--json", "session", "run", "--allow", "allowed.example", "--allow", "*.pkg.example")
	if err := json.Unmarshal([]byte(out), &s); err != nil || code != 0 || s.Policy.Mode != "allowlist" || strings.Join(s.Policy.AllowHosts, ",") != "allowed.example,*.pkg.example" {
		t.Fatalf("session run --allow: %q %q %d", out, se, code)
	}
	// The mini image has no curl: bash speaks to the proxy itself.
	get := `bash -c 'exec 3<>/dev/tcp/127.0.0.1/3128; printf "GET http://other.example/ HTTP/1.0\r\n\r\n" >&3; timeout 5 head -1 <&3'`
	if out, se, code := pd("", "session", "exec", s.ID, "--", get); code != 0 || !strings.Contains(out, "403") {
		t.Errorf("a host outside the policy: %d %q %q", code, out, se)
	}
	if out, _, _ := pd("", "session", "timeline", s.ID); !strings.Contains(out, "egress.deny") {
		t.Errorf("the refusal is not in the timeline: %q", out)
	}
	// The egress log (outside the ledger's chain) has it too.
	if out, se, code := pd("", "--state-dir", state, "ledger", "egress", s.ID); code != 0 ||
		!strings.Contains(out, `"kind":"egress.deny","host":"other.example"`) || !strings.Contains(out, `"count":1`) {
		t.Errorf("ledger egress: %d %q %q", code, out, se)
	}
	if _, se, code := pd("", "--state-dir", state, "ledger", "egress", s.ID, "--limit", "0"); code != exitUsage || !strings.Contains(se, "--limit") {
		t.Errorf("ledger egress --limit 0: %d %q", code, se)
	}
	if _, se, code := pd("", "serve", "--egress-log-retention", "5m"); code != exitUsage || !strings.Contains(se, "--egress-log-retention") {
		t.Errorf("serve --egress-log-retention 5m: %d %q", code, se)
	}
	// compile-policy shows the same compile and creates nothing; a policy
	// a create would refuse exits 5 with the refusal.
	if out, se, code := pd("", "session", "compile-policy", "--allow", "allowed.example"); code != 0 || !strings.Contains(out, "network: egress") || !strings.Contains(out, "allowed.example") {
		t.Errorf("compile-policy --allow: %d %q %q", code, out, se)
	}
	if out, se, code := pd(`{"process":{"allow":["ls*"],"enforce":"exec"}}`, "session", "compile-policy", "--policy", "-"); code != exitDenied || !strings.Contains(out, "refused (400 invalid_argument)") {
		t.Errorf("compile-policy of a refused policy: %d %q %q", code, out, se)
	}
	pd("", "session", "rm", s.ID)

	// No policy is offline: no proxy to speak to.
	out, _, _ = pd("", "--json", "session", "run")
	json.Unmarshal([]byte(out), &s)
	if s.Policy.Mode != "offline" {
		t.Errorf("the default policy: %q", out)
	}
	if _, _, code := pd("", "session", "exec", s.ID, "--", get); code == 0 {
		t.Error("an offline session reached a proxy")
	}
	pd("", "session", "rm", s.ID)

	for _, tc := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"", []string{"session", "run", "--preset", "nope"}, "preset"},
		{"", []string{"session", "run", "--allow", "*.com"}, "*.com"},
		{`{"network":{"allow":["a.example"],"colour":1}}`, []string{"session", "run", "--policy", "-"}, "colour"},
		{`{"preset":"open"}`, []string{"session", "run", "--policy", "-", "--allow", "x.example"}, "--policy takes the whole policy"},
	} {
		if _, se, code := pd(tc.stdin, tc.args...); code != exitUsage || !strings.Contains(se, tc.want) {
			t.Errorf("%v: code %d stderr %q, want usage error naming %q", tc.args, code, se, tc.want)
		}
	}
	if out, _, _ := pd("", "--json", "session", "ls"); strings.Contains(out, "ses-") {
		t.Errorf("refused creates left sessions: %s", out)
	}
}
