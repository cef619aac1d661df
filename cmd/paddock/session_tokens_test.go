package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCLISessionTokens: `paddock session token/tokens/untoken/whoami`
// against `paddock serve`, and the session verbs run with a session token
// in PADDOCK_TOKEN: the granted ones work on its session, the others fail
// with exit 5 and a message naming what is missing, a revoked token with
// exit 7. The token is printed once and alone with -q.
func TestCLISessionTokens(t *testing.T) {
	bin, state, addr, env := daemonSetup(t)
	srv := startServe(t, bin, state, addr, env, "--stop-sandboxes")
	defer stopServe(t, srv)
	as := func(tok string, args ...string) (string, string, int) {
		t.Helper()
		e := env
		if tok != "" {
			e = append(slices.Clone(env), "PADDOCK_TOKEN="+tok)
		}
		return runCLI(t, bin, e, nil, args...)
	}
	var s struct{ ID string }
	out, se, code := as("", "--json", "session", "run")
	if err := json.Unmarshal([]byte(out), &s); err != nil || code != 0 {
		t.Fatalf("session run: %q %q %d", out, se, code)
	}
	defer as("", "session", "rm", s.ID)
	var other struct{ ID string }
	out, _, _ = as("", "--json", "session", "run")
	json.Unmarshal([]byte(out), &other)
	defer as("", "session", "rm", other.ID)

	out, se, code = as("", "session", "token", s.ID, "--ops", "exec,files.read,files.write,jobs,checkpoint,git", "--ttl", "30m", "--label", "cli agent", "-q")
	tok := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(tok, "pdk_tok-") || strings.Count(out, "\n") != 1 || se != "" {
		t.Fatalf("token -q: %d %q %q", code, out, se)
	}
	// Without -q: the id and the ops, then the token, and a note that it
	// is shown once.
	out, se, code = as("", "session", "token", s.ID, "--ops", "exec")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 || !strings.Contains(lines[0], "tok-") || !strings.HasPrefix(lines[1], "pdk_tok-") || !strings.Contains(se, "shown once") {
		t.Errorf("token: %d %q %q", code, out, se)
	}
	execOnly := lines[len(lines)-1]

	local := filepath.Join(t.TempDir(), "note.txt")
	os.WriteFile(local, []byte("from the agent\n"), 0o600)
	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"session", "exec", s.ID, "--", "echo hi"}, 0, "hi\n"},
		{[]string{"session", "exec", "--stream", s.ID, "--", "echo streamed"}, 0, "streamed\n"},
		{[]string{"session", "put", s.ID, local, "/workspace/note.txt"}, 0, ""},
		{[]string{"session", "cat", s.ID, "/workspace/note.txt"}, 0, "from the agent\n"},
		{[]string{"session", "files", s.ID, "/workspace"}, 0, "note.txt"},
		{[]string{"session", "checkpoint", s.ID, "--tag", "by-agent"}, 0, "by-agent"},
		{[]string{"session", "jobs", s.ID}, 0, "JOB"},
		{[]string{"session", "git", s.ID, "status"}, exitConflict, ""}, // granted; the mini image has no git
		{[]string{"session", "whoami"}, 0, "session token tok-"},
	} {
		out, se, code := as(tok, tc.args...)
		if code != tc.code || !strings.Contains(out, tc.out) {
			t.Errorf("%v with the session token: %d %q %q, want %d and %q", tc.args, code, out, se, tc.code, tc.out)
		}
	}
	job, _, code := as(tok, "session", "bg", s.ID, "--", "echo from-job")
	job = strings.TrimSpace(job)
	if code != 0 || job == "" {
		t.Fatalf("bg: %d %q", code, job)
	}
	if out, se, code := as(tok, "session", "logs", "-f", s.ID, job); code != 0 || out != "from-job\n" {
		t.Errorf("logs -f: %d %q %q", code, out, se)
	}
	// What the token was not granted, or cannot be: exit 5, saying why.
	for _, tc := range []struct {
		tok  string
		args []string
		says string
	}{
		{tok, []string{"session", "get", s.ID}, "not granted read"},
		{tok, []string{"session", "timeline", s.ID}, "not granted read"},
		{tok, []string{"session", "ls"}, "session token cannot"},
		{tok, []string{"session", "run"}, "session token cannot"},
		{tok, []string{"session", "rm", s.ID}, "session token cannot"},
		{tok, []string{"session", "fork", s.ID}, "session token cannot"},
		{tok, []string{"session", "restore", s.ID, "by-agent"}, "session token cannot"},
		{tok, []string{"session", "token", s.ID, "--ops", "exec"}, "session token cannot"},
		{tok, []string{"session", "tokens", s.ID}, "session token cannot"},
		{tok, []string{"session", "exec", other.ID, "--", "true"}, "works only on /v1/agents/sessions/" + s.ID},
		{tok, []string{"sandboxes", "ls"}, "session token cannot"},
		{execOnly, []string{"session", "cat", s.ID, "/workspace/note.txt"}, "not granted files.read"},
		{execOnly, []string{"session", "put", s.ID, local, "/workspace/x"}, "not granted files.write"},
		{execOnly, []string{"session", "checkpoint", s.ID}, "not granted checkpoint"},
		{execOnly, []string{"session", "bg", s.ID, "--", "true"}, "not granted jobs"},
	} {
		if out, se, code := as(tc.tok, tc.args...); code != exitForbidden || !strings.Contains(se, tc.says) {
			t.Errorf("%v: %d %q %q, want exit %d saying %q", tc.args, code, out, se, exitForbidden, tc.says)
		}
	}
	// The admin lists them (ids, never the tokens) and revokes one.
	out, _, code = as("", "session", "tokens", s.ID)
	if code != 0 || strings.Count(out, "tok-") != 2 || strings.Contains(out, "pdk_") || !strings.Contains(out, "cli agent") {
		t.Errorf("tokens: %d %q", code, out)
	}
	var list struct {
		Tokens []struct {
			ID    string   `json:"id"`
			Ops   []string `json:"ops"`
			Token string   `json:"token"`
		} `json:"tokens"`
	}
	out, _, _ = as("", "--json", "session", "tokens", s.ID)
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list.Tokens) != 2 || list.Tokens[0].Token != "" {
		t.Fatalf("tokens --json: %q %v", out, err)
	}
	if _, se, code := as("", "session", "untoken", s.ID, tok); code != exitUsage || !strings.Contains(se, "id") {
		t.Errorf("untoken given the token itself: %d %q", code, se)
	}
	if _, se, code := as("", "session", "untoken", s.ID, list.Tokens[0].ID); code != 0 {
		t.Errorf("untoken: %d %q", code, se)
	}
	if _, se, code := as(tok, "session", "exec", s.ID, "--", "true"); code != exitUnauthorized || !strings.Contains(se, "revoked") {
		t.Errorf("exec with a revoked token: %d %q, want exit %d saying revoked", code, se, exitUnauthorized)
	}
	if _, _, code := as("pdk_tok-0123456789abcdef_"+strings.Repeat("0", 64), "session", "whoami"); code != exitUnauthorized {
		t.Errorf("an unknown token: %d", code)
	}
	if out, _, _ := as("", "session", "timeline", s.ID); !strings.Contains(out, "token.mint") || !strings.Contains(out, "token.revoke") || strings.Contains(out, "pdk_") {
		t.Errorf("timeline: %q", out)
	}
	if strings.Contains(serveLogs(srv), "pdk_tok-") {
		t.Error("the daemon logged a session token")
	}
}

