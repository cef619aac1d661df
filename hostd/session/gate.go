package session

// Lifecycle guarantees: the per-session slot that checkpoint, restore,
// fork and delete take (enter, in session.go), the commands in flight that
// restore and fork wait for nobody on (they refuse instead), and the
// marker row that outlives a daemon that died mid-operation.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"paddock.dev/paddock/hostd/store"
	"paddock.dev/paddock/hypervisor"
)

// lifecycleState is the Manager's in-memory part of the guarantees,
// guarded by Manager.mu (but for the job-start locks themselves).
type lifecycleState struct {
	// inflight counts, per session, execs and job starts between their
	// admission and the guest's answer.
	inflight map[string]int
	// jobStarts serialises a session's job starts while a budget's
	// concurrency is checked.
	jobStarts map[string]*jobStartLock
	// daemon names this process in the markers it writes.
	daemon string
	hooks  TestHooks
}

type jobStartLock struct {
	mu   sync.Mutex
	refs int
}

// daemonID returns this Manager's name for its markers (made on first
// use).
func (m *Manager) daemonID() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.life.daemon == "" {
		var b [8]byte
		rand.Read(b[:])
		m.life.daemon = "d-" + hex.EncodeToString(b[:])
	}
	return m.life.daemon
}

// commandStarts admits a command or job start past the lifecycle slot
// (409 naming the operation in flight) and counts it in flight until done
// is called, so a restore or fork that takes the slot after it sees it.
func (m *Manager) commandStarts(id string) (done func(), err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	// A rewind point in progress lets commands through (points.go).
	if cur, busy := m.gate[id]; busy && cur != opPoint {
		return nil, fmt.Errorf("%w: %s is in progress on session %s", ErrConflict, cur, id)
	}
	if m.life.inflight == nil {
		m.life.inflight = map[string]int{}
	}
	m.life.inflight[id]++
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			defer m.mu.Unlock()
			if m.life.inflight[id]--; m.life.inflight[id] <= 0 {
				delete(m.life.inflight, id)
			}
		})
	}, nil
}

// lockJobStarts serialises the job starts of one session.
func (m *Manager) lockJobStarts(id string) (unlock func()) {
	m.mu.Lock()
	if m.life.jobStarts == nil {
		m.life.jobStarts = map[string]*jobStartLock{}
	}
	l := m.life.jobStarts[id]
	if l == nil {
		l = &jobStartLock{}
		m.life.jobStarts[id] = l
	}
	l.refs++
	m.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		m.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(m.life.jobStarts, id)
		}
		m.mu.Unlock()
	}
}

// beginOp starts lifecycle operation op on session id: it takes the slot
// (409 naming what holds it), checks If-Match against the stored revision
// now that nothing else can change it (412), refuses when commands are
// running and mc is set (restore and fork replace the machine under them),
// and writes the marker row. end removes the marker and frees the slot,
// whether the operation succeeded or not.
func (m *Manager) beginOp(ctx context.Context, id, op string, rev int64, mc hypervisor.Machine) (end func(), err error) {
	leave, err := m.enter(id, op)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			leave()
		}
	}()
	if rev >= 0 {
		row, err := m.st.GetSession(ctx, id)
		if err != nil {
			return nil, revisionErr(err, id, rev)
		}
		if row.Revision != rev {
			return nil, fmt.Errorf("%w: session %s is at revision %d, not %d", ErrRevision, id, row.Revision, rev)
		}
	}
	if mc != nil {
		if err := m.refuseWhileCommands(ctx, id, op, mc); err != nil {
			return nil, err
		}
	}
	if err := m.st.PutLifecycleOp(ctx, store.LifecycleOp{SessionID: id, Op: op, StartedAt: m.now().UTC(), Daemon: m.daemonID()}); err != nil {
		return nil, fmt.Errorf("record the %s in progress: %w", op, err)
	}
	if d := m.testPause(op); d > 0 {
		m.log.Warn("test hook: pausing a lifecycle operation after its marker", "session", id, "op", op, "pause", d)
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
	}
	return func() {
		if err := m.st.DeleteLifecycleOp(context.WithoutCancel(ctx), id); err != nil && !errors.Is(err, store.ErrNotFound) {
			m.log.Warn("remove the lifecycle marker", "session", id, "op", op, "err", err)
		}
		leave()
	}, nil
}

