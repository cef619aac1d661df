package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIServeSandboxes runs `paddock serve` and the `paddock sandboxes`
// verbs against it: exit codes are the command's, files go both ways with
// awkward names, and sandboxes stay out of `paddock session`. (TestCLI
// covers the daemon-less `paddock sandbox run`.)
func TestCLIServeSandboxes(t *testing.T) {
	bin, state, addr, env := daemonSetup(t)
	defer stopServe(t, startServe(t, bin, state, addr, env, "--stop-sandboxes"))
	pd := func(stdin []byte, args ...string) (string, string, int) {
		t.Helper()
		return runCLI(t, bin, env, stdin, args...)
	}
	out, _, code := pd(nil, "sandboxes", "create", "-q", "--ttl-seconds", "300")
	id := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(id, "sbx-") {
		t.Fatalf("sandboxes create -q: %q %d", out, code)
	}
	local := filepath.Join(t.TempDir(), "in put.txt")
	os.WriteFile(local, []byte("from the host\n"), 0o644)
	pulled := filepath.Join(t.TempDir(), "out.txt")
	awkward := "/workspace/a dir/ünï 文件.txt"
	steps := []struct {
		stdin    string
		args     []string
		out, err string
		code     int
	}{
		{"", []string{"sandboxes", "exec", id, "--", "echo out; echo err >&2; exit 3"}, "out\n", "err\n", 3},
		{"", []string{"sandboxes", "exec", id, "-e", "WHO=paddock", "--cwd", "/tmp", "--", `echo "$WHO in $(pwd)"`}, "paddock in /tmp\n", "", 0},
		{"", []string{"sandboxes", "exec", id, "--", "kill -TERM $$"}, "", "", 128 + 15},
		{"", []string{"--json", "sandboxes", "exec", id, "--", "exit 5"}, `"exit_code": 5`, "", 5},
		{"", []string{"sandboxes", "write", id, awkward, local, "--mode", "640"}, "wrote " + awkward + " (14 bytes, mode 0640)", "", 0},
		{"", []string{"sandboxes", "read", id, awkward}, "from the host\n", "", 0},
		{"", []string{"sandboxes", "read", id, awkward, pulled}, "", "mode 0640", 0},
		{"piped in\n", []string{"sandboxes", "write", id, "/tmp/piped.txt"}, "wrote /tmp/piped.txt", "", 0},
		{"", []string{"sandboxes", "exec", id, "--", "cat /tmp/piped.txt"}, "piped in\n", "", 0},
		{"", []string{"--json", "sandboxes", "read", id, "/tmp/piped.txt"}, `"content_base64": "cGlwZWQgaW4K"`, "", 0},
		{"", []string{"sandboxes", "read", id, "/workspace/none"}, "", "does not exist", exitNotFound},
		{"", []string{"sandboxes", "read", id, "relative/path"}, "", "relative", exitUsage},
		{"", []string{"sandboxes", "ls"}, id, "", 0},
		{"", []string{"sandboxes", "get", id}, "running", "", 0},
		{"", []string{"session", "get", id}, "", "a sandbox", exitNotFound},
		{"", []string{"session", "ls"}, "ID", "", 0},
		{"", []string{"sandboxes", "rm", id}, "", "", 0},
		{"", []string{"sandboxes", "rm", id}, "", "", 0},
		{"", []string{"sandboxes", "exec", id, "--", "true"}, "", "", exitNotFound},
		{"", []string{"sandboxes", "ls"}, "ID", "", 0},
		{"", []string{"sandboxes", "create", "--json", "--no-such-flag"}, "", "", exitUsage},
	}
	for _, st := range steps {
		out, errOut, code := pd([]byte(st.stdin), st.args...)
		if code != st.code || !strings.Contains(out, st.out) || !strings.Contains(errOut, st.err) {
			t.Errorf("paddock %s: code %d (want %d), stdout %q (want %q), stderr %q (want %q)",
				strings.Join(st.args, " "), code, st.code, out, st.out, errOut, st.err)
		}
	}
	if b, err := os.ReadFile(pulled); err != nil || string(b) != "from the host\n" {
		t.Errorf("read into a local file: %q %v", b, err)
	}
	if out, _, _ := pd(nil, "session", "ls"); strings.Contains(out, "sbx-") {
		t.Errorf("a sandbox in the session list: %q", out)
	}
	if out, _, _ := pd(nil, "--json", "sandboxes", "ls"); strings.TrimSpace(out) != "[]" {
		var v any
		if json.Unmarshal([]byte(out), &v) != nil || strings.Contains(out, id) {
			t.Errorf("sandboxes ls --json after rm: %q", out)
		}
	}
}
