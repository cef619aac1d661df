package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"paddock.dev/paddock/internal/testutil"
)

// tsClientDir is the official TypeScript MCP SDK's client script and its
// npm package (the SDK's version pinned in package-lock.json).
const tsClientDir = "../../mcp/testdata/tsclient"

// TestMCPTypeScriptClient: a client no one here wrote, the official
// TypeScript SDK's (@modelcontextprotocol/sdk) over stdio, runs the
// issue's proof against `paddock mcp serve` and `paddock serve`: tools,
// create, exec, the approval id of a held command, approve, the approved
// run, file write and read, fork and promote, delete
// (mcp/testdata/tsclient/client.mjs). The npm install is made once
// (scripts/install-deps.sh, or here when node_modules is missing) and
// reused after.
func TestMCPTypeScriptClient(t *testing.T) {
	testutil.RequiresRoot(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed (scripts/install-deps.sh installs it)")
	}
	if _, err := os.Stat(filepath.Join(tsClientDir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		out, err := exec.Command("npm", "ci", "--prefix", tsClientDir, "--no-audit", "--no-fund", "--prefer-offline").CombinedOutput()
		if err != nil {
			t.Fatalf("npm ci: %v\n%s", err, out)
		}
	}
	bin, state, addr, env := daemonSetup(t)
	srv := startServe(t, bin, state, addr, env, "--stop-sandboxes")
	defer stopServe(t, srv)

	cmd := exec.Command(node, "client.mjs")
	cmd.Dir = tsClientDir
	cmd.Env = append(slices.Clone(env), "PADDOCK_BIN="+bin)
	cmd.WaitDelay = 5 * time.Second
	var stderr strings.Builder
	cmd.Stderr = &stderr
	timer := time.AfterFunc(3*time.Minute, func() { cmd.Process.Kill() })
	out, err := cmd.Output()
	timer.Stop()
	if err != nil {
		t.Fatalf("client.mjs: %v\nstdout: %s\nstderr: %s", err, out, stderr.String())
	}
	var r struct {
		Tools      []string `json:"tools"`
		Held       string   `json:"held"`
		Promoted   string   `json:"promoted"`
		FinalState string   `json:"final_state"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("report %q: %v", out, err)
	}
	if !slices.Contains(r.Tools, "session_exec") || !slices.Contains(r.Tools, "session_approve") || !strings.Contains(r.Held, "approval_wait_seconds") ||
		r.Promoted != "made in the child\n" || r.FinalState != "deleted" {
		t.Errorf("report: %+v", r)
	}
}
