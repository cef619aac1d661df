package session

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"paddock.dev/paddock/errdefs"
	"paddock.dev/paddock/hostd/ledger"
	"paddock.dev/paddock/hostd/store"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/hypervisor/procbox"
	"paddock.dev/paddock/internal/testutil"
)

// sandboxManager is a Manager on real procbox sandboxes whose clock the
// test moves (skew is added to the real time).
func sandboxManager(t *testing.T) (*Manager, *store.Store, *ledger.Ledger, *atomic.Int64) {
	t.Helper()
	testutil.RequiresRoot(t)
	state := t.TempDir()
	st, err := store.Open(filepath.Join(state, "paddock.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	led := ledger.New(st)
	b, err := procbox.New(hypervisor.Config{StateDir: state, GuestBinary: testutil.GuestBinary(t), ImagesDir: testutil.MiniImages(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	m := New(Config{Store: st, Ledger: led, Backend: b, DefaultImage: testutil.MiniImageName})
	skew := new(atomic.Int64)
	m.now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	t.Cleanup(func() { m.Shutdown(context.Background()) })
	return m, st, led, skew
}

// TestSweepRemovesExpiredSandboxes calls Sweep directly with the clock
// moved past the TTL: sandboxes are removed (machine stopped, record
// gone, ledger kept), sessions are only marked expired, and what has not
// expired is left alone.
func TestSweepRemovesExpiredSandboxes(t *testing.T) {
	m, st, led, skew := sandboxManager(t)
	ctx := context.Background()
	sb, err := m.CreateSandbox(ctx, "", SandboxRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	// A sandbox an earlier sweep marked expired but could not remove.
	stuck, err := m.CreateSandbox(ctx, "", SandboxRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.update(ctx, stuck.ID, -1, func(s *Session) error { s.State = StateExpired; return nil }); err != nil {
		t.Fatal(err)
	}
	young, err := m.CreateSandbox(ctx, "", SandboxRequest{TTLSeconds: 3600})
	if err != nil {
		t.Fatal(err)
	}
	ses, err := m.Create(ctx, "", CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	mc := m.machines[sb.ID]
	m.mu.Unlock()
	if mc == nil {
		t.Fatal("no machine for the sandbox")
	}

	if n := m.Sweep(ctx); n != 0 {
		t.Errorf("a sweep before any TTL ran out: %d", n)
	}
	skew.Store(int64(601 * time.Second))
	if n := m.Sweep(ctx); n != 3 {
		t.Errorf("sweep: %d, want 3 (two sandboxes removed, one session expired)", n)
	}
	for _, id := range []string{sb.ID, stuck.ID} {
		if _, err := st.GetSession(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("record of %s after the sweep: %v, want not found", id, err)
		}
		if _, err := m.GetSandbox(ctx, "", id); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetSandbox(%s) after the sweep: %v", id, err)
		}
		if err := m.DeleteSandbox(ctx, "", id); err != nil {
			t.Errorf("DeleteSandbox(%s) after the sweep: %v", id, err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := mc.Wait(wctx); err != nil {
		t.Errorf("the sandbox's machine still runs: %v", err)
	}
	if ks := ledgerKinds(t, led, sb.ID); ks != "session.create,sandbox.expire,session.delete" {
		t.Errorf("ledger of the swept sandbox: %s", ks)
	}
	if ks := ledgerKinds(t, led, stuck.ID); ks != "session.create,session.delete" {
		t.Errorf("ledger of the stuck sandbox: %s", ks)
	}
	if got, err := m.GetSandbox(ctx, "", young.ID); err != nil || got.Status != StateRunning {
		t.Errorf("a sandbox within its TTL: %+v %v", got, err)
	}
	if got, err := m.Get(ctx, "", ses.ID); err != nil || got.State != StateExpired {
		t.Errorf("the session is kept as expired: %+v %v", got, err)
	}
	if n := m.Sweep(ctx); n != 0 {
		t.Errorf("a second sweep: %d", n)
	}
}

// TestExpiryTimerStoppedOnDelete: a sandbox deleted before its TTL takes
// its removal timer with it, and Shutdown disarms the rest.
func TestExpiryTimerStoppedOnDelete(t *testing.T) {
	m, _, _, _ := sandboxManager(t)
	ctx := context.Background()
	a, err := m.CreateSandbox(ctx, "", SandboxRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.CreateSandbox(ctx, "", SandboxRequest{TTLSeconds: 600}); err != nil {
		t.Fatal(err)
	}
	if n := m.expiryTimers(); n != 2 {
		t.Fatalf("%d removal timers for two sandboxes", n)
	}
	if err := m.DeleteSandbox(ctx, "", a.ID); err != nil {
		t.Fatal(err)
	}
	if n := m.expiryTimers(); n != 1 {
		t.Errorf("%d removal timers after deleting one of two sandboxes, want 1", n)
	}
	m.Shutdown(ctx)
	if n := m.expiryTimers(); n != 0 {
		t.Errorf("%d removal timers after Shutdown, want 0", n)
	}
}

func ledgerKinds(t *testing.T, led *ledger.Ledger, id string) string {
	t.Helper()
	es, err := led.List(context.Background(), id, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var ks []string
	for _, e := range es {
		ks = append(ks, e.Kind)
	}
	return strings.Join(ks, ",")
}

// TestCheckSandboxPath: the paths fs/read and fs/write take, and cwd.
func TestCheckSandboxPath(t *testing.T) {
	for p, ok := range map[string]bool{
		"/workspace/a b/ünï 文件.txt":     true,
		"/":                             true,
		"/a/./b":                        true,
		"/a/..b/c":                      true,
		"":                              false,
		"a/b":                           false,
		"/a/../b":                       false,
		"/..":                           false,
		"/a\nb":                         false,
		"/a\rb":                         false,
		"/a\x00b":                       false,
		"/" + strings.Repeat("a", 4096): false,
	} {
		if err := checkSandboxPath("path", p); (err == nil) != ok || (err != nil && !errors.Is(err, ErrBadRequest)) {
			t.Errorf("checkSandboxPath(%q) = %v, want ok=%v", p, err, ok)
		}
	}
}

func FuzzCheckSandboxPath(f *testing.F) {
	for _, s := range []string{"/workspace/x", "a/../b", "/a\x00", "/ü/.."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if checkSandboxPath("path", p) != nil {
			return
		}
		if !strings.HasPrefix(p, "/") || strings.ContainsAny(p, "\x00\n\r") || strings.Contains("/"+p+"/", "/../") {
			t.Errorf("accepted %q", p)
		}
	})
}

// TestSandboxFilesNeedTheFilesService: the core has no files routes of
// its own, so without the files service (SetFiles; hostd/workspace in
// the daemon) a sandbox's fs/read and small fs/write are refused as the
// daemon's fault (500), before anything reaches the guest.
func TestSandboxFilesNeedTheFilesService(t *testing.T) {
	m := fakeManager(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := m.CreateSandbox(ctx, "", SandboxRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.SandboxReadFile(ctx, "", sb.ID, "/workspace/a"); !errors.Is(err, errdefs.ErrInternal) {
		t.Errorf("fs/read without a files service: %v, want 500", err)
	}
	if _, err := m.SandboxWriteFile(ctx, "", sb.ID, SandboxWrite{Path: "/workspace/a", Content: "hi"}); !errors.Is(err, errdefs.ErrInternal) {
		t.Errorf("fs/write without a files service: %v, want 500", err)
	}
	if kinds := pipeKinds(t, m, sb.ID); slices.Contains(kinds, "file.write") {
		t.Errorf("a refused fs/write is ledgered: %v", kinds)
	}
}
