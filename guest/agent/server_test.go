package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"paddock.dev/paddock/guest/agent"
	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/confine"
)

func TestHealthAndCapabilities(t *testing.T) {
	t.Parallel()
	a := startAgent(t, nil)
	ctx := testCtx(t)
	h, err := a.c.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	want := &api.Health{Version: api.Version, PID: os.Getpid(), Hostname: host}
	// The kernel's OOM count, when it keeps one: it can only have grown
	// between this read and the agent's.
	if n, ok := agent.ReadOOMKills("/proc/vmstat"); ok {
		if h.OOMKills == nil || *h.OOMKills < n {
			t.Errorf("health oom_kills %v, the kernel says %d", h.OOMKills, n)
		}
		want.OOMKills = h.OOMKills
	}
	if diff := cmp.Diff(want, h); diff != "" {
		t.Errorf("health (-want +got):\n%s", diff)
	}
	caps, err := a.c.Capabilities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// guest/confine probes the kernel on its own; the two must agree.
	wantCaps := &api.Capabilities{JobsV2: true, PTY: true, Confinement: confine.Support()}
	if diff := cmp.Diff(wantCaps, caps); diff != "" {
		t.Errorf("capabilities (-want +got):\n%s", diff)
	}
	status, _ := os.ReadFile("/proc/self/status")
	if hasSeccomp := bytes.Contains(status, []byte("\nSeccomp:")); caps.Confinement.Seccomp != hasSeccomp {
		t.Errorf("seccomp %v, but /proc/self/status says %v", caps.Confinement.Seccomp, hasSeccomp)
	}
}

// rawAgent serves an agent and returns a plain HTTP client for requests
// the typed client cannot make.
func rawAgent(t *testing.T) *http.Client {
	t.Helper()
	a := startAgent(t, nil)
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", a.sock)
		},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func TestHTTPErrors(t *testing.T) {
	t.Parallel()
	hc := rawAgent(t)
	tests := []struct {
		name, method, path, body string
		want                     int
		wantCode                 string
	}{
		{"unknown route", "GET", "/v1/nope", "", 404, "not_found"},
		{"empty body", "POST", "/v1/exec", "", 400, "invalid_argument"},
		{"not JSON", "POST", "/v1/exec", "{argv:", 400, "invalid_argument"},
		{"wrong type", "POST", "/v1/exec", `{"argv":"ls"}`, 400, "invalid_argument"},
		{"body too large", "POST", "/v1/manifest", `{"path":"` + strings.Repeat("a", 70<<10) + `"}`, 413, "too_large"},
		{"bad query integer", "GET", "/v1/files/range?path=/x&offset=abc", "", 400, "invalid_argument"},
		{"bad query bool", "DELETE", "/v1/files?path=/a/b&recursive=maybe", "", 400, "invalid_argument"},
		{"upload without offset", "PUT", "/v1/uploads/abc", "data", 400, "invalid_argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, "http://guest"+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e api.Error
			if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
				t.Fatalf("error body is not api.Error: %v", err)
			}
			if resp.StatusCode != tt.want || e.Code != tt.wantCode || e.Error == "" {
				t.Errorf("got %d %+v, want %d %s", resp.StatusCode, e, tt.want, tt.wantCode)
			}
		})
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	for _, cfg := range []agent.Config{
		{Root: "relative"},
		{Root: "/", Env: []string{"NOEQUALS"}},
		{Root: "/", GuestUser: "nobody"},
		{Root: "/", GuestUser: "1000"},
		{Root: "/", GuestUser: "-1:5"},
	} {
		if _, err := agent.New(cfg); err == nil {
			t.Errorf("New(%+v) accepted a bad config", cfg)
		}
	}
}

