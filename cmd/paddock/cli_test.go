package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"paddock.dev/paddock/client"
	"paddock.dev/paddock/hostd/workspace"
	"paddock.dev/paddock/hypervisor/image"
	"paddock.dev/paddock/internal/testutil"
)

// buildCLI builds bin/paddock into a temp dir with the guest beside it, as
// `make build` lays them out.
func buildCLI(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "paddock"), ".").CombinedOutput()
	if err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	guest, err := os.ReadFile(testutil.GuestBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "paddock-guest"), guest, 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "paddock")
}

func TestCLI(t *testing.T) {
	testutil.RequiresRoot(t)
	bin := buildCLI(t)
	state := t.TempDir()
	env := append(os.Environ(), "PADDOCK_GUEST=")
	run := func(args ...string) (string, string, int) {
		t.Helper()
		return runCLI(t, bin, env, nil, append([]string{"--state-dir", state}, args...)...)
	}
	// An image that was never built is refused with how to build it
	// (exit 3), and nothing is built for it.
	if _, se, code := run("sandbox", "run", "--image", "nosuch", "--", "true"); code != exitNotFound || !strings.Contains(se, "paddock image build nosuch") {
		t.Errorf("run on an unbuilt image: code %d, stderr %q", code, se)
	}
	if ms, err := (image.Store{Dir: filepath.Join(state, "images")}).List(); len(ms) != 0 || err != nil {
		t.Errorf("a run on an unbuilt image built %d images (%v)", len(ms), err)
	}
	// The built-in image is built on the first run that needs it, once,
	// with a log line saying so.
	if so, se, code := run("sandbox", "run", "--", "echo first"); code != 0 || so != "first\n" || strings.Count(se, "built the default image on first use") != 1 {
		t.Fatalf("first run on a fresh state dir: code %d, stdout %q, stderr %q", code, so, se)
	}
	if _, se, _ := run("sandbox", "run", "--", "true"); strings.Contains(se, "built the default image") {
		t.Errorf("the second run built the image again: %q", se)
	}
	so, _, code := run("--json", "image", "ls")
	var imgs []struct{ Name, Builder string }
	if err := json.Unmarshal([]byte(so), &imgs); err != nil || code != 0 || len(imgs) != 1 || imgs[0].Builder != "mini" {
		t.Errorf("image ls --json: %q %v", so, err)
	}
	if so, _, _ := run("image", "ls"); !strings.HasPrefix(so, "NAME") || !strings.Contains(so, "mini") {
		t.Errorf("image ls table: %q", so)
	}
	// Output and exit code are the command's.
	so, se, code := run("sandbox", "run", "--", "echo out; echo err >&2; exit 7")
	if so != "out\n" || se != "err\n" || code != 7 {
		t.Errorf("run: stdout %q stderr %q code %d", so, se, code)
	}
	if _, _, code := run("sandbox", "run", "--", "kill -TERM $$"); code != 128+15 {
		t.Errorf("a command killed by SIGTERM: code %d, want 143", code)
	}
	so, _, code = run("sandbox", "run", "echo", "a;b")
	if so != "a;b\n" || code != 0 {
		t.Errorf("argv run: %q %d", so, code)
	}
	so, _, code = run("--json", "sandbox", "run", "--", "id -u")
	var res struct {
		Machine string
		Result  struct {
			ExitCode int    `json:"exit_code"`
			Stdout   []byte `json:"stdout"`
		}
	}
	if err := json.Unmarshal([]byte(so), &res); err != nil || res.Machine == "" || string(res.Result.Stdout) != "1000\n" || code != 0 {
		t.Errorf("--json run: %q %v", so, err)
	}
	// Confinement refuses a write outside the writable paths.
	_, se, code = run("-v", "sandbox", "run", "--confine", "--", "echo x > /home/agent/f")
	if code == 0 || !strings.Contains(se, "Permission denied") || !strings.Contains(se, `"landlock":true`) {
		t.Errorf("confined run: code %d stderr %q", code, se)
	}
	// Bad flags are usage errors.
	if _, _, code := run("sandbox", "run", "--pids", "1", "--", "true"); code != exitUsage {
		t.Errorf("--pids 1: code %d, want %d", code, exitUsage)
	}
	if _, _, code := run("sandbox", "run", "--no-such-flag"); code != exitUsage {
		t.Errorf("unknown flag: code %d, want %d", code, exitUsage)
	}
	// A terminal: output and the remote exit code come back.
	so, _, code = run("sandbox", "shell", "--", "tty; echo shell-ok; exit 3")
	if code != 3 || !strings.Contains(so, "/dev/pts/") || !strings.Contains(so, "shell-ok") {
		t.Errorf("sandbox shell: code %d stdout %q", code, so)
	}
	if raw, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(raw), state) {
		t.Errorf("sandbox run left a mount under the state dir")
	}
	so, _, code = run("backends")
	if code != 0 || !strings.Contains(so, "procbox") || !strings.Contains(so, "namespaces") {
		t.Errorf("backends: %q", so)
	}
}

