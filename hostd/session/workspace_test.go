package session

import (
	"bytes"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/internal/testutil"
)

func TestCheckWorkspace(t *testing.T) {
	const secret = "s3cret"
	for _, tc := range []struct {
		name     string
		req      WorkspaceRequest
		wantErr  string // a piece of the message; "" means accepted
		wantPath string
		wantMode string
		wantGit  string
	}{
		{name: "defaults", wantPath: "/workspace", wantMode: ModeWritable},
		{name: "writable", req: WorkspaceRequest{Path: "/srv/w/", Mode: "writable"}, wantPath: "/srv/w", wantMode: ModeWritable},
		{name: "readonly", req: WorkspaceRequest{Mode: "readonly"}, wantPath: "/workspace", wantMode: ModeReadOnly},
		{name: "readonly under /proc", req: WorkspaceRequest{Path: "/proc/x", Mode: "readonly"}, wantErr: "cannot be under /proc"},
		{name: "readonly under /dev", req: WorkspaceRequest{Path: "/dev/shm/w", Mode: "readonly"}, wantErr: "cannot be under /dev"},
		{name: "unknown mode", req: WorkspaceRequest{Mode: "copy"}, wantErr: `"copy" is unknown; use "writable" (the default), "readonly" or "overlay"`},
		{name: "clone is writable", req: WorkspaceRequest{Mode: "clone"}, wantPath: "/workspace", wantMode: ModeWritable},
		{name: "overlay", req: WorkspaceRequest{Mode: "overlay", Lower: "/opt/src"}, wantPath: "/workspace", wantMode: ModeOverlay},
		{name: "overlay without lower", req: WorkspaceRequest{Mode: "overlay"}, wantErr: "needs workspace.lower"},
		{name: "overlay with git", req: WorkspaceRequest{Mode: "overlay", Lower: "/opt/src", Git: "https://example.com/r.git"}, wantErr: "cannot be combined"},
		{name: "overlay lower relative", req: WorkspaceRequest{Mode: "overlay", Lower: "opt"}, wantErr: "clean absolute"},
		{name: "overlay lower climbing", req: WorkspaceRequest{Mode: "overlay", Lower: "/opt/../etc"}, wantErr: "clean absolute"},
		{name: "overlay lower with comma", req: WorkspaceRequest{Mode: "overlay", Lower: "/opt/a,b"}, wantErr: "clean absolute"},
		{name: "overlay lower is the workspace", req: WorkspaceRequest{Mode: "overlay", Lower: "/workspace"}, wantErr: "contain each other"},
		{name: "overlay lower holds the workspace", req: WorkspaceRequest{Mode: "overlay", Lower: "/", Path: "/workspace"}, wantErr: "clean absolute"},
		{name: "overlay lower inside the workspace", req: WorkspaceRequest{Mode: "overlay", Lower: "/workspace/src"}, wantErr: "contain each other"},
		{name: "lower without overlay", req: WorkspaceRequest{Lower: "/opt/src"}, wantErr: "is for workspace.mode"},
		{name: "climbing path", req: WorkspaceRequest{Path: "/a/../etc"}, wantErr: "without .."},
		{name: "root", req: WorkspaceRequest{Path: "/"}, wantErr: "below /"},
		{name: "under /usr", req: WorkspaceRequest{Path: "/usr/src/app"}, wantErr: `"/usr/src/app" is under /usr, one of the image's system directories`},
		{name: "a system directory", req: WorkspaceRequest{Path: "/etc"}, wantErr: "under /etc"},
		{name: "overlay under /opt is no system directory", req: WorkspaceRequest{Mode: "overlay", Lower: "/srv/src", Path: "/opt/w"}, wantPath: "/opt/w", wantMode: ModeOverlay},
		{name: "git", req: WorkspaceRequest{Git: "https://example.com/o/r.git"}, wantPath: "/workspace", wantMode: ModeWritable, wantGit: "https://example.com/o/r.git"},
		{name: "git with a port", req: WorkspaceRequest{Git: "https://example.com:8443/r"}, wantPath: "/workspace", wantMode: ModeWritable, wantGit: "https://example.com:8443/r"},
		{name: "git with a credential", req: WorkspaceRequest{Git: "https://user:" + secret + "@example.com/r.git"}, wantPath: "/workspace", wantMode: ModeWritable, wantGit: "https://***@example.com/r.git"},
		{name: "git with a token as the user", req: WorkspaceRequest{Git: "https://" + secret + "@example.com/r.git"}, wantPath: "/workspace", wantMode: ModeWritable, wantGit: "https://***@example.com/r.git"},
		{name: "git readonly", req: WorkspaceRequest{Git: "https://example.com/r.git", Mode: "readonly"}, wantPath: "/workspace", wantMode: ModeReadOnly, wantGit: "https://example.com/r.git"},
		{name: "http", req: WorkspaceRequest{Git: "http://user:" + secret + "@example.com/r.git"}, wantErr: "must be an https:// URL"},
		{name: "ssh", req: WorkspaceRequest{Git: "ssh://git@example.com/r.git"}, wantErr: "must be an https:// URL"},
		{name: "scp-like", req: WorkspaceRequest{Git: "git@example.com:o/r.git"}, wantErr: "must be an https:// URL"},
		{name: "file", req: WorkspaceRequest{Git: "file:///etc"}, wantErr: "must be an https:// URL"},
		{name: "option-like", req: WorkspaceRequest{Git: "--upload-pack=touch /tmp/x"}, wantErr: "whitespace"},
		{name: "ext transport", req: WorkspaceRequest{Git: "ext::sh"}, wantErr: "must be an https:// URL"},
		{name: "space", req: WorkspaceRequest{Git: "https://example.com/a b"}, wantErr: "whitespace or control"},
		{name: "newline", req: WorkspaceRequest{Git: "https://user:" + secret + "@example.com/r\n"}, wantErr: "whitespace or control"},
		{name: "NUL", req: WorkspaceRequest{Git: "https://example.com/r\x00"}, wantErr: "whitespace or control"},
		{name: "DEL", req: WorkspaceRequest{Git: "https://example.com/r\x7f"}, wantErr: "whitespace or control"},
		{name: "non-breaking space", req: WorkspaceRequest{Git: "https://example.com/r\u00a0x"}, wantErr: "whitespace or control"},
		{name: "too long", req: WorkspaceRequest{Git: "https://example.com/" + strings.Repeat("a", MaxGitURL)}, wantErr: "longer than 2048"},
		{name: "no host", req: WorkspaceRequest{Git: "https:///r.git"}, wantErr: "no host"},
		{name: "only a port", req: WorkspaceRequest{Git: "https://:443/r.git"}, wantErr: "no host"},
		{name: "query", req: WorkspaceRequest{Git: "https://example.com/r.git?token=" + secret}, wantErr: "query or a fragment"},
		{name: "fragment", req: WorkspaceRequest{Git: "https://example.com/r.git#" + secret}, wantErr: "query or a fragment"},
		{name: "bad port", req: WorkspaceRequest{Git: "https://user:" + secret + "@example.com:x/r.git"}, wantErr: "not a valid URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, mode, src, err := checkWorkspace(tc.req)
			if tc.wantErr != "" {
				if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want a bad request saying %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), secret) {
					t.Errorf("the error quotes the secret: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			git := ""
			if src != nil {
				git = src.Redacted
			}
			if ws != tc.wantPath || mode != tc.wantMode || git != tc.wantGit {
				t.Errorf("got %q %q %q, want %q %q %q", ws, mode, git, tc.wantPath, tc.wantMode, tc.wantGit)
			}
		})
	}
}