// refuseWhileCommands is the 409 of a restore or fork while an exec is
// in flight, a job runs or a terminal is open on the session.
func (m *Manager) refuseWhileCommands(ctx context.Context, id, op string, mc hypervisor.Machine) error {
	if err := m.busyBySibling(id, op); err != nil {
		return err
	}
	m.mu.Lock()
	n := m.life.inflight[id]
	m.mu.Unlock()
	if n > 0 {
		return fmt.Errorf("%w: commands are running on session %s (%d exec, job start or file write in flight); a %s would replace the machine under them: retry when they are done", ErrConflict, id, n, op)
	}
	running, err := m.refreshJobs(ctx, id, clientFor(mc))
	if err != nil {
		// An agent that does not answer runs nothing we could stop; a
		// restore is how such a session is repaired.
		m.log.Warn("list jobs before a lifecycle operation", "session", id, "op", op, "err", err)
		return nil
	}
	if len(running) > 0 {
		ids := make([]string, len(running))
		for i, j := range running {
			ids[i] = j.ID
		}
		sort.Strings(ids)
		return fmt.Errorf("%w: commands are running on session %s (jobs %s); a %s would replace the machine under them: wait for them or kill them (DELETE .../jobs/{job})", ErrConflict, id, strings.Join(ids, ", "), op)
	}
	return nil
}

// interrupted fills s.InterruptedOp from a marker another daemon left,
// and ledgers lifecycle.interrupted the first time anyone sees it.
func (m *Manager) interrupted(ctx context.Context, s *Session) {
	op, err := m.st.GetLifecycleOp(ctx, s.ID)
	if err != nil || op.Daemon == m.daemonID() {
		return // none, or ours and still running
	}
	s.InterruptedOp = &InterruptedOp{Op: op.Op, StartedAt: op.StartedAt}
	if op.Reported {
		return
	}
	if first, err := m.st.ReportLifecycleOp(ctx, s.ID, m.daemonID()); err == nil && first {
		m.ledgerAppend(ctx, s.ID, "lifecycle.interrupted", map[string]any{"op": op.Op, "started_at": op.StartedAt,
			"note": "the daemon stopped before this operation finished; check that the session is as you expect"})
	}
}

// TestHooks slow lifecycle operations down so tests can catch them
// mid-way. They are for Paddock's own tests only: the daemon sets them
// from PADDOCK_TEST_HOOKS and refuses to start with it unless
// PADDOCK_TEST_MODE=1 (cmd/paddock); no API route reaches them.
type TestHooks struct {
	// Pause sleeps an operation ("checkpoint", "restore", "fork",
	// "delete") for the duration after its marker is written.
	Pause map[string]time.Duration
}

// ParseTestHooks reads "fork-pause:5s,checkpoint-pause:2s".
func ParseTestHooks(spec string) (TestHooks, error) {
	h := TestHooks{Pause: map[string]time.Duration{}}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, val, ok := strings.Cut(item, ":")
		op, isPause := strings.CutSuffix(name, "-pause")
		d, err := time.ParseDuration(val)
		switch {
		case !ok || !isPause || err != nil || d < 0:
			return TestHooks{}, fmt.Errorf("test hook %q: want OP-pause:DURATION, such as fork-pause:5s", item)
		case op != "checkpoint" && op != "restore" && op != "fork" && op != "delete":
			return TestHooks{}, fmt.Errorf("test hook %q: OP is checkpoint, restore, fork or delete", item)
		}
		h.Pause[op] = d
	}
	return h, nil
}

// SetTestHooks installs test hooks (tests only; see TestHooks).
func (m *Manager) SetTestHooks(h TestHooks) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.life.hooks = h
}

func (m *Manager) testPause(op string) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.life.hooks.Pause[op]
}