// TestCLISweepsLeftovers kills a `paddock sandbox run` with SIGKILL while
// its sandbox runs, then checks that the next paddock on the same state
// dir removes what it left: the sandbox's processes, cgroup and files.
func TestCLISweepsLeftovers(t *testing.T) {
	testutil.RequiresRoot(t)
	bin := buildCLI(t)
	state := t.TempDir()
	paddock := func(args ...string) *exec.Cmd {
		c := exec.Command(bin, append([]string{"--state-dir", state}, args...)...)
		c.Env = append(os.Environ(), "PADDOCK_GUEST=")
		return c
	}
	if out, err := paddock("image", "build", "mini").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	victim := paddock("sandbox", "run", "--", "sleep 300")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	machines := filepath.Join(state, "procbox", "machines")
	var id string
	for deadline := time.Now().Add(20 * time.Second); id == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		ents, _ := os.ReadDir(machines)
		for _, e := range ents {
			if _, err := os.Stat(filepath.Join(machines, e.Name(), "console.log")); err == nil {
				id = e.Name()
			}
		}
	}
	if id == "" {
		t.Fatal("the sandbox never appeared")
	}
	time.Sleep(300 * time.Millisecond) // let the command start
	victim.Process.Kill()
	victim.Wait()
	cgroups := func() []string {
		m, _ := filepath.Glob("/sys/fs/cgroup/*/paddock/" + id)
		n, _ := filepath.Glob("/sys/fs/cgroup/paddock/" + id)
		return append(m, n...)
	}
	if len(cgroups()) == 0 {
		t.Fatal("the killed run left no cgroup: the test proves nothing")
	}
	if out, err := paddock("sandbox", "run", "--", "true").CombinedOutput(); err != nil {
		t.Fatalf("second run: %v: %s", err, out)
	}
	if cg := cgroups(); len(cg) != 0 {
		t.Errorf("leftover cgroups not swept: %v", cg)
	}
	if _, err := os.Stat(filepath.Join(machines, id)); err == nil {
		t.Errorf("leftover machine dir %s not swept", id)
	}
	if raw, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(raw), state) {
		t.Errorf("a mount under the state dir is left")
	}
}