func TestGitCredentialPlumbing(t *testing.T) {
	for _, tc := range []struct {
		raw, url, redacted, header string
	}{
		{"https://example.com/o/r.git", "https://example.com/o/r.git", "https://example.com/o/r.git", ""},
		{"HTTPS://Example.com/r", "https://Example.com/r", "https://Example.com/r", ""},
		{"https://alice:pa%40ss%3Aw0rd@example.com:8443/r.git", "https://example.com:8443/r.git", "https://***@example.com:8443/r.git",
			"Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("alice:pa@ss:w0rd"))},
		{"https://ghp_tokentoken@github.com/o/r", "https://github.com/o/r", "https://***@github.com/o/r",
			"Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("ghp_tokentoken:"))},
		{"https://@example.com/r", "https://example.com/r", "https://example.com/r", ""},
	} {
		g, err := parseGitURL(tc.raw)
		if err != nil {
			t.Fatalf("%s: %v", tc.raw, err)
		}
		if g.URL != tc.url || g.Redacted != tc.redacted || g.authHeader() != tc.header {
			t.Errorf("%s: url %q redacted %q header %q", tc.raw, g.URL, g.Redacted, g.authHeader())
		}
	}

	g, err := parseGitURL("https://alice:s3cret-pw@example.com/r.git")
	if err != nil {
		t.Fatal(err)
	}
	cmd := g.cloneCommand("/workspace")
	if d := cmp.Diff([]string{"git", "clone", "--quiet", "--", "https://example.com/r.git", "/workspace"}, cmd.Argv); d != "" {
		t.Errorf("argv (-want +got):\n%s", d)
	}
	token := base64.StdEncoding.EncodeToString([]byte("alice:s3cret-pw"))
	wantEnv := []string{
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ALLOW_PROTOCOL=https",
		"GIT_CONFIG_COUNT=3",
		"GIT_CONFIG_KEY_0=http.https://example.com/.extraHeader",
		"GIT_CONFIG_VALUE_0=Authorization: Basic " + token,
		"GIT_CONFIG_KEY_1=credential.helper",
		"GIT_CONFIG_VALUE_1=",
		"GIT_CONFIG_KEY_2=http.followRedirects",
		"GIT_CONFIG_VALUE_2=false",
	}
	if d := cmp.Diff(wantEnv, cmd.Env); d != "" {
		t.Errorf("env (-want +got):\n%s", d)
	}
	if cmd.TimeoutSeconds != CloneTimeoutSeconds || cmd.Shell != "" || cmd.Confine != nil {
		t.Errorf("command: %+v", cmd)
	}
	for _, a := range cmd.Argv {
		if strings.Contains(a, "s3cret") || strings.Contains(a, "alice") || strings.Contains(a, token) {
			t.Errorf("argv carries the credential: %q", a)
		}
	}
	plain, _ := parseGitURL("https://example.com/r.git")
	if d := cmp.Diff([]string{"GIT_TERMINAL_PROMPT=0", "GIT_ALLOW_PROTOCOL=https"}, plain.cloneCommand("/w").Env); d != "" {
		t.Errorf("env without a credential (-want +got):\n%s", d)
	}

	stderr := "fatal: unable to access 'https://alice:s3cret-pw@example.com/r.git/': header Authorization: Basic " + token +
		"; user alice:s3cret-pw; bare s3cret-pw"
	red := g.redact(stderr)
	for _, leak := range []string{"s3cret", token, "alice"} {
		if strings.Contains(red, leak) {
			t.Errorf("redacted text still has %q: %s", leak, red)
		}
	}
	if !strings.Contains(red, "fatal: unable to access") {
		t.Errorf("redaction ate the message: %s", red)
	}
	// The userinfo exactly as written (any percent-encoding) goes too.
	enc, _ := parseGitURL("https://al%69ce:s3cret%2Dpw@example.com/r.git")
	if enc.authHeader() != g.authHeader() {
		t.Errorf("percent-decoding: header %q", enc.authHeader())
	}
	if red := enc.redact("as typed al%69ce:s3cret%2Dpw, password s3cret%2Dpw, decoded s3cret-pw"); strings.Contains(red, "s3cret") || strings.Contains(red, "al%69ce") {
		t.Errorf("redacted text still has the typed credential: %s", red)
	}
	if plain.redact(stderr) != stderr {
		t.Error("a URL without a credential changed text")
	}
}

func TestReadOnlyConfinement(t *testing.T) {
	for _, tc := range []struct {
		ws       string
		ro, rw   []string
		writable bool
	}{
		{ws: "/workspace", ro: []string{"/workspace"}, rw: []string{"/tmp", "/var/tmp", "/home/agent"}},
		{ws: "/home/agent/project", ro: []string{"/home/agent/project", "/home/agent"}, rw: []string{"/tmp", "/var/tmp"}},
		{ws: "/home", ro: []string{"/home"}, rw: []string{"/tmp", "/var/tmp"}},
		{ws: "/tmp/w", ro: []string{"/tmp/w", "/tmp"}, rw: []string{"/var/tmp", "/home/agent"}},
		{ws: "/var", ro: []string{"/var"}, rw: []string{"/tmp", "/home/agent"}},
	} {
		c := readOnlyConfinement(tc.ws)
		if c.Enforcement != "strict" || !cmp.Equal(c.ReadOnly, tc.ro) || !cmp.Equal(c.ReadWrite, tc.rw) {
			t.Errorf("%s: %+v, want read_only %v read_write %v", tc.ws, c, tc.ro, tc.rw)
		}
		// No writable rule may reach into the workspace or hold it.
		for _, rw := range c.ReadWrite {
			if pathWithin(rw, tc.ws) || pathWithin(tc.ws, rw) {
				t.Errorf("%s: writable %s overlaps the workspace", tc.ws, rw)
			}
		}
	}
	if confinement(&Session{Workspace: Workspace{Path: "/workspace", Mode: ModeWritable}}) != nil ||
		confinement(&Session{Workspace: Workspace{Path: "/workspace"}}) != nil {
		t.Error("a writable workspace got a confinement")
	}
	if c := confinement(&Session{Workspace: Workspace{Path: "/workspace", Mode: ModeReadOnly}}); !c.Enabled() {
		t.Error("a read-only workspace got no confinement")
	}
}

// gitServer serves the bare repositories under root over HTTPS through
// git-http-backend, answering 401 unless the request carries
// wantAuth; seen collects the Authorization headers that arrived.
type gitServer struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func (s *gitServer) auths() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

func newGitServer(t *testing.T, root, wantAuth string) *gitServer {
	t.Helper()
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatal(err)
	}
	backend := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
	}
	if _, err := os.Stat(backend.Path); err != nil {
		t.Skipf("needs git-http-backend: %v", err)
	}
	gs := &gitServer{}
	gs.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get("Authorization")
		gs.mu.Lock()
		gs.seen = append(gs.seen, got)
		gs.mu.Unlock()
		if got != wantAuth {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(gs.Close)
	return gs
}

// hostGit runs git on the host with no user or system configuration.
func hostGit(t *testing.T, home string, extraEnv []string, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com"}, extraEnv...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return stderr.Bytes(), err
	}
	return out, nil
}

