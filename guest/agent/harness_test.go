package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"paddock.dev/paddock/guest/agent"
	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
)

// The test binary doubles as two helpers, picked by its first argument:
// "confine" is a fake `paddock-guest confine` that follows the fd protocol
// of guest/api, and "init-helper" runs agent.RunInit.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case api.ConfineSubcommand:
			os.Exit(fakeConfine(os.Args[2:]))
		case "init-helper":
			os.Exit(agent.RunInit(os.Args[2:]))
		}
	}
	os.Exit(m.Run())
}

// fakeConfine checks the argument layout, reads the policy from fd 3,
// refuses when the policy's exec list holds "/refuse", and otherwise
// writes a report echoing the policy (ReadOnly as Missing, rlimit names)
// to fd 4 and execs the command.
func fakeConfine(args []string) int {
	want := []string{api.ConfinePolicyFlag, "3", api.ConfineReportFlag, "4", "--"}
	if len(args) < len(want)+1 || !slices.Equal(args[:len(want)], want) {
		fmt.Fprintf(os.Stderr, "fake confine: bad arguments %q\n", args)
		return api.ConfineExitRefused
	}
	argv := args[len(want):]
	if !filepath.IsAbs(argv[0]) {
		fmt.Fprintf(os.Stderr, "fake confine: argv[0] %q is not absolute\n", argv[0])
		return api.ConfineExitRefused
	}
	data, err := io.ReadAll(os.NewFile(api.ConfinePolicyFD, "policy"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "fake confine: read policy: %v\n", err)
		return api.ConfineExitRefused
	}
	var p api.Confinement
	if err := json.Unmarshal(data, &p); err != nil {
		fmt.Fprintf(os.Stderr, "fake confine: policy: %v\n", err)
		return api.ConfineExitRefused
	}
	if slices.Contains(p.Exec, "/refuse") {
		fmt.Fprintln(os.Stderr, "fake confine: kernel too old for this policy")
		return api.ConfineExitRefused
	}
	rep := api.ConfineReport{NoNewPrivs: true, Missing: p.ReadOnly}
	for name := range p.Rlimits {
		rep.Rlimits = append(rep.Rlimits, name)
	}
	slices.Sort(rep.Rlimits)
	out, _ := json.Marshal(rep)
	if _, err := syscall.Write(api.ConfineReportFD, out); err != nil {
		return api.ConfineExitRefused
	}
	syscall.CloseOnExec(api.ConfineReportFD)
	err = syscall.Exec(argv[0], argv, os.Environ())
	fmt.Fprintf(os.Stderr, "fake confine: exec: %v\n", err)
	return api.ConfineExitRefused
}

// testAgent is an agent served in-process on a unix socket.
type testAgent struct {
	c    *client.Client
	cfg  agent.Config
	root string // Config.Root
	dir  string // scratch space outside the root
	sock string // the unix socket it listens on
}

// startAgent serves an agent with a fresh root; mod may adjust the config.
func startAgent(t *testing.T, mod func(*agent.Config)) *testAgent {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	if os.Getenv("PADDOCK_TEST_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	cfg := agent.Config{
		Root:      root,
		Home:      root,
		SpoolDir:  filepath.Join(dir, "spool"),
		UploadDir: filepath.Join(dir, "uploads"),
		Logger:    logger,
	}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Socket paths are limited to 108 bytes: keep this one short.
	sockDir, err := os.MkdirTemp("", "pg")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(sockDir, "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	c := client.NewUnix(sock)
	t.Cleanup(func() {
		c.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		os.RemoveAll(sockDir)
	})
	return &testAgent{c: c, cfg: cfg, root: root, dir: dir, sock: sock}
}

// requiresRoot skips tests that change users or own files for others.
func requiresRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: commands run as another user only when the agent is root")
	}
}

// testCtx returns a context bounded by the test's deadline (or 30 s).
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// wantStatus fails unless err is an agent error with the given status.
func wantStatus(t *testing.T, err error, status int) {
	t.Helper()
	if !client.IsStatus(err, status) {
		t.Fatalf("got error %v, want status %d", err, status)
	}
}

// processGone reports whether pid no longer runs (absent, or a zombie
// waiting for a reaper we do not control).
func processGone(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// waitGone waits up to d for pid to be gone.
func waitGone(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if processGone(pid) {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return processGone(pid)
}
