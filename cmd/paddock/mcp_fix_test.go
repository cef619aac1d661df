package main

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/workspace"
	"paddock.dev/paddock/internal/testutil"
)

// mcpTestHome points HOME at a fresh directory and clears the variables
// that would move the clients' files or the daemon's settings.
func mcpTestHome(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	t.Setenv("HOME", home)
	for _, k := range []string{"XDG_CONFIG_HOME", "CODEX_HOME", "PADDOCK_CA", "PADDOCK_STATE_DIR", "PADDOCK_URL"} {
		t.Setenv(k, "")
	}
	return home
}

func mcpWriteFile(t *testing.T, p, data string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
}

// TestMCPStatusProjectToken: a project's .mcp.json (a cloned repository)
// that names some daemon and one of the user's private files as the token
// file gets no call: the server never sees the file's contents. The same
// loopback daemon with the default token file is still checked.
func TestMCPStatusProjectToken(t *testing.T) {
	home := mcpTestHome(t)
	var mu sync.Mutex
	var auths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auths = append(auths, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"kind":"admin"}`))
	}))
	defer srv.Close()
	seen := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), auths...)
	}

	secret := filepath.Join(t.TempDir(), "ssh-passphrase")
	mcpWriteFile(t, secret, "hunter2-private\n", 0o600)
	deflt := filepath.Join(home, ".config", "paddock", "token")
	mcpWriteFile(t, deflt, "pdk_default_token\n", 0o600)
	ca := filepath.Join(t.TempDir(), "evil-ca.pem")
	mcpWriteFile(t, ca, "not a certificate\n", 0o600)

	proj := t.TempDir()
	entry := func(tokenFile string) string {
		b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"paddock": map[string]any{
			"command": "/bin/true",
			"args":    []string{"mcp", "serve", "--url", srv.URL, "--token-file", tokenFile},
			"env":     map[string]string{"PADDOCK_CA": ca},
		}}})
		return string(b)
	}
	status := func() mcpStatusRow {
		t.Helper()
		out, err := runMCP(t, "--json", "mcp", "status", "--project", proj)
		if err != nil {
			t.Fatal(err)
		}
		var rows []mcpStatusRow
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		for _, r := range rows {
			if r.Client == "claude-code" && r.Scope == "project" {
				return r
			}
		}
		t.Fatalf("no project row for claude-code: %s", out)
		return mcpStatusRow{}
	}

	mcpWriteFile(t, filepath.Join(proj, ".mcp.json"), entry(secret), 0o644)
	r := status()
	if got := seen(); len(got) != 0 {
		t.Fatalf("the project's daemon was called with %q", got)
	}
	if r.Daemon != notCheckedProject {
		t.Errorf("daemon column %q, want %q", r.Daemon, notCheckedProject)
	}

	// The default token file on a loopback daemon is checked, and the
	// project's PADDOCK_CA (not a certificate) is not used.
	mcpWriteFile(t, filepath.Join(proj, ".mcp.json"), entry(deflt), 0o644)
	r = status()
	if got := seen(); len(got) != 1 || got[0] != "Bearer pdk_default_token" {
		t.Fatalf("the loopback daemon saw %q", got)
	}
	if r.Daemon != "ok (admin)" {
		t.Errorf("daemon column %q", r.Daemon)
	}
}

// TestMCPProjectEntryTrusted: the rule on its own, for URLs a test cannot
// reach.
func TestMCPProjectEntryTrusted(t *testing.T) {
	home := mcpTestHome(t)
	deflt := filepath.Join(home, ".config", "paddock", "token")
	other := "/home/dev/other-token"
	user := map[string]bool{"/home/dev/user-token": true}
	for _, c := range []struct {
		url, tf, env string
		want         bool
	}{
		{"https://127.0.0.1:7788", deflt, "", true},
		{"http://localhost:7788", "/home/dev/user-token", "", true},
		{"https://evil.example", deflt, "", false},
		{"https://evil.example", "/home/dev/user-token", "", false},
		{"https://127.0.0.1:7788", other, "", false},
		{"https://127.0.0.1:7788", "token", "", false},
		{"https://paddock.corp:7788", deflt, "https://paddock.corp:7788", true},
		{"https://paddock.corp:7788", other, "https://paddock.corp:7788", false},
		{"https://evil.example", deflt, "https://paddock.corp:7788", false},
	} {
		t.Setenv("PADDOCK_URL", c.env)
		if got := projectEntryTrusted(c.url, c.tf, user); got != c.want {
			t.Errorf("%s %s (PADDOCK_URL=%q): %v, want %v", c.url, c.tf, c.env, got, c.want)
		}
	}
}

// TestMCPInstallRefusesPlainHTTP: http:// only to a loopback daemon.
func TestMCPInstallRefusesPlainHTTP(t *testing.T) {
	home := mcpTestHome(t)
	mcpWriteFile(t, filepath.Join(home, ".config", "paddock", "token"), "pdk_x\n", 0o600)
	cfg := filepath.Join(home, ".codex", "config.toml")
	var ue usageError
	for _, u := range []string{"http://other-host:7788", "http://10.0.0.5:7788", "http://[2001:db8::1]:7788"} {
		_, err := runMCP(t, "mcp", "install", "codex", "--url", u)
		if !errors.As(err, &ue) || exitCode(err) != 2 || !strings.Contains(err.Error(), "https://") {
			t.Errorf("--url %s: %v", u, err)
		}
		if _, err := os.Stat(cfg); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("--url %s: a config was written", u)
		}
	}
	for _, u := range []string{"http://127.0.0.1:7788", "http://localhost:7788", "https://paddock.corp:7788"} {
		if _, err := runMCP(t, "mcp", "install", "codex", "--url", u); err != nil {
			t.Errorf("--url %s: %v", u, err)
		}
	}
}

// TestMCPInstallProjectSymlink: a project file, or a directory on its way,
// that is a symlink out of the project is refused and the file it points
// at is left alone; a symlink that stays inside the project is followed.
func TestMCPInstallProjectSymlink(t *testing.T) {
	home := mcpTestHome(t)
	mcpWriteFile(t, filepath.Join(home, ".config", "paddock", "token"), "pdk_x\n", 0o600)
	userCfg := filepath.Join(home, ".codex", "config.toml")
	const orig = "model = \"o3\"\n"
	mcpWriteFile(t, userCfg, orig, 0o600)
	var ue usageError

	fileLink := t.TempDir()
	os.MkdirAll(filepath.Join(fileLink, ".codex"), 0o755)
	if err := os.Symlink(userCfg, filepath.Join(fileLink, ".codex", "config.toml")); err != nil {
		t.Fatal(err)
	}
	dirLink := t.TempDir()
	if err := os.Symlink(filepath.Join(home, ".codex"), filepath.Join(dirLink, ".codex")); err != nil {
		t.Fatal(err)
	}
	for _, proj := range []string{fileLink, dirLink} {
		_, err := runMCP(t, "mcp", "install", "codex", "--project", proj)
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "outside the project") {
			t.Errorf("project %s: %v", proj, err)
		}
		if b, _ := os.ReadFile(userCfg); string(b) != orig || len(backups(t, userCfg)) != 0 {
			t.Fatalf("the user's file was written through the project %s:\n%s", proj, b)
		}
	}

	inside := t.TempDir()
	mcpWriteFile(t, filepath.Join(inside, "shared", "codex.toml"), orig, 0o644)
	os.MkdirAll(filepath.Join(inside, ".codex"), 0o755)
	if err := os.Symlink(filepath.Join("..", "shared", "codex.toml"), filepath.Join(inside, ".codex", "config.toml")); err != nil {
		t.Fatal(err)
	}
	if _, err := runMCP(t, "mcp", "install", "codex", "--project", inside); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(inside, "shared", "codex.toml")); !strings.Contains(string(b), "[mcp_servers.paddock]") {
		t.Errorf("the link inside the project was not written through:\n%s", b)
	}
}

// TestMCPInstallKeepsNewestBackup: each write leaves one backup, the file
// as it was just before; a .bak file not named by us stays.
func TestMCPInstallKeepsNewestBackup(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "config.json")
	mine := p + ".bak-mine"
	mcpWriteFile(t, mine, "keep me", 0o600)
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	prev, existed := []byte(nil), false
	for i, v := range []string{`{"a":1}`, `{"a":2}`, `{"a":3}`, `{"a":4}`} {
		// The third write comes in the same second as the second, so its
		// backup gets the longer name.
		now := start.Add(time.Duration(min(i, 2)) * time.Second).Add(time.Duration(i))
		bk, err := writeConfigFile(p, []byte(v), prev, 0o600, existed, now)
		if err != nil {
			t.Fatal(err)
		}
		got := backups(t, p)
		wantN := 1 // ours, or only the foreign one on the first write
		if existed {
			wantN = 2
		}
		if len(got) != wantN {
			t.Fatalf("write %d: backups %v", i, got)
		}
		if existed {
			if b, _ := os.ReadFile(bk); string(b) != string(prev) {
				t.Errorf("write %d: backup %s holds %q, want %q", i, bk, b, prev)
			}
		}
		prev, existed = []byte(v), true
	}
	if b, _ := os.ReadFile(mine); string(b) != "keep me" {
		t.Error("a backup not made by us was removed")
	}
}

// TestMCPDocsNoTokenInArgv keeps docs/mcp.md from showing the token on a
// command line (readable by anyone through ps) or written into a config
// file: no Authorization header passed as a flag, no "Bearer $VAR" shell
// expansion and no literal token. A client's own ${...} expansion in a
// config file is allowed.
func TestMCPDocsNoTokenInArgv(t *testing.T) {
	raw, err := os.ReadFile("../../docs/mcp.md")
	if err != nil {
		t.Fatal(err)
	}
	inCode := false
	for i, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inCode = !inCode
			continue
		}
		bad := ""
		switch {
		case inCode && (strings.Contains(line, "--header") || strings.Contains(line, "-H ")) && strings.Contains(line, "Authorization"):
			bad = "an Authorization header on a command line"
		case strings.Contains(line, "Bearer pdk_"):
			bad = "a token written inline"
		}
		for rest := line; bad == "" && strings.Contains(rest, "Bearer $"); {
			j := strings.Index(rest, "Bearer $") + len("Bearer $")
			if !strings.HasPrefix(rest[j:], "{") {
				bad = "a shell-expanded token (Bearer $VAR)"
			}
			rest = rest[j:]
		}
		if bad != "" {
			t.Errorf("docs/mcp.md:%d shows %s: %s", i+1, bad, line)
		}
	}
}

// TestMCPServeRefusesPlainHTTP: `mcp serve` refuses plain http:// to a
// host other than this machine as install does (usage error, exit 2),
// before it reads a token or calls the daemon; loopback http:// is let
// through (and here fails only at the call, nothing listens).
func TestMCPServeRefusesPlainHTTP(t *testing.T) {
	t.Setenv("PADDOCK_TOKEN", "pdk_x")
	var ue usageError
	for _, u := range []string{"http://other-host.invalid:7788", "http://192.0.2.10:7788", "http://[2001:db8::1]:7788"} {
		_, err := runMCP(t, "mcp", "serve", "--url", u)
		if !errors.As(err, &ue) || exitCode(err) != 2 || !strings.Contains(err.Error(), "https://") {
			t.Errorf("serve --url %s: %v", u, err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	if _, err := runMCP(t, "mcp", "serve", "--url", closed); err == nil || errors.As(err, &ue) {
		t.Errorf("serve --url %s (loopback, nothing listening): %v, want the call's error", closed, err)
	}
}

// gatewayBearer sends the token on every request of an MCP client.
type gatewayBearer struct {
	token string
	next  http.RoundTripper
}

func (b *gatewayBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// TestMCPPreviewThroughGateway: `paddock serve` with its gateway, the Go
// SDK's streamable HTTP client at https://ADDR/mcp: session_preview hands
// out a URL on the gateway's address (not the daemon's internal one),
// and the test's client, trusting only the gateway's CA, opens the page
// served in the sandbox through it.
func TestMCPPreviewThroughGateway(t *testing.T) {
	bin, state, addr, env := daemonSetup(t)
	srv := startServe(t, bin, state, addr, env, "--stop-sandboxes", "--mcp-allow-write")
	defer stopServe(t, srv)
	const admin = "pdk_cli_test_token_0123456789" // daemonOn's
	hc := daemonHTTPClient(state)
	tr := &sdk.StreamableClientTransport{Endpoint: "https://" + addr + "/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: &gatewayBearer{token: admin, next: hc.Transport}}}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "gateway-test", Version: "1"}, nil).Connect(t.Context(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var ses struct{ ID string }
	if e := mcpCall(t, cs, "session_create", map[string]any{"agent": "preview"}, &ses); e != "" {
		t.Fatal(e)
	}
	sdkc := daemonSDK(t, state, addr, admin)
	echo, err := os.ReadFile(testutil.EchoServerBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := sdkc.Call(t.Context(), "PUT", ses.ID, "/files/content", nil, workspace.FileWrite{Path: "/tmp/echoserver",
		ContentBase64: base64.StdEncoding.EncodeToString(echo), Mode: "0755"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := sdkc.Call(t.Context(), "POST", ses.ID, "/jobs", nil, session.JobStart{Command: "/tmp/echoserver -addr 127.0.0.1:8000"}, nil); err != nil {
		t.Fatal(err)
	}
	var p struct{ URL string }
	if e := mcpCall(t, cs, "session_preview", map[string]any{"session": ses.ID, "port": 8000}, &p); e != "" {
		t.Fatal(e)
	}
	if !regexp.MustCompile(`^https://` + regexp.QuoteMeta(addr) + `/preview/pvw-[a-z2-7]{52}/$`).MatchString(p.URL) {
		t.Fatalf("preview URL over /mcp through the gateway: %q, want one on https://%s", p.URL, addr)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, body := gatewayCall(t, state, "GET", p.URL, "", nil, nil)
		if resp.StatusCode == http.StatusOK && strings.Contains(string(body), "hello from the sandbox") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %d %q", p.URL, resp.StatusCode, body)
		}
	}
	if e := mcpCall(t, cs, "session_delete", map[string]any{"session": ses.ID}, nil); e != "" {
		t.Error(e)
	}
}