func TestGuestUser(t *testing.T) {
	t.Parallel()
	requiresRoot(t)
	a := startAgent(t, func(c *agent.Config) {
		c.GuestUser, c.Home = "65534:65533", "/"
		// The path a memfd-run agent uses; it must work after the switch
		// to the guest user.
		c.ConfineBinary = "/proc/self/exe"
	})
	ctx := testCtx(t)
	res, err := a.c.Exec(ctx, api.ExecRequest{Command: api.Command{Shell: "id -u; id -g; id -G"}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("65534\n65533\n65533\n", string(res.Stdout)); diff != "" {
		t.Errorf("identity (-want +got):\n%s", diff)
	}
	res, err = a.c.Exec(ctx, api.ExecRequest{Command: api.Command{Argv: []string{"id", "-u"}, Confine: &api.Confinement{Enforcement: "strict"}}})
	if err != nil || string(res.Stdout) != "65534\n" || res.Confinement == nil {
		t.Errorf("confined as the guest user: %+v, %v", res, err)
	}
	j, err := a.c.StartJob(ctx, api.JobRequest{Command: api.Command{Argv: []string{"id", "-u"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := endOf(t, a.c, j.ID); got.Stdout != "65534\n" {
		t.Errorf("job ran as %q", got.Stdout)
	}
	// The files routes act as the guest user: it writes in a directory
	// of its own, and what is made there is its own.
	openForGuest(t, a)
	if err := os.Mkdir(filepath.Join(a.root, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(a.root, "ws"), 65534, 65533); err != nil {
		t.Fatal(err)
	}
	if _, err := a.c.WriteFile(ctx, api.FileContent{Path: "/ws/made/by/api.txt", Content: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"ws/made", "ws/made/by", "ws/made/by/api.txt"} {
		fi, err := os.Stat(filepath.Join(a.root, p))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != 65534 || st.Gid != 65533 {
			t.Errorf("%s owned by %d:%d, want the guest user", p, st.Uid, st.Gid)
		}
	}
}

// TestUnprivileged: the option that keeps the agent from switching users
// is refused to a root agent (so the real backends, whose agents are
// root, cannot turn it on), and an ordinary-user agent with it runs
// commands as itself whatever GuestUser says.
func TestUnprivileged(t *testing.T) {
	t.Parallel()
	if os.Geteuid() == 0 {
		dir := t.TempDir()
		_, err := agent.New(agent.Config{Root: dir, SpoolDir: filepath.Join(dir, "s"), UploadDir: filepath.Join(dir, "u"), Unprivileged: true})
		if err == nil {
			t.Fatal("a root agent accepted Unprivileged")
		}
		return
	}
	a := startAgent(t, func(c *agent.Config) { c.Unprivileged, c.GuestUser = true, "1000:1000" })
	res, err := a.c.Exec(testCtx(t), api.ExecRequest{Command: api.Command{Shell: "id -u"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := strconv.Itoa(os.Getuid()) + "\n"; string(res.Stdout) != want || res.ExitCode != 0 {
		t.Errorf("ran as %q (exit %d, stderr %q), want the agent's own uid %q", res.Stdout, res.ExitCode, res.Stderr, want)
	}
}

// TestReadOOMKills: the oom_kill line of a vmstat file is read wherever it
// sits; a file without it, with a bad value, or missing, is "not counted".
func TestReadOOMKills(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		name, body string
		n          int64
		ok         bool
	}{
		{"middle", "nr_free_pages 100\noom_kill 7\npgfault 9\n", 7, true},
		{"last", "nr_free_pages 100\noom_kill 0", 0, true},
		{"prefix only", "oom_kill_other 5\n", 0, false},
		{"absent", "nr_free_pages 100\n", 0, false},
		{"bad value", "oom_kill many\n", 0, false},
		{"negative", "oom_kill -1\n", 0, false},
	} {
		p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
		if err := os.WriteFile(p, []byte(tc.body), 0o644); err != nil {
			t.Fatal(err)
		}
		if n, ok := agent.ReadOOMKills(p); n != tc.n || ok != tc.ok {
			t.Errorf("%s: %d %v, want %d %v", tc.name, n, ok, tc.n, tc.ok)
		}
	}
	if _, ok := agent.ReadOOMKills(filepath.Join(dir, "missing")); ok {
		t.Error("a missing file counted")
	}
}
