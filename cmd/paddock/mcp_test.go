package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
)

// mcpServe starts `paddock mcp serve args...` as the official Go SDK's
// client starts an MCP server (a command over stdio) and returns the
// client session.
func mcpServe(t *testing.T, bin string, env []string, args ...string) *sdk.ClientSession {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"mcp", "serve"}, args...)...)
	cmd.Env = env
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "paddock-cli-test", Version: "1"}, nil).Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("mcp serve %v: %v", args, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func mcpTools(t *testing.T, cs *sdk.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names
}

// mcpCall calls a tool and decodes its structured result into out; it
// returns the error text of a tool that failed.
func mcpCall(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any, out any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		var s string
		for _, c := range res.Content {
			if tc, ok := c.(*sdk.TextContent); ok {
				s += tc.Text
			}
		}
		return s
	}
	if out != nil {
		raw, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s: %s: %v", name, raw, err)
		}
	}
	return ""
}

// TestMCPServe: `paddock mcp serve` over stdio against `paddock serve`
// (through its HTTPS gateway, as PADDOCK_URL says): without --allow-write
// no write tool is listed; with it a session is made, runs a command,
// writes and reads a file, and the ledger (through the gateway) names the
// tools; a session token read from --token-file gets only its ops' tools,
// on its own session, and another session is out of its reach.
func TestMCPServe(t *testing.T) {
	bin, state, addr, env := daemonSetup(t)
	srv := startServe(t, bin, state, addr, env, "--stop-sandboxes")
	defer stopServe(t, srv)

	// Bad flags and token files are refused before anything is served.
	big := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(big, []byte(strings.Repeat("x", maxTokenFile+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"mcp", "serve", "--token", "a", "--token-file", big},
		{"mcp", "serve", "--token-file", big},
		{"mcp", "serve", "--token-file", filepath.Join(t.TempDir(), "missing")},
	} {
		if _, se, code := runCLI(t, bin, env, nil, args...); code != exitUsage || !strings.Contains(se, "token") {
			t.Errorf("%v: code %d, stderr %q", args, code, se)
		}
	}
	// A bad token fails at start, naming why.
	if _, se, code := runCLI(t, bin, env, nil, "mcp", "serve", "--token", "pdk_not_a_token_0000000000"); code == 0 || !strings.Contains(se, "who this token is") {
		t.Errorf("bad token: code %d, stderr %q", code, se)
	}

	ro := mcpTools(t, mcpServe(t, bin, env))
	if slices.Contains(ro, "session_exec") || slices.Contains(ro, "session_create") || !slices.Contains(ro, "session_file_read") {
		t.Errorf("read-only tools: %v", ro)
	}

	cs := mcpServe(t, bin, env, "--allow-write")
	var ses struct{ ID string }
	if e := mcpCall(t, cs, "session_create", map[string]any{"agent": "mcp-cli"}, &ses); e != "" || ses.ID == "" {
		t.Fatalf("create: %q %+v", e, ses)
	}
	var ex struct {
		ExitCode int `json:"exit_code"`
		Stdout   string
	}
	if e := mcpCall(t, cs, "session_exec", map[string]any{"session": ses.ID, "command": "echo over stdio"}, &ex); e != "" || ex.Stdout != "over stdio\n" {
		t.Fatalf("exec: %q %+v", e, ex)
	}
	if e := mcpCall(t, cs, "session_file_write", map[string]any{"session": ses.ID, "path": "/workspace/a.txt", "content": "secret-ish text"}, nil); e != "" {
		t.Fatal(e)
	}
	var fr struct{ Content string }
	if e := mcpCall(t, cs, "session_file_read", map[string]any{"session": ses.ID, "path": "/workspace/a.txt"}, &fr); e != "" || fr.Content != "secret-ish text" {
		t.Fatalf("read: %q %+v", e, fr)
	}
	var ev struct{ Events []struct{ Kind, Data string } }
	if e := mcpCall(t, cs, "session_events", map[string]any{"session": ses.ID}, &ev); e != "" {
		t.Fatal(e)
	}
	tools := map[string]bool{}
	for _, e := range ev.Events {
		var d struct {
			Tool string `json:"mcp_tool"`
		}
		json.Unmarshal([]byte(e.Data), &d)
		tools[d.Tool] = true
		if strings.Contains(e.Data, "secret-ish") {
			t.Errorf("the ledger holds file contents: %s", e.Data)
		}
	}
	if !tools["session_create"] || !tools["session_exec"] || !tools["session_file_write"] {
		t.Errorf("the ledger does not name the tools: %v", ev.Events)
	}

	// A session token from a file: its ops' tools only, its session by
	// default, no other session.
	roots, err := client.TrustPEM(gatewayRoot(state))
	if err != nil {
		t.Fatal(err)
	}
	admin := client.New("https://"+addr, "pdk_cli_test_token_0123456789", client.WithRootCAs(roots))
	other, err := admin.CreateSession(t.Context(), api.CreateRequest{Agent: "other"})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := admin.MintToken(t.Context(), ses.ID, api.TokenRequest{Ops: []string{api.OpRead, api.OpFilesRead}})
	if err != nil {
		t.Fatal(err)
	}
	tf := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tf, []byte(tok.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var noTokenEnv []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "PADDOCK_TOKEN=") {
			noTokenEnv = append(noTokenEnv, kv)
		}
	}
	sc := mcpServe(t, bin, noTokenEnv, "--allow-write", "--token-file", tf)
	if got, want := mcpTools(t, sc), []string{"session_approvals", "session_artifacts", "session_changesets", "session_events", "session_file_read", "session_files", "session_get", "session_probe"}; !slices.Equal(got, want) {
		t.Errorf("session token tools: got %v, want %v", got, want)
	}
	if e := mcpCall(t, sc, "session_file_read", map[string]any{"path": "/workspace/a.txt"}, &fr); e != "" || fr.Content != "secret-ish text" {
		t.Errorf("read on the token's session: %q %+v", e, fr)
	}
	if e := mcpCall(t, sc, "session_get", map[string]any{"session": other.ID}, nil); !strings.HasPrefix(e, "forbidden") {
		t.Errorf("another session: %q", e)
	}
	if e := mcpCall(t, cs, "session_delete", map[string]any{"session": ses.ID}, nil); e != "" {
		t.Error(e)
	}
}