// TestCLIConcurrentRuns starts several `paddock sandbox run` at once on a
// fresh state dir: they race to make and mount the layer store, and sweep
// each other's directories. All must succeed and leave nothing behind.
func TestCLIConcurrentRuns(t *testing.T) {
	testutil.RequiresRoot(t)
	bin := buildCLI(t)
	state := t.TempDir()
	paddock := func(args ...string) *exec.Cmd {
		c := exec.Command(bin, append([]string{"--state-dir", state}, args...)...)
		c.Env = append(os.Environ(), "PADDOCK_GUEST=")
		return c
	}
	if out, err := paddock("image", "build", "mini").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	const n = 6
	errs := make(chan error, n*2)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range 2 {
				out, err := paddock("sandbox", "run", "--", fmt.Sprintf("echo %d-%d > /workspace/f; sleep 0.5; cat /workspace/f", i, round)).CombinedOutput()
				if err != nil || strings.TrimSpace(string(out)) != fmt.Sprintf("%d-%d", i, round) {
					errs <- fmt.Errorf("run %d.%d: %v: %s", i, round, err, out)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if raw, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(raw), state) {
		t.Errorf("a mount under the state dir is left")
	}
	if out, _ := exec.Command("losetup", "-a").CombinedOutput(); strings.Contains(string(out), state) {
		t.Errorf("a loop device is left: %s", out)
	}
	if ents, _ := os.ReadDir(filepath.Join(state, "procbox", "machines")); len(ents) != 0 {
		t.Errorf("%d machine directories left", len(ents))
	}
}

// daemonSetup builds the CLI, makes the mini image in a fresh state dir
// and picks a free loopback address; env carries the admin token and the
// client settings for it: the daemon's gateway over HTTPS, trusted
// through PADDOCK_CA (its internal CA's root, made on the first start).
// A test that runs serve --gateway=false uses plainHTTP(env, addr).
func daemonSetup(t *testing.T) (bin, state, addr string, env []string) {
	t.Helper()
	bin, state, addr, env = daemonSetupFresh(t)
	if out, err := exec.Command(bin, "--state-dir", state, "image", "build", "mini").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return bin, state, addr, env
}

// liveCLI is the common start of a live CLI test: daemonSetup, then
// `paddock serve --stop-sandboxes` on it, stopped (as stopServe does)
// when the test ends, after its deferred calls have run.
type liveCLI struct {
	t                *testing.T
	bin, state, addr string
	env              []string
}

// serveCLI sets up a daemon and starts serve for a live CLI test.
func serveCLI(t *testing.T) *liveCLI {
	t.Helper()
	bin, state, addr, env := daemonSetup(t)
	srv := startServe(t, bin, state, addr, env, "--stop-sandboxes")
	t.Cleanup(func() { stopServe(t, srv) })
	return &liveCLI{t: t, bin: bin, state: state, addr: addr, env: env}
}

// pd runs the CLI against the daemon and returns its stdout, stderr and
// exit code.
func (c *liveCLI) pd(args ...string) (string, string, int) {
	c.t.Helper()
	return runCLI(c.t, c.bin, c.env, nil, args...)
}

// newSession runs `paddock --json session run` with args and returns the
// new session's id; a run that fails or prints no JSON fails the test.
func (c *liveCLI) newSession(args ...string) string {
	c.t.Helper()
	out, se, code := c.pd(append([]string{"--json", "session", "run"}, args...)...)
	var s struct{ ID string }
	if err := json.Unmarshal([]byte(out), &s); err != nil || code != 0 {
		c.t.Fatalf("session run %v: %q %q %d", args, out, se, code)
	}
	return s.ID
}

// daemonSetupFresh is daemonSetup without the image build: the state dir
// is empty.
func daemonSetupFresh(t *testing.T) (bin, state, addr string, env []string) {
	t.Helper()
	testutil.RequiresRoot(t)
	bin = buildCLI(t)
	state, addr, env = daemonOn(t, bin)
	return bin, state, addr, env
}

// daemonOn is daemonSetupFresh for a CLI already built: another empty
// state dir, address and env, for a second daemon in one test.
func daemonOn(t *testing.T, bin string) (state, addr string, env []string) {
	t.Helper()
	state = t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = l.Addr().String()
	l.Close()
	const token = "pdk_cli_test_token_0123456789"
	env = append(os.Environ(), "PADDOCK_GUEST=", "PADDOCK_ADMIN_TOKEN="+token, "PADDOCK_TOKEN="+token,
		"PADDOCK_URL=https://"+addr, "PADDOCK_CA="+gatewayRoot(state))
	t.Cleanup(func() {
		// A daemon leaves its sandboxes running for the next start: if a
		// test stopped one that way (or failed half-way), a last start
		// with --stop-sandboxes adopts and stops them, so nothing outlives
		// the test. (This cleanup runs after those of the test's own
		// startServe calls, so their daemons are gone and addr is free.)
		machines := filepath.Join(state, "procbox", "machines")
		if ents, _ := os.ReadDir(machines); len(ents) == 0 {
			return
		}
		stopServe(t, startServe(t, bin, state, addr, env, "--stop-sandboxes"))
		if ents, _ := os.ReadDir(machines); len(ents) != 0 {
			t.Errorf("sandboxes outlived the test: %d machine directories left after serve --stop-sandboxes", len(ents))
		}
	})
	return state, addr, env
}

// startServe starts `paddock serve` on addr (with extraArgs after the
// listen flag) and returns once it answers /healthz. Its stderr is kept
// for serveLogs. A daemon the test has not stopped by the time it ends
// (a t.Fatal half-way) is stopped by a cleanup, as stopServe would.
func startServe(t *testing.T, bin, state, addr string, env []string, extraArgs ...string) *exec.Cmd {
	t.Helper()
	srv := exec.Command(bin, append([]string{"--state-dir", state, "serve", "--listen", addr}, extraArgs...)...)
	srv.Env = env
	srv.Stderr = &lockedBuilder{}
	// Wait returns even if a child the daemon left holds its stderr open.
	srv.WaitDelay = 5 * time.Second
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if srv.ProcessState == nil {
			stopServe(t, srv)
		}
	})
	health := "https://" + addr + "/healthz"
	if slices.Contains(extraArgs, "--gateway=false") {
		health = "http://" + addr + "/healthz"
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		// The gateway's CA root exists once serve has started Caddy.
		if resp, err := daemonHTTPClient(state).Get(health); err == nil {
			resp.Body.Close()
			return srv
		}
		if time.Now().After(deadline) {
			srv.Process.Kill()
			srv.Wait()
			t.Fatalf("serve never answered /healthz:\n%s", serveLogs(srv))
		}
	}
}