// TestCLITenants: `paddock tenant add/ls/rm` keep the tenants file (0600,
// hashes only); `paddock serve --tenants` uses it, reads it again on
// SIGHUP, keeps the tenants in use when the new file is refused, and
// refuses to start on an unsafe or invalid file with a message naming the
// problem. A tenant sees only its own sessions.
func TestCLITenants(t *testing.T) {
	bin, state, addr, env := daemonSetup(t)
	file := filepath.Join(t.TempDir(), "tenants.json")
	pd := func(tok string, args ...string) (string, string, int) {
		t.Helper()
		e := env
		if tok != "" {
			e = append(slices.Clone(env), "PADDOCK_TOKEN="+tok)
		}
		return runCLI(t, bin, e, nil, args...)
	}
	out, se, code := pd("", "tenant", "add", "acme", "--tenants", file)
	acme := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(acme, "pdk_tn_") || !strings.Contains(se, "shown once") {
		t.Fatalf("tenant add: %d %q %q", code, out, se)
	}
	raw, _ := os.ReadFile(file)
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 || strings.Contains(string(raw), acme) || !strings.Contains(string(raw), `"acme"`) {
		t.Errorf("tenants file: %v %v %s", fi, err, raw)
	}
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"tenant", "add", "acme", "--tenants", file}, exitConflict},
		{[]string{"tenant", "add", "Bad_Name", "--tenants", file}, exitUsage},
		{[]string{"tenant", "rm", "nobody", "--tenants", file}, exitNotFound},
		{[]string{"tenant", "ls"}, exitUsage},
	} {
		if _, se, code := pd("", tc.args...); code != tc.code {
			t.Errorf("%v: %d %q, want %d", tc.args, code, se, tc.code)
		}
	}
	// An unsafe or invalid file keeps the daemon from starting.
	bad := filepath.Join(t.TempDir(), "bad.json")
	for _, tc := range []struct {
		body string
		mode os.FileMode
		says string
	}{
		{`{"tenants":[]}`, 0o666, "writable by its group or others"},
		{`{"tenants":[{"name":"x"}]`, 0o600, "not valid JSON"},
		{`{"tenants":[{"name":"UPPER","token_sha256":"` + strings.Repeat("a", 64) + `"}]}`, 0o600, `name "UPPER"`},
	} {
		os.WriteFile(bad, []byte(tc.body), 0o600)
		os.Chmod(bad, tc.mode)
		_, se, code := runCLI(t, bin, env, nil, "--state-dir", t.TempDir(), "serve", "--listen", "127.0.0.1:0", "--tenants", bad)
		if code != exitUsage || !strings.Contains(se, tc.says) || !strings.Contains(se, bad) {
			t.Errorf("serve with %s (mode %o): %d %q, want exit %d saying %q", tc.body, tc.mode, code, se, exitUsage, tc.says)
		}
	}

	srv := startServe(t, bin, state, addr, env, "--stop-sandboxes", "--tenants", file)
	defer stopServe(t, srv)
	if out, _, code := pd(acme, "session", "whoami"); code != 0 || out != "tenant acme\n" {
		t.Errorf("whoami as acme: %d %q", code, out)
	}
	var mine, admins struct{ ID, Tenant string }
	out, _, _ = pd(acme, "--json", "session", "run")
	json.Unmarshal([]byte(out), &mine)
	out, _, _ = pd("", "--json", "session", "run")
	json.Unmarshal([]byte(out), &admins)
	defer pd("", "session", "rm", mine.ID)
	defer pd("", "session", "rm", admins.ID)
	if mine.Tenant != "acme" {
		t.Errorf("acme's session has tenant %q", mine.Tenant)
	}
	if out, _, _ := pd(acme, "session", "ls"); !strings.Contains(out, mine.ID) || strings.Contains(out, admins.ID) {
		t.Errorf("acme's list: %q", out)
	}
	if _, _, code := pd(acme, "session", "get", admins.ID); code != exitNotFound {
		t.Errorf("acme reads the admin's session: %d, want %d", code, exitNotFound)
	}
	// A tenant mints tokens for its own sessions.
	if out, se, code := pd(acme, "session", "token", mine.ID, "--ops", "read", "-q"); code != 0 || !strings.HasPrefix(out, "pdk_tok-") {
		t.Errorf("acme mints: %d %q %q", code, out, se)
	}
	// SIGHUP: a tenant added while the daemon runs works after it.
	out, _, _ = pd("", "tenant", "add", "beta", "--tenants", file)
	beta := strings.TrimSpace(out)
	if _, _, code := pd(beta, "session", "whoami"); code != exitUnauthorized {
		t.Errorf("beta before SIGHUP: %d", code)
	}
	hup := func() {
		t.Helper()
		if err := srv.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(what string, tok string, want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, _, code := pd(tok, "session", "whoami")
			if code == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: whoami exits %d, want %d\n%s", what, code, want, serveLogs(srv))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	hup()
	waitFor("beta after SIGHUP", beta, 0)
	// A file made unsafe is refused on SIGHUP; the tenants stay.
	pd("", "tenant", "rm", "acme", "--tenants", file)
	os.Chmod(file, 0o666)
	hup()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(serveLogs(srv), "tenants file refused"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no refusal logged:\n%s", serveLogs(srv))
		}
	}
	if !strings.Contains(serveLogs(srv), "writable by its group or others") {
		t.Errorf("the refusal does not say why:\n%s", serveLogs(srv))
	}
	if _, _, code := pd(acme, "session", "whoami"); code != 0 {
		t.Errorf("acme after a refused reload: %d", code)
	}
	os.Chmod(file, 0o600)
	hup()
	waitFor("acme removed", acme, exitUnauthorized)
	if out, _, code := pd("", "tenant", "ls", "--tenants", file); code != 0 || out != "NAME\nbeta\n" {
		t.Errorf("tenant ls: %d %q", code, out)
	}
	if strings.Contains(serveLogs(srv), "pdk_tn_") {
		t.Error("the daemon logged a tenant token")
	}
	if srv.ProcessState != nil {
		t.Error("SIGHUP ended the daemon")
	}
}
