package session

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// sandboxHooksRecorder records what the core hands the sandboxes
// sibling.
type sandboxHooksRecorder struct {
	mu      sync.Mutex
	expired []string
}

func (r *sandboxHooksRecorder) Expired(_ context.Context, row store.SessionRow) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.expired = append(r.expired, row.ID)
}

func (r *sandboxHooksRecorder) Adopted(string, time.Time) {}

// TestSweepHandsSandboxesToHooks: the sweep hands a sandbox record past
// its TTL to the sandboxes sibling's hooks (and leaves it to them), never
// a session's or one within its TTL; without hooks it sweeps an expired
// sandbox like a session (machine stopped, record kept as expired), so
// nothing runs past its TTL either way. It runs on the fake backend.
func TestSweepHandsSandboxesToHooks(t *testing.T) {
	m := fakeManager(t)
	skew := new(atomic.Int64)
	m.now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	ctx := context.Background()
	mk := func(kind string, ttl int) *Session {
		s, err := m.CreateKind(ctx, "", CreateRequest{TTLSeconds: ttl}, kind)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if _, err := m.CreateKind(ctx, "", CreateRequest{}, "other"); !errors.Is(err, ErrBadRequest) {
		t.Errorf("an unknown kind: %v, want 400", err)
	}
	sb, young, ses := mk(KindSandbox, 600), mk(KindSandbox, 3600), mk("", 600)
	if !IsSandboxID(sb.ID) || IsSandboxID(ses.ID) {
		t.Fatalf("ids %s and %s: only the sandbox's starts with %s", sb.ID, ses.ID, SandboxIDPrefix)
	}
	rec := &sandboxHooksRecorder{}
	m.SetSandboxHooks(rec)
	skew.Store(int64(601 * time.Second))
	if n := m.Sweep(ctx); n != 2 {
		t.Errorf("sweep: %d, want 2 (the sandbox handed over, the session expired)", n)
	}
	if strings.Join(rec.expired, ",") != sb.ID {
		t.Errorf("the hooks were handed %v, want only %s", rec.expired, sb.ID)
	}
	if m.Machine(sb.ID) == nil {
		t.Error("the core stopped a sandbox it handed to the hooks")
	}
	if got, err := m.Load(ctx, "", young.ID); err != nil || got.State != StateRunning {
		t.Errorf("a sandbox within its TTL: %+v %v", got, err)
	}

	// Without hooks: swept as a session is.
	m.SetSandboxHooks(nil)
	if n := m.Sweep(ctx); n != 1 {
		t.Errorf("sweep without hooks: %d, want 1", n)
	}
	if m.Machine(sb.ID) != nil {
		t.Error("an expired sandbox still has its machine with no hooks to remove it")
	}
	if got, err := m.Load(ctx, "", sb.ID); err != nil || got.State != StateExpired {
		t.Errorf("an expired sandbox without hooks: %+v %v, want kept as expired", got, err)
	}
}