// gatewayRoot is where serve keeps its gateway's internal CA root.
func gatewayRoot(state string) string {
	return filepath.Join(state, "gateway", "pki", "authorities", "local", "root.crt")
}

// daemonHTTPClient is an HTTP client that trusts the gateway of the
// daemon on state (and nothing else) once its root exists.
func daemonHTTPClient(state string) *http.Client {
	roots := x509.NewCertPool()
	if pem, err := os.ReadFile(gatewayRoot(state)); err == nil {
		roots.AppendCertsFromPEM(pem)
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
}

// daemonSDK is the Go SDK's client for the daemon on state at addr,
// through its gateway.
func daemonSDK(t *testing.T, state, addr, token string) *client.Client {
	t.Helper()
	roots, err := client.TrustPEM(gatewayRoot(state))
	if err != nil {
		t.Fatal(err)
	}
	return client.New("https://"+addr, token, client.WithRootCAs(roots))
}

// plainHTTP is env for a daemon run with --gateway=false (plain HTTP).
func plainHTTP(env []string, addr string) []string {
	out := slices.Clone(env)
	for i, kv := range out {
		if strings.HasPrefix(kv, "PADDOCK_URL=") {
			out[i] = "PADDOCK_URL=http://" + addr
		}
	}
	return out
}

// stopServe sends a daemon from startServe SIGTERM and waits for it. An
// exit that is not clean is reported; so is one that has not come within
// 20 s, after which the daemon is killed.
func stopServe(t *testing.T, srv *exec.Cmd) {
	t.Helper()
	srv.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- srv.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve did not exit cleanly on SIGTERM: %v\n%s", err, serveLogs(srv))
		}
	case <-time.After(20 * time.Second):
		srv.Process.Kill()
		<-done
		t.Errorf("serve ignored SIGTERM for 20 s and was killed:\n%s", serveLogs(srv))
	}
}

// serveLogs is what a daemon from startServe has written to stderr so far.
func serveLogs(srv *exec.Cmd) string { return srv.Stderr.(*lockedBuilder).String() }

