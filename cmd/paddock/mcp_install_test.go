package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

var updateGolden = flag.Bool("update-mcp-golden", false, "rewrite testdata/mcp-install/*.golden")

// goldenLaunch is a fixed entry, so that the golden files do not depend on
// where the test runs.
var goldenLaunch = mcpLaunch{
	Command: "/opt/paddock/bin/paddock",
	Args:    []string{"mcp", "serve", "--url", "https://127.0.0.1:7788", "--allow-write", "--token-file", "/home/dev/.config/paddock/token"},
	Env:     map[string]string{"PADDOCK_CA": "/etc/paddock/ca.pem"},
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", "mcp-install", name)
	if *updateGolden {
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// parseBack reads our entry from a written file the way the client reads
// its own format: JSON clients into the documented shape, with no field
// the client does not know; Codex through a TOML decoder.
func parseBack(t *testing.T, c mcpClient, b []byte) mcpLaunch {
	t.Helper()
	if c.toml {
		var doc struct {
			Servers map[string]struct {
				Command string            `toml:"command"`
				Args    []string          `toml:"args"`
				Env     map[string]string `toml:"env"`
			} `toml:"mcp_servers"`
		}
		md, err := toml.Decode(string(b), &doc)
		if err != nil {
			t.Fatalf("codex: not TOML: %v\n%s", err, b)
		}
		for _, k := range md.Undecoded() {
			if len(k) > 1 && k[0] == "mcp_servers" && k[1] == mcpServerName {
				t.Errorf("codex: a key Codex would not read: %v", k)
			}
		}
		e := doc.Servers[mcpServerName]
		return mcpLaunch{Command: e.Command, Args: e.Args, Env: e.Env}
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		t.Fatalf("%s: not JSON: %v\n%s", c.name, err, b)
	}
	var servers map[string]json.RawMessage
	if err := json.Unmarshal(top[c.key], &servers); err != nil {
		t.Fatalf("%s: %q is not an object: %v", c.name, c.key, err)
	}
	dec := json.NewDecoder(bytes.NewReader(servers[mcpServerName]))
	dec.DisallowUnknownFields()
	if c.name == "opencode" {
		var e opencodeEntry
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("opencode: %v", err)
		}
		if e.Type != "local" || !e.Enabled || len(e.Command) == 0 {
			t.Fatalf("opencode: not a local, enabled server: %+v", e)
		}
		return mcpLaunch{Command: e.Command[0], Args: e.Command[1:], Env: e.Environment}
	}
	var e stdioEntry
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	if wantType := map[string]string{"claude-code": "stdio", "vscode": "stdio"}[c.name]; e.Type != wantType {
		t.Errorf("%s: type %q, want %q", c.name, e.Type, wantType)
	}
	return mcpLaunch{Command: e.Command, Args: e.Args, Env: e.Env}
}

// existingConfig is a file a user already has: other servers, other
// settings, and an older paddock entry to replace.
var existingConfig = map[string]string{
	"claude-code": `{
    "numStartups": 12,
    "projects": {"/src/app": {"allowedTools": ["Bash"]}},
    "mcpServers": {
        "github": {"type": "http", "url": "https://api.example.com/mcp"},
        "paddock": {"type": "stdio", "command": "/old/paddock", "args": ["mcp", "serve"]}
    },
    "theme": "dark"
}
`,
	"codex": `# my Codex settings
model = "gpt-5"
approval_policy = "on-request"

[mcp_servers.docs]
command = "npx"
args = ["-y", "docs-mcp"] # keep this comment

[mcp_servers.paddock]
command = "/old/paddock"
args = ["mcp", "serve"]

[mcp_servers.paddock.env]
OLD = "1"

[profiles.fast]
model = "gpt-5-mini"
`,
	"gemini": `{
  "theme": "GitHub",
  "mcpServers": {
    "fs": {"command": "npx", "args": ["-y", "fs-mcp"], "trust": false}
  },
  "general": {"vimMode": true}
}
`,
	"cursor": `{"mcpServers": {"linear": {"url": "https://mcp.linear.app/sse"}}}
`,
	"vscode": `{
	"inputs": [{"type": "promptString", "id": "key", "password": true}],
	"servers": {
		"memory": {"type": "stdio", "command": "npx", "args": ["mem"], "env": {"K": "${input:key}"}}
	}
}
`,
	"opencode": `{
  "$schema": "https://opencode.ai/config.json",
  "model": "anthropic/claude-sonnet-4-5",
  "mcp": {
    "jira": {"type": "remote", "url": "https://jira.example.com/mcp", "enabled": true}
  }
}
`,
}

// decodeAny is a whole file as a generic value (TOML or JSON).
func decodeAny(t *testing.T, c mcpClient, b []byte) map[string]any {
	t.Helper()
	doc := map[string]any{}
	if c.toml {
		if _, err := toml.Decode(string(b), &doc); err != nil {
			t.Fatal(err)
		}
		return doc
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// TestMCPInstallFormats: for each client, the file written from nothing
// and the file merged into an existing config match their golden files;
// each parses back in the client's own format to the command we meant; a
// second merge changes nothing (byte for byte); and in the merged file
// every other key and server is as it was.
func TestMCPInstallFormats(t *testing.T) {
	for _, name := range mcpClientNames() {
		c := mcpClients[name]
		ext := ".json"
		if c.toml {
			ext = ".toml"
		}
		t.Run(name, func(t *testing.T) {
			fresh, changed, err := mergeConfig(c, nil, goldenLaunch)
			if err != nil || !changed {
				t.Fatalf("fresh: changed %v, %v", changed, err)
			}
			checkGolden(t, name+ext+".golden", fresh)
			if got := parseBack(t, c, fresh); !reflect.DeepEqual(got, goldenLaunch) {
				t.Errorf("parsed back: %+v, want %+v", got, goldenLaunch)
			}
			again, changed, err := mergeConfig(c, fresh, goldenLaunch)
			if err != nil || changed || !bytes.Equal(again, fresh) {
				t.Errorf("second run: changed %v, err %v, same bytes %v", changed, err, bytes.Equal(again, fresh))
			}

			old := []byte(existingConfig[name])
			merged, changed, err := mergeConfig(c, old, goldenLaunch)
			if err != nil || !changed {
				t.Fatalf("merge: changed %v, %v", changed, err)
			}
			checkGolden(t, name+".merged"+ext+".golden", merged)
			if got := parseBack(t, c, merged); !reflect.DeepEqual(got, goldenLaunch) {
				t.Errorf("merged, parsed back: %+v, want %+v", got, goldenLaunch)
			}
			key := c.key
			if c.toml {
				key = "mcp_servers"
			}
			before, after := decodeAny(t, c, old), decodeAny(t, c, merged)
			delete(before[key].(map[string]any), mcpServerName)
			delete(after[key].(map[string]any), mcpServerName)
			if !reflect.DeepEqual(before, after) {
				t.Errorf("the rest of the file changed:\nbefore %v\nafter  %v", before, after)
			}
			if c.toml && !strings.Contains(string(merged), "# keep this comment") {
				t.Error("codex: a comment was lost")
			}
			again, changed, err = mergeConfig(c, merged, goldenLaunch)
			if err != nil || changed || !bytes.Equal(again, merged) {
				t.Errorf("second merge: changed %v, err %v", changed, err)
			}
		})
	}
}

// TestMCPInstallRefusesBroken: a file that does not parse (or whose
// server list is not an object) is refused with an error that says so.
func TestMCPInstallRefusesBroken(t *testing.T) {
	for name, bad := range map[string]string{
		"claude-code": `{"mcpServers": {`,
		"vscode":      `{"servers": [] }`,
		"gemini": `// a comment
{"mcpServers": {}}`,
		"opencode": `{"mcp": {}} {"more": 1}`,
		"codex":    "[mcp_servers.x\ncommand = 1",
		"cursor":   `["not", "an", "object"]`,
	} {
		if _, _, err := mergeConfig(mcpClients[name], []byte(bad), goldenLaunch); err == nil {
			t.Errorf("%s: %q was accepted", name, bad)
		}
	}
	// An entry Codex reads but that is not its own table cannot be
	// replaced line by line: refused, not duplicated.
	inline := "[mcp_servers]\npaddock = { command = \"/old\", args = [] }\n"
	if _, _, err := mergeConfig(mcpClients["codex"], []byte(inline), goldenLaunch); err == nil || !strings.Contains(err.Error(), "by hand") {
		t.Errorf("codex inline entry: %v", err)
	}
	// Lines inside a multi-line string that look like our table's header:
	// cutting by lines would change the string and drop a key, and the
	// check that decodes both files catches it.
	tricky := "[mcp_servers.paddock]\ncommand = \"/old\"\nargs = []\n\n[notes]\na = \"\"\"\n[mcp_servers.paddock.x]\n\"\"\"\nb = \"\"\"\n[y]\n\"\"\"\n"
	if _, err := toml.Decode(tricky, &map[string]any{}); err != nil {
		t.Fatal(err)
	}
	if out, _, err := mergeConfig(mcpClients["codex"], []byte(tricky), goldenLaunch); err == nil {
		t.Errorf("codex: a merge that changes another key was written:\n%s", out)
	}
}

// runMCP runs `paddock args...` in this process with HOME at home.
func runMCP(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	err := root.ExecuteContext(t.Context())
	return out.String(), err
}

func backups(t *testing.T, p string) []string {
	t.Helper()
	m, err := filepath.Glob(p + ".bak-*")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestMCPInstallCLI: `paddock mcp install` as a user runs it: a token file
// others can read is refused and nothing is written; the entry runs this
// binary with the token file; a second run changes nothing and makes no
// backup; a change backs up the old file and keeps its mode; --dry-run
// writes nothing; a broken file is left untouched; --project writes the
// project's file.
func TestMCPInstallCLI(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	for _, k := range []string{"XDG_CONFIG_HOME", "CODEX_HOME", "PADDOCK_CA", "PADDOCK_STATE_DIR", "PADDOCK_URL"} {
		t.Setenv(k, "")
	}
	tf := filepath.Join(home, ".config", "paddock", "token")
	if err := os.MkdirAll(filepath.Dir(tf), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tf, []byte("pdk_secret_token_value\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(home, ".claude.json")

	_, err := runMCP(t, "mcp", "install", "claude-code")
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a token file others can read: %v", err)
	}
	if _, err := os.Stat(cfg); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a config was written anyway: %v", err)
	}
	if err := os.Chmod(tf, 0o600); err != nil {
		t.Fatal(err)
	}

	if _, err := runMCP(t, "mcp", "install", "claude-code"); err != nil {
		t.Fatal(err)
	}
	first, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(first), "pdk_secret") {
		t.Fatal("the token is in the config")
	}
	if st, _ := os.Stat(cfg); st.Mode().Perm() != 0o600 {
		t.Errorf("a new user config has mode %o", st.Mode().Perm())
	}
	exe, _ := os.Executable()
	exe, _ = filepath.EvalSymlinks(exe)
	got := parseBack(t, mcpClients["claude-code"], first)
	want := []string{"mcp", "serve", "--url", "https://127.0.0.1:7788", "--token-file", tf}
	if got.Command != exe || !slices.Equal(got.Args, want) || got.Env != nil {
		t.Errorf("entry: %+v, want %s %v", got, exe, want)
	}

	if out, err := runMCP(t, "mcp", "install", "claude-code"); err != nil || !strings.Contains(out, "nothing changed") {
		t.Fatalf("second run: %v %q", err, out)
	}
	if again, _ := os.ReadFile(cfg); !bytes.Equal(again, first) || len(backups(t, cfg)) != 0 {
		t.Fatalf("second run changed the file or made a backup: %v", backups(t, cfg))
	}

	if err := os.Chmod(cfg, 0o640); err != nil {
		t.Fatal(err)
	}
	out, err := runMCP(t, "mcp", "install", "claude-code", "--allow-write", "--dry-run")
	if err != nil || !strings.Contains(out, `"--allow-write"`) {
		t.Fatalf("dry run: %v %q", err, out)
	}
	if again, _ := os.ReadFile(cfg); !bytes.Equal(again, first) || len(backups(t, cfg)) != 0 {
		t.Fatal("--dry-run wrote")
	}

	if _, err := runMCP(t, "mcp", "install", "claude-code", "--allow-write"); err != nil {
		t.Fatal(err)
	}
	bk := backups(t, cfg)
	if len(bk) != 1 {
		t.Fatalf("backups: %v", bk)
	}
	if old, _ := os.ReadFile(bk[0]); !bytes.Equal(old, first) {
		t.Error("the backup is not the old file")
	}
	if st, _ := os.Stat(cfg); st.Mode().Perm() != 0o640 {
		t.Errorf("the file's mode became %o, want 0640 as it was", st.Mode().Perm())
	}
	if now, _ := os.ReadFile(cfg); !slices.Contains(parseBack(t, mcpClients["claude-code"], now).Args, "--allow-write") {
		t.Error("--allow-write is not in the entry")
	}

	broken := filepath.Join(home, ".cursor", "mcp.json")
	os.MkdirAll(filepath.Dir(broken), 0o700)
	if err := os.WriteFile(broken, []byte(`{"mcpServers": {"x": `), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := runMCP(t, "mcp", "install", "cursor"); !errors.As(err, &ue) || !strings.Contains(err.Error(), "not valid JSON") {
		t.Errorf("broken file: %v", err)
	}
	if b, _ := os.ReadFile(broken); string(b) != `{"mcpServers": {"x": ` || len(backups(t, broken)) != 0 {
		t.Error("the broken file was touched")
	}

	proj := t.TempDir()
	if _, err := runMCP(t, "mcp", "install", "vscode", "--project", proj); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(proj, ".vscode", "mcp.json")); err != nil || parseBack(t, mcpClients["vscode"], b).Command != exe {
		t.Errorf("project file: %v %s", err, b)
	}

	if _, err := runMCP(t, "mcp", "install", "codex", "--session", "ses-1\"; rm -rf ~"); !errors.As(err, &ue) {
		t.Errorf("a bad --session: %v", err)
	}
	if _, err := runMCP(t, "mcp", "install", "emacs"); !errors.As(err, &ue) {
		t.Errorf("unknown client: %v", err)
	}
}

// TestMCPStatusOffline: status reads what install wrote: installed, the
// binary exists, --allow-write on, and a daemon that does not answer is
// said to be unreachable; a client with nothing is listed as not installed.
func TestMCPStatusOffline(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	for _, k := range []string{"XDG_CONFIG_HOME", "CODEX_HOME", "PADDOCK_CA", "PADDOCK_STATE_DIR", "PADDOCK_URL"} {
		t.Setenv(k, "")
	}
	tf := filepath.Join(home, "tok")
	if err := os.WriteFile(tf, []byte("pdk_x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := runMCP(t, "mcp", "install", "codex", "--allow-write", "--token-file", tf, "--url", "https://127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	out, err := runMCP(t, "--json", "mcp", "status")
	if err != nil {
		t.Fatal(err)
	}
	var rows []mcpStatusRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	seen := map[string]mcpStatusRow{}
	for _, r := range rows {
		seen[r.Client] = r
	}
	cx := seen["codex"]
	if !cx.Installed || !cx.Binary || !cx.AllowWrite || cx.TokenFile != tf || cx.Daemon == "" || strings.HasPrefix(cx.Daemon, "ok") {
		t.Errorf("codex row: %+v", cx)
	}
	if r, ok := seen["gemini"]; !ok || r.Installed {
		t.Errorf("gemini row: %+v", r)
	}
	if len(seen) != len(mcpClients) {
		t.Errorf("rows for %d clients, want %d", len(seen), len(mcpClients))
	}
}

// TestMCPInstallLive: against a real `paddock serve`, `mcp install` (as
// the built binary) writes an entry that a client can start as written,
// with only the entry's own environment, and that server lists its tools;
// `mcp status` says the daemon answers with the entry's token file, and
// does not with a wrong token.
func TestMCPInstallLive(t *testing.T) {
	bin, state, addr, env := daemonSetupFresh(t)
	srv := startServe(t, bin, state, addr, env)
	defer stopServe(t, srv)

	home := t.TempDir()
	var userEnv, bare []string // bare: what a client gives a server it starts
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "HOME", "XDG_CONFIG_HOME", "CODEX_HOME":
			continue
		case "PADDOCK_TOKEN", "PADDOCK_URL", "PADDOCK_CA", "PADDOCK_STATE_DIR", "PADDOCK_ADMIN_TOKEN":
		default:
			bare = append(bare, kv)
		}
		userEnv = append(userEnv, kv)
	}
	userEnv = append(userEnv, "HOME="+home)
	bare = append(bare, "HOME="+home)
	good, bad := filepath.Join(home, "token"), filepath.Join(home, "bad-token")
	os.WriteFile(good, []byte("pdk_cli_test_token_0123456789\n"), 0o600)
	os.WriteFile(bad, []byte("pdk_not_a_token_000000000000\n"), 0o600)

	if out, errOut, code := runCLI(t, bin, userEnv, nil, "--state-dir", state, "mcp", "install", "gemini", "--token-file", good); code != 0 {
		t.Fatalf("install gemini: %d %s %s", code, out, errOut)
	}
	if out, errOut, code := runCLI(t, bin, userEnv, nil, "--state-dir", state, "mcp", "install", "cursor", "--token-file", bad); code != 0 {
		t.Fatalf("install cursor: %d %s %s", code, out, errOut)
	}

	b, err := os.ReadFile(filepath.Join(home, ".gemini", "settings.json"))
	if err != nil {
		t.Fatal(err)
	}
	l := parseBack(t, mcpClients["gemini"], b)
	cmd := exec.Command(l.Command, l.Args...)
	cmd.Env = bare
	for k, v := range l.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "install-test", Version: "1"}, nil).Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("starting the installed entry %v: %v", l, err)
	}
	defer cs.Close()
	if tools := mcpTools(t, cs); !slices.Contains(tools, "session_list") || slices.Contains(tools, "session_exec") {
		t.Errorf("tools of the installed entry: %v", tools)
	}

	out, errOut, code := runCLI(t, bin, userEnv, nil, "--json", "mcp", "status")
	if code != 0 {
		t.Fatalf("status: %d %s", code, errOut)
	}
	var rows []mcpStatusRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, r := range rows {
		switch r.Client {
		case "gemini":
			if !r.Installed || !r.Binary || r.AllowWrite || !strings.HasPrefix(r.Daemon, "ok") {
				t.Errorf("gemini: %+v", r)
			}
		case "cursor":
			if !r.Installed || strings.HasPrefix(r.Daemon, "ok") || r.Daemon == "" {
				t.Errorf("cursor (wrong token): %+v", r)
			}
		}
	}
	if out, _, _ := runCLI(t, bin, userEnv, nil, "mcp", "status"); !strings.Contains(out, "gemini") || strings.Contains(out, "pdk_") {
		t.Errorf("status table: %s", out)
	}
}
