package main

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"paddock.dev/paddock/client"
	"paddock.dev/paddock/internal/testutil"
)

// tsClientDir is the official TypeScript MCP SDK's client script and its
// npm package (the SDK's version pinned in package-lock.json).
const tsClientDir = "../../mcp/testdata/tsclient"

// TestMCPTypeScriptClient: clients no one here wrote drive `paddock mcp
// serve` against `paddock serve` over stdio, and the daemon's own /mcp over
// streamable HTTP through the gateway with TLS. The official TypeScript
// SDK's (@modelcontextprotocol/sdk) runs the proof: tools, create,
// exec, the approval id of a held command, approve, the approved run,
// file write and read, fork and promote, delete
// (mcp/testdata/tsclient/client.mjs). The MCP Inspector's CLI mode
// (@modelcontextprotocol/inspector-cli) lists the tools with and without
// --allow-write and creates, runs in and deletes a session, given the
// server in an agent-style configuration file. The npm install is made
// once (scripts/install-deps.sh, or here when node_modules is missing)
// and reused after.
func TestMCPTypeScriptClient(t *testing.T) {
	testutil.RequiresRoot(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed (scripts/install-deps.sh installs it)")
	}
	_, errSDK := os.Stat(filepath.Join(tsClientDir, "node_modules", "@modelcontextprotocol", "sdk"))
	_, errInspector := os.Stat(filepath.Join(tsClientDir, "node_modules", "@modelcontextprotocol", "inspector-cli"))
	if errSDK != nil || errInspector != nil {
		out, err := exec.Command("npm", "ci", "--prefix", tsClientDir, "--no-audit", "--no-fund", "--prefer-offline").CombinedOutput()
		if err != nil {
			t.Fatalf("npm ci: %v\n%s", err, out)
		}
	}
	bin, state, addr, env := daemonSetup(t)
	srv := startServe(t, bin, state, addr, env, "--stop-sandboxes", "--mcp-allow-write")
	defer stopServe(t, srv)

	runTS := func(transport string, extraEnv ...string) {
		t.Helper()
		cmd := exec.Command(node, "client.mjs")
		cmd.Dir = tsClientDir
		cmd.Env = append(slices.Clone(env), extraEnv...)
		cmd.WaitDelay = 5 * time.Second
		var stderr strings.Builder
		cmd.Stderr = &stderr
		timer := time.AfterFunc(3*time.Minute, func() { cmd.Process.Kill() })
		out, err := cmd.Output()
		timer.Stop()
		if err != nil {
			t.Fatalf("client.mjs over %s: %v\nstdout: %s\nstderr: %s", transport, err, out, stderr.String())
		}
		var r struct {
			Transport  string   `json:"transport"`
			Tools      []string `json:"tools"`
			Held       string   `json:"held"`
			Promoted   string   `json:"promoted"`
			FinalState string   `json:"final_state"`
		}
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("report %q: %v", out, err)
		}
		if r.Transport != transport || !slices.Contains(r.Tools, "session_exec") || !slices.Contains(r.Tools, "session_approve") || !strings.Contains(r.Held, "approval_wait_seconds") ||
			r.Promoted != "made in the child\n" || r.FinalState != "deleted" {
			t.Errorf("report over %s: %+v", transport, r)
		}
	}
	runTS("stdio", "PADDOCK_BIN="+bin)
	// The same proof over streamable HTTP: the daemon's /mcp through the
	// gateway's TLS, the admin token as the bearer token (serve was
	// started with --mcp-allow-write).
	ca := gatewayRoot(state)
	runTS("http", "MCP_HTTP_URL=https://"+addr+"/mcp", "NODE_EXTRA_CA_CERTS="+ca)
	// Through the gateway, no token is 401 before any MCP work.
	roots, err := client.TrustPEM(ca)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	res, err := hc.Post("https://"+addr+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("/mcp without a token through the gateway: %d", res.StatusCode)
	}

	// The MCP Inspector's CLI mode (@modelcontextprotocol/inspector-cli),
	// given the server as an agent's configuration file names it.
	cfg := filepath.Join(t.TempDir(), "mcp.json")
	servers := map[string]any{"mcpServers": map[string]any{
		"paddock":    map[string]any{"command": bin, "args": []string{"mcp", "serve", "--allow-write"}},
		"paddock-ro": map[string]any{"command": bin, "args": []string{"mcp", "serve"}},
		// The daemon's own /mcp over streamable HTTP through the gateway.
		"paddock-http": map[string]any{"type": "streamable-http", "url": "https://" + addr + "/mcp"},
	}}
	raw, _ := json.Marshal(servers)
	if err := os.WriteFile(cfg, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	inspect := func(server string, args ...string) map[string]any {
		t.Helper()
		// Run from the inspector's build directory: it finds its own
		// package.json by a path relative to the working directory.
		cmd := exec.Command(node, append([]string{"cli.js", "--cli", "--config", cfg, "--server", server}, args...)...)
		cmd.Dir = filepath.Join(tsClientDir, "node_modules", "@modelcontextprotocol", "inspector-cli", "build")
		cmd.Env = append(slices.Clone(env), "NODE_EXTRA_CA_CERTS="+ca)
		cmd.WaitDelay = 5 * time.Second
		var stderr strings.Builder
		cmd.Stderr = &stderr
		timer := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() })
		defer timer.Stop()
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("inspector %v: %v\nstdout: %s\nstderr: %s", args, err, out, stderr.String())
		}
		var v map[string]any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("inspector %v printed %q: %v", args, out, err)
		}
		return v
	}
	names := func(v map[string]any) []string {
		var n []string
		tools, _ := v["tools"].([]any)
		for _, x := range tools {
			if m, ok := x.(map[string]any); ok {
				n = append(n, fmt.Sprint(m["name"]))
			}
		}
		return n
	}
	if n := names(inspect("paddock", "--method", "tools/list")); !slices.Contains(n, "session_exec") || !slices.Contains(n, "session_create") {
		t.Errorf("inspector tools/list with --allow-write: %v", n)
	}
	if n := names(inspect("paddock-ro", "--method", "tools/list")); slices.Contains(n, "session_exec") || !slices.Contains(n, "session_file_read") {
		t.Errorf("inspector tools/list without --allow-write: %v", n)
	}
	structured := func(v map[string]any) map[string]any {
		m, _ := v["structuredContent"].(map[string]any)
		if m == nil || v["isError"] == true {
			t.Fatalf("inspector tools/call: %v", v)
		}
		return m
	}
	created := structured(inspect("paddock", "--method", "tools/call", "--tool-name", "session_create", "--tool-arg", "agent=inspector"))
	id, _ := created["id"].(string)
	ran := structured(inspect("paddock", "--method", "tools/call", "--tool-name", "session_exec", "--tool-arg", "session="+id, "--tool-arg", "command=echo inspected"))
	if ran["stdout"] != "inspected\n" {
		t.Errorf("inspector exec: %v", ran)
	}
	structured(inspect("paddock", "--method", "tools/call", "--tool-name", "session_delete", "--tool-arg", "session="+id))

	// The Inspector over streamable HTTP, the token in a header.
	token := ""
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "PADDOCK_TOKEN="); ok {
			token = v
		}
	}
	auth := []string{"--header", "Authorization: Bearer " + token}
	if n := names(inspect("paddock-http", append(auth, "--method", "tools/list")...)); !slices.Contains(n, "session_exec") {
		t.Errorf("inspector tools/list over HTTP: %v", n)
	}
	created = structured(inspect("paddock-http", append(auth, "--method", "tools/call", "--tool-name", "session_create", "--tool-arg", "agent=inspector-http")...))
	id, _ = created["id"].(string)
	ran = structured(inspect("paddock-http", append(auth, "--method", "tools/call", "--tool-name", "session_exec", "--tool-arg", "session="+id, "--tool-arg", "command=echo over-http")...))
	if ran["stdout"] != "over-http\n" {
		t.Errorf("inspector exec over HTTP: %v", ran)
	}
	structured(inspect("paddock-http", append(auth, "--method", "tools/call", "--tool-name", "session_delete", "--tool-arg", "session="+id)...))
}