// TestCloneCommandAuthenticates runs the clone command create sends to the
// guest, on the host, against a loopback HTTPS git server that insists on
// the credential: the credential must get through from the environment
// alone and be left nowhere in the clone. Sandboxes have no network yet,
// so this is where the mechanism is proven.
func TestCloneCommandAuthenticates(t *testing.T) {
	testutil.RequiresCommand(t, "git")
	tmp := t.TempDir()
	home := filepath.Join(tmp, "home")
	root := filepath.Join(tmp, "srv")
	work := filepath.Join(tmp, "work")
	for _, d := range []string{home, root, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := hostGit(t, home, nil, "-C", work, "init", "-q", "-b", "main"); err != nil {
		t.Fatalf("init: %v %s", err, out)
	}
	os.WriteFile(filepath.Join(work, "README"), []byte("cloned through the credential\n"), 0o644)
	if out, err := hostGit(t, home, nil, "-C", work, "add", "README"); err != nil {
		t.Fatalf("add: %v %s", err, out)
	}
	if out, err := hostGit(t, home, nil, "-C", work, "commit", "-q", "-m", "first"); err != nil {
		t.Fatalf("commit: %v %s", err, out)
	}
	if out, err := hostGit(t, home, nil, "clone", "-q", "--bare", work, filepath.Join(root, "r.git")); err != nil {
		t.Fatalf("bare: %v %s", err, out)
	}

	const user, password = "alice", "s3cret-pw"
	token := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	srv := newGitServer(t, root, "Basic "+token)
	ca := filepath.Join(tmp, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	tlsEnv := []string{"GIT_SSL_CAINFO=" + ca}
	host := strings.TrimPrefix(srv.URL, "https://")
	clone := func(rawURL, dest string) ([]byte, error) {
		g, err := parseGitURL(rawURL)
		if err != nil {
			t.Fatal(err)
		}
		cmd := g.cloneCommand(dest)
		return hostGit(t, home, append(tlsEnv, cmd.Env...), cmd.Argv[1:]...)
	}

	// Without the credential the server refuses: the header is what
	// authenticates.
	if out, err := clone("https://"+host+"/r.git", filepath.Join(tmp, "anon")); err == nil {
		t.Fatal("a clone without the credential succeeded: the server does not check")
	} else if !strings.Contains(string(out), "401") && !strings.Contains(string(out), "Authentication failed") && !strings.Contains(string(out), "could not read Username") {
		t.Errorf("anonymous clone failed for another reason: %s", out)
	}
	// A wrong password fails, and the note made of git's stderr does not
	// carry it.
	wrong, _ := parseGitURL("https://" + user + ":wrong-pw-123@" + host + "/r.git")
	out, err := hostGit(t, home, append(tlsEnv, wrong.cloneCommand(filepath.Join(tmp, "wrong")).Env...), wrong.cloneCommand(filepath.Join(tmp, "wrong")).Argv[1:]...)
	if err == nil {
		t.Fatal("a clone with a wrong password succeeded")
	}
	if n := wrong.redact("git clone failed: " + string(out)); strings.Contains(n, "wrong-pw-123") {
		t.Errorf("note keeps the password: %s", n)
	}

	dest := filepath.Join(tmp, "clone")
	if out, err := clone("https://"+user+":"+password+"@"+host+"/r.git", dest); err != nil {
		t.Fatalf("clone with the credential: %v: %s (server saw %q)", err, out, srv.auths())
	}
	got, err := os.ReadFile(filepath.Join(dest, "README"))
	if err != nil || string(got) != "cloned through the credential\n" {
		t.Fatalf("cloned README: %q %v", got, err)
	}
	if auths := srv.auths(); len(auths) == 0 || auths[len(auths)-1] != "Basic "+token {
		t.Errorf("server saw %q", auths)
	}
	origin, err := hostGit(t, home, nil, "-C", dest, "config", "remote.origin.url")
	if err != nil || strings.TrimSpace(string(origin)) != "https://"+host+"/r.git" {
		t.Errorf("remote.origin.url %q %v", origin, err)
	}
	// Nothing under .git holds the credential in any form.
	filepath.Walk(filepath.Join(dest, ".git"), func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return err
		}
		b, _ := os.ReadFile(p)
		for _, leak := range []string{password, token, "extraheader", "extraHeader"} {
			if bytes.Contains(b, []byte(leak)) {
				t.Errorf("%s holds %q", p, leak)
			}
		}
		return nil
	})

	// A redirect to another origin is not followed with a credential, so
	// the other server (which serves anyone) never sees it. Git would
	// send its extra headers to every request after the redirect.
	other := newGitServer(t, root, "")
	redirector := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.RequestURI(), http.StatusFound)
	}))
	defer redirector.Close()
	rhost := strings.TrimPrefix(redirector.URL, "https://")
	if out, err := clone("https://"+user+":"+password+"@"+rhost+"/r.git", filepath.Join(tmp, "redirected")); err == nil {
		t.Errorf("a redirected clone with a credential succeeded: %s", out)
	}
	for _, a := range other.auths() {
		if a != "" {
			t.Errorf("the redirect target received Authorization %q", a)
		}
	}
}

func TestProbeReadOnlyRefusesWithoutReport(t *testing.T) {
	// probeReadOnly's verdict on the reports a guest can send back.
	for _, tc := range []struct {
		name string
		res  *api.ExecResult
		ok   bool
	}{
		{"enforced", &api.ExecResult{Confinement: &api.ConfineReport{Landlock: true, LandlockABI: 4, LandlockRules: 9}}, true},
		{"no report", &api.ExecResult{}, false},
		{"no landlock", &api.ExecResult{Confinement: &api.ConfineReport{Seccomp: true}}, false},
		{"missing rights", &api.ExecResult{Confinement: &api.ConfineReport{Landlock: true, Missing: []string{"truncate"}}}, false},
		{"failed", &api.ExecResult{ExitCode: 1, Confinement: &api.ConfineReport{Landlock: true}}, false},
	} {
		if err := readOnlyVerdict(tc.res); (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrConflict)) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