// lockedBuilder collects a child's stderr while the test reads it.
type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// runCLI runs bin with args and env, stdin from stdin (none when nil), and
// returns what it printed and its exit code. A binary that cannot be run
// at all fails the test.
func runCLI(t *testing.T, bin string, env []string, stdin []byte, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	c := exec.Command(bin, args...)
	c.Env = env
	if stdin != nil {
		c.Stdin = bytes.NewReader(stdin)
	}
	var so, se strings.Builder
	c.Stdout, c.Stderr = &so, &se
	err := c.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return so.String(), se.String(), code
}

// TestCLIServeWalkthrough runs `paddock serve` and the 60-second
// walkthrough with `paddock session` verbs against it.
func TestCLIServeWalkthrough(t *testing.T) {
	bin, state, addr, env := daemonSetup(t)
	srv := startServe(t, bin, state, addr, env, "--stop-sandboxes")
	defer func() {
		stopServe(t, srv)
		if raw, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(raw), state) {
			t.Errorf("serve left a mount under the state dir")
		}
	}()
	pd := func(args ...string) (string, int) {
		t.Helper()
		out, _, code := runCLI(t, bin, env, nil, args...)
		return out, code
	}
	small := filepath.Join(t.TempDir(), "small.txt")
	os.WriteFile(small, []byte("hello from the host\n"), 0o644)
	big := filepath.Join(t.TempDir(), "big.bin")
	bigData := bytes.Repeat([]byte("paddock!"), (9<<20)/8)
	os.WriteFile(big, bigData, 0o644)
	sum := sha256.Sum256(bigData)
	bigSum := hex.EncodeToString(sum[:])
	pulled := filepath.Join(t.TempDir(), "pulled.bin")
	resumed, bad := filepath.Join(t.TempDir(), "resumed.bin"), filepath.Join(t.TempDir(), "bad.bin")
	os.WriteFile(resumed+".part", bigData[:5<<20], 0o644)
	os.WriteFile(bad+".part", make([]byte, 1<<20), 0o644)
	// A stub OTLP collector: checks what a real one would need.
	var otlpMu sync.Mutex
	var otlpSpans int
	var otlpErr string
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		otlpMu.Lock()
		defer otlpMu.Unlock()
		var tr struct {
			ResourceSpans []struct {
				ScopeSpans []struct {
					Spans []struct {
						TraceID, Name string
					}
				}
			}
		}
		switch {
		case r.URL.Path != "/v1/traces" || r.Method != "POST":
			otlpErr = r.Method + " " + r.URL.Path
		case r.Header.Get("Content-Type") != "application/json" || r.Header.Get("X-Tenant") != "t1":
			otlpErr = "headers " + r.Header.Get("Content-Type") + " " + r.Header.Get("X-Tenant")
		case json.NewDecoder(r.Body).Decode(&tr) != nil || len(tr.ResourceSpans) != 1:
			otlpErr = "body"
		default:
			sp := tr.ResourceSpans[0].ScopeSpans[0].Spans
			if sp[0].Name != "agent.session" || len(sp[0].TraceID) != 32 {
				otlpErr = "root span " + sp[0].Name
			}
			otlpSpans = len(sp)
		}
	}))
	defer collector.Close()
	out, code := pd("--json", "session", "run", "claude-code", "--ttl-seconds", "600")
	var s struct{ ID string }
	if err := json.Unmarshal([]byte(out), &s); err != nil || code != 0 || s.ID == "" {
		t.Fatalf("session run: %q %d %v", out, code, err)
	}
	steps := []struct {
		args []string
		out  string
		code int
	}{
		{[]string{"session", "exec", s.ID, "--", "mkdir -p /workspace/demo && echo hi > /workspace/demo/a.txt"}, "", 0},
		{[]string{"session", "checkpoint", s.ID, "--tag", "before-change"}, "checkpoint before-change", 0},
		{[]string{"session", "exec", s.ID, "--", "echo changed > /workspace/demo/a.txt"}, "", 0},
		{[]string{"session", "artifacts", s.ID}, "A demo/a.txt", 0},
		{[]string{"session", "restore", s.ID, "before-change"}, "restored", 0},
		{[]string{"session", "exec", s.ID, "--", "cat /workspace/demo/a.txt; exit 4"}, "hi", 4},
		{[]string{"session", "timeline", s.ID}, "checkpoint", 0},
		{[]string{"session", "exec", "--stream", s.ID, "--", "echo streamed; exit 5"}, "streamed", 5},
		{[]string{"--state-dir", state, "ledger", "verify", s.ID}, "ok: 9 entries", 0},
		{[]string{"--state-dir", state, "ledger", "export", s.ID}, `"kind":"restore"`, 0},
		{[]string{"session", "restore", s.ID, "no-such-tag"}, "", 3},
		{[]string{"session", "ls"}, s.ID, 0},
		// A backend this daemon has not enabled is a usage error (400).
		{[]string{"session", "run", "--backend", "nope"}, "", exitUsage},
		{[]string{"session", "put", s.ID, small, "/workspace/notes/small.txt", "--mode", "640"}, "wrote /workspace/notes/small.txt", 0},
		{[]string{"session", "cat", s.ID, "/workspace/notes/small.txt"}, "hello from the host", 0},
		{[]string{"session", "files", s.ID, "/workspace/notes"}, "0640", 0},
		{[]string{"session", "put", s.ID, big, "/workspace/big.bin"}, "", exitUsage},
		{[]string{"session", "upload", s.ID, big, "/workspace/big.bin"}, "sha256 verified: true", 0},
		{[]string{"session", "exec", s.ID, "--", "sha256sum big.bin"}, bigSum, 0},
		{[]string{"session", "download", s.ID, "/workspace/big.bin", pulled}, "sha256 verified", 0},
		// An interrupted download (LOCAL.part holds the first 5 MiB) goes
		// on from where it stopped; a .part that does not match is caught
		// by the checksum and kept, and nothing is renamed.
		{[]string{"session", "download", "--resume", s.ID, "/workspace/big.bin", resumed}, "5242880 of them kept from", 0},
		{[]string{"session", "download", "--resume", s.ID, "/workspace/big.bin", bad}, "", exitError},
		{[]string{"session", "export", s.ID}, `"kind":"file.upload"`, 0},
		{[]string{"session", "export", s.ID, "--otlp", collector.URL, "--otlp-header", "X-Tenant=t1"}, "", 0},
		{[]string{"session", "rm-file", s.ID, "/workspace/notes", "-r"}, "", 0},
		{[]string{"session", "probe", s.ID}, `"promote": true`, 0},
		{[]string{"session", "git", s.ID, "status"}, "", exitConflict},
		{[]string{"session", "rm", s.ID}, "", 0},
		// The record stays, marked deleted; the ledger too; the list
		// shows it only with --all; other verbs refuse (409, exit 4).
		{[]string{"session", "get", s.ID}, "deleted", 0},
		{[]string{"session", "exec", s.ID, "--", "true"}, "", exitConflict},
		{[]string{"session", "timeline", s.ID}, "session.delete", 0},
		{[]string{"session", "ls", "--all"}, s.ID, 0},
		{[]string{"--state-dir", state, "ledger", "verify", s.ID}, "ok:", 0},
		{[]string{"session", "rm", s.ID}, "", 0},
	}
	// A background job followed to its exit code.
	jobOut, code := pd("session", "bg", s.ID, "--", "echo working; sleep 0.5; echo done; exit 6")
	job := strings.TrimSpace(jobOut)
	if code != 0 || !strings.HasPrefix(job, "j") {
		t.Fatalf("bg: %q %d", jobOut, code)
	}
	if out, code := pd("session", "logs", s.ID, job, "-f"); code != 6 || out != "working\ndone\n" {
		t.Errorf("logs -f: %q exit %d, want the output and 6", out, code)
	}
	if out, _ := pd("session", "jobs", s.ID); !strings.Contains(out, job) || !strings.Contains(out, "exited") {
		t.Errorf("jobs: %q", out)
	}
	for _, st := range steps {
		out, code := pd(st.args...)
		if code != st.code || !strings.Contains(out, st.out) {
			t.Errorf("paddock %s: code %d (want %d), output %q (want %q)", strings.Join(st.args, " "), code, st.code, out, st.out)
		}
	}
	otlpMu.Lock()
	if otlpErr != "" || otlpSpans < 10 {
		t.Errorf("OTLP export: %q, %d spans", otlpErr, otlpSpans)
	}
	otlpMu.Unlock()
	if b, err := os.ReadFile(pulled); err != nil || !bytes.Equal(b, bigData) {
		t.Errorf("the downloaded file differs from what was uploaded: %v", err)
	}
	if b, err := os.ReadFile(resumed); err != nil || !bytes.Equal(b, bigData) {
		t.Errorf("the resumed download differs: %v", err)
	}
	if _, err := os.Stat(bad); err == nil {
		t.Error("a download that failed its checksum was renamed into place")
	}
	if _, code := pd("session", "ls", "--token", "wrong-token-xxxxxxxx"); code != exitUnauthorized {
		t.Errorf("a wrong token: code %d", code)
	}
}

// TestCLIServeRestart stops the daemon with sessions running and starts
// it again, twice: after a clean SIGTERM and after a SIGKILL. Sessions,
// ledgers, checkpoints, jobs and open uploads are all there; running
// sandboxes are adopted (files and a running job intact); a sandbox that
// died while the daemon was down is reported lost with the reason, never
// silently dropped. --stop-sandboxes stops them instead.
func TestCLIServeRestart(t *testing.T) {
	bin, state, addr, env := daemonSetup(t)
	serve := func(extra ...string) *exec.Cmd {
		t.Helper()
		return startServe(t, bin, state, addr, env, extra...)
	}
	pd := func(args ...string) (string, int) {
		t.Helper()
		out, _, code := runCLI(t, bin, env, nil, args...)
		return out, code
	}
	type rec struct {
		State       string
		Note        string
		Checkpoints []struct{ Tag string }
	}
	get := func(id string) rec {
		t.Helper()
		out, code := pd("--json", "session", "get", id)
		var r rec
		if err := json.Unmarshal([]byte(out), &r); err != nil || code != 0 {
			t.Fatalf("session get %s: code %d %q", id, code, out)
		}
		return r
	}
	run := func() string {
		t.Helper()
		out, _ := pd("--json", "session", "run")
		var s struct{ ID string }
		json.Unmarshal([]byte(out), &s)
		if s.ID == "" {
			t.Fatalf("session run: %q", out)
		}
		return s.ID
	}
	srv := serve()
	a, b := run(), run()
	// A second daemon on the same state dir refuses to start, and leaves
	// the first one's sandboxes alone.
	second := exec.Command(bin, "--state-dir", state, "serve", "--listen", "127.0.0.1:0")
	second.Env = env
	if out, err := second.CombinedOutput(); err == nil || !strings.Contains(string(out), "another paddock serve is running") {
		t.Errorf("a second serve on the state dir: %v %s", err, out)
	}
	if r := get(a); r.State != "running" {
		t.Errorf("the second serve touched the first one's session: %+v", r)
	}
	pd("session", "exec", a, "--", "echo before > /workspace/f")
	pd("session", "checkpoint", a, "--tag", "t1")
	jobOut, _ := pd("--json", "session", "bg", a, "--", "echo started; sleep 600")
	var job struct{ ID string }
	json.Unmarshal([]byte(jobOut), &job)
	if job.ID == "" {
		t.Fatalf("bg: %q", jobOut)
	}
	// An upload left half done, through the SDK.
	sdk := daemonSDK(t, state, addr, "pdk_cli_test_token_0123456789")
	ctx := context.Background()
	var up workspace.Upload
	if err := sdk.Call(ctx, http.MethodPost, a, "/uploads", nil, workspace.UploadRequest{Path: "/workspace/big.bin", Size: 8}, &up); err != nil {
		t.Fatal(err)
	}
	if _, err := sdk.UploadChunk(ctx, a, up.ID, 0, []byte("half")); err != nil {
		t.Fatal(err)
	}

	// 1. A clean stop leaves the sandboxes running; the next start
	// adopts them.
	stopServe(t, srv)
	srv = serve()
	for _, id := range []string{a, b} {
		if r := get(id); r.State != "running" {
			t.Errorf("%s after a clean restart: %+v", id, r)
		}
	}
	if r := get(a); len(r.Checkpoints) != 1 || r.Checkpoints[0].Tag != "t1" {
		t.Errorf("checkpoints after a restart: %+v", r)
	}
	if out, code := pd("session", "exec", a, "--", "cat /workspace/f"); code != 0 || out != "before\n" {
		t.Errorf("exec in an adopted sandbox: %d %q", code, out)
	}
	if out, _ := pd("session", "jobs", a); !strings.Contains(out, job.ID) || !strings.Contains(out, "running") {
		t.Errorf("the running job did not survive the restart: %q", out)
	}
	var again workspace.Upload
	if err := sdk.Call(ctx, http.MethodGet, a, "/uploads/"+up.ID, nil, nil, &again); err != nil || again.Received != 4 {
		t.Errorf("the open upload did not survive the restart: %+v %v", again, err)
	}
	if _, err := sdk.UploadChunk(ctx, a, up.ID, 4, []byte("done")); err != nil {
		t.Errorf("resume the upload after a restart: %v", err)
	}
	if err := sdk.Call(ctx, http.MethodPost, a, "/uploads/"+up.ID+"/complete", nil, nil, &again); err != nil || again.State != "complete" {
		t.Errorf("complete the upload after a restart: %+v %v", again, err)
	}
	if out, _ := pd("session", "cat", a, "/workspace/big.bin"); out != "halfdone" {
		t.Errorf("the upload across a restart wrote %q", out)
	}
	if out, _ := pd("session", "timeline", a); !strings.Contains(out, "sandbox.adopt") {
		t.Errorf("the adoption is not in the ledger: %q", out)
	}

	// 2. A crash (SIGKILL) leaves them too; one dies while no daemon runs.
	srv.Process.Kill()
	srv.Wait()
	testutil.KillSandbox(t, b)
	srv = serve()
	if r := get(a); r.State != "running" {
		t.Errorf("after a crash: %+v", r)
	}
	if out, code := pd("session", "exec", a, "--", "cat /workspace/f"); code != 0 || out != "before\n" {
		t.Errorf("exec after a crash: %d %q", code, out)
	}
	if r := get(b); r.State != "lost" || !strings.Contains(r.Note, "not running") {
		t.Errorf("a sandbox that died while the daemon was down: %+v", r)
	}
	if _, code := pd("session", "exec", b, "--", "true"); code != exitConflict {
		t.Errorf("exec on a lost session: code %d, want %d", code, exitConflict)
	}
	if out, _ := pd("session", "timeline", b); !strings.Contains(out, "sandbox.lost") {
		t.Errorf("the loss is not in the ledger: %q", out)
	}
	for _, id := range []string{a, b} {
		if out, code := pd("--state-dir", state, "ledger", "verify", id); code != 0 || !strings.Contains(out, "ok:") {
			t.Errorf("ledger of %s after restarts: %q %d", id, out, code)
		}
	}

	// 3. --stop-sandboxes: nothing is left running for the next start.
	stopServe(t, srv)
	srv = serve("--stop-sandboxes")
	stopServe(t, srv)
	if cgroupOf(a) {
		t.Errorf("--stop-sandboxes left %s running", a)
	}
	srv = serve()
	defer stopServe(t, srv)
	if r := get(a); r.State != "lost" {
		t.Errorf("after --stop-sandboxes: %+v", r)
	}
	for _, id := range []string{a, b} {
		if _, code := pd("session", "rm", id); code != 0 {
			t.Errorf("rm %s: %d", id, code)
		}
	}
}

// cgroupOf reports whether sandbox id still has a cgroup (procbox puts each
// sandbox in /paddock/<id> of every hierarchy).
func cgroupOf(id string) bool {
	m, _ := filepath.Glob("/sys/fs/cgroup/*/paddock/" + id)
	m2, _ := filepath.Glob("/sys/fs/cgroup/paddock/" + id)
	return len(m)+len(m2) > 0
}
