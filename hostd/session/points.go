package session

// The core's surface for rewind (hostd/rewind): snapshots of a session's
// machine that are not checkpoints of its record (a rewind point is kept
// by the sibling, so taking one does not change the revision), a restore
// to one of them, and a hold on the session for a sequence of restores
// and test commands (bisect).

import (
	"context"
	"fmt"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/hypervisor"
)

// opPoint is the lifecycle slot's name while a rewind point is taken.
// Unlike the other operations it lets commands through (commandStarts):
// a point is taken from inside a command's walk, and a second command
// arriving meanwhile must not be refused for it. Checkpoint, restore,
// fork and delete still refuse while it is held.
const opPoint = "rewind point"

// TakePoint snapshots session id's running machine for a rewind point
// tagged tag: with memory when memory is true and the session's backend
// can save memory, disk only otherwise. It takes the lifecycle slot for
// the snapshot (a checkpoint, restore, fork or another point in progress
// is ErrConflict, and nothing is taken), counts the snapshot's disk like
// a checkpoint's, and changes neither the record nor its revision. It is
// meant to be called from a command hook, which holds the command's work
// slot but not the lifecycle slot, so it does not wait on itself.
func (m *Manager) TakePoint(ctx context.Context, id, tag string, memory bool) (hypervisor.Snapshot, error) {
	leave, err := m.enter(id, opPoint)
	if err != nil {
		return hypervisor.Snapshot{}, err
	}
	defer leave()
	s, _, mc, err := m.running(ctx, "", id)
	if err != nil {
		return hypervisor.Snapshot{}, err
	}
	snap, err := mc.Checkpoint(ctx, tag, memory && s.Capabilities.MemoryCheckpoint)
	if err != nil {
		return hypervisor.Snapshot{}, err
	}
	if err := m.admitCheckpoint(s, snap); err != nil {
		m.deleteSnapshot(snap)
		return hypervisor.Snapshot{}, err
	}
	m.vmEvent(id, apiv1.VMEventCheckpoint, map[string]any{"point": tag, "memory": snap.Memory, "snapshot_id": snap.ID, "bytes": snap.Bytes})
	return snap, nil
}

// snapshotLoader is a backend that can read a snapshot's record back
// (procbox): whether a snapshot is still there.
type snapshotLoader interface {
	LoadSnapshot(id string) (hypervisor.Snapshot, error)
}

// AdoptPoint takes back a snapshot TakePoint made for session id before
// a daemon restart: its disk counts again, as a checkpoint's does after
// Reattach. A snapshot its backend no longer has (deleted or lost while
// no daemon ran) is an ErrNotFound error, and nothing is counted; a
// backend that cannot say is taken at its word.
func (m *Manager) AdoptPoint(ctx context.Context, id string, snap hypervisor.Snapshot) error {
	s, _, err := m.load(ctx, "", id)
	if err != nil {
		return err
	}
	b := m.backendOf(snap.Backend)
	if b == nil || snap.Backend != s.Backend {
		return fmt.Errorf("%w: snapshot %s is on backend %q, not enabled here or not the session's", ErrNotFound, snap.ID, snap.Backend)
	}
	if l, ok := b.(snapshotLoader); ok {
		if _, err := l.LoadSnapshot(snap.ID); err != nil {
			return fmt.Errorf("%w: snapshot %s: %v", ErrNotFound, snap.ID, err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held == nil {
		m.held = map[string]*holding{}
	}
	h := m.held[id]
	if h == nil {
		h = &holding{tenant: s.Tenant, backend: s.Backend}
		m.held[id] = h
	}
	if h.snaps == nil {
		h.snaps = map[string]int64{}
	}
	h.snaps[snap.ID] = snapshotMB(snap)
	return nil
}

// DropPoint deletes a snapshot TakePoint (or HeldSession.Snapshot) made for
// session id, and stops counting its disk.
func (m *Manager) DropPoint(id string, snap hypervisor.Snapshot) {
	m.dropSnapshotHeld(id, snap.ID)
	m.deleteSnapshot(snap)
}

// RestorePoint puts session id's machine back to snap, as Restore does
// for a checkpoint: the same refusals (409 while commands run or another
// operation holds the session), the same admission, a new revision, and
// the ledger entry kind with data. It is a restore to the lifecycle
// slot and its marker (what a daemon that dies meanwhile reports).
func (m *Manager) RestorePoint(ctx context.Context, tenant, id string, snap hypervisor.Snapshot, kind string, data map[string]any) (*Session, error) {
	s, _, mc, err := m.running(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	leave, err := m.beginOp(ctx, id, "restore", -1, mc)
	if err != nil {
		return nil, err
	}
	defer leave()
	if err := m.restoreHeld(ctx, s, mc, snap); err != nil {
		return nil, err
	}
	out, err := m.updateStored(ctx, id, -1, func(*stored) error { return nil })
	if err != nil {
		return nil, err
	}
	m.ledgerAppend(ctx, id, kind, data)
	m.vmEvent(id, apiv1.VMEventRestore, map[string]any{"snapshot_id": snap.ID, "memory": snap.Memory, "by": kind})
	m.vmEvent(id, apiv1.VMEventBoot, map[string]any{"sandbox_id": mc.ID(), "from_snapshot": snap.ID})
	return out, nil
}

// restoreHeld restores mc to snap once the caller holds the slot: the
// machine must still fit, counted once.
func (m *Manager) restoreHeld(ctx context.Context, s *Session, mc hypervisor.Machine, snap hypervisor.Snapshot) error {
	if b := m.backendOf(s.Backend); b != nil {
		if _, err := m.admitMachines(b, s.Tenant, m.runtimeHeld(s), 1, s.ID); err != nil {
			return err
		}
	}
	return mc.Restore(ctx, snap)
}

// HeldSession is a session held by one operation (bisect) for a sequence of
// snapshots, restores and commands: no command, checkpoint, restore or
// fork starts while it is held. Release gives it back.
type HeldSession struct {
	m        *Manager
	s        *Session
	mc       hypervisor.Machine
	leave    func()
	Restores int // how many restores it made
}

// HoldRestoring takes session id (as the caller with tenant sees it) for a
// sequence of restores: 409 while commands run, a job runs, or another
// operation holds it. It is a restore to the lifecycle slot and marker.
func (m *Manager) HoldRestoring(ctx context.Context, tenant, id string) (*HeldSession, error) {
	s, _, mc, err := m.running(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	leave, err := m.beginOp(ctx, id, "restore", -1, mc)
	if err != nil {
		return nil, err
	}
	return &HeldSession{m: m, s: s, mc: mc, leave: leave}, nil
}

// Session is the held session as it was when it was taken.
func (h *HeldSession) Session() *Session { return h.s }

// Snapshot takes a snapshot of the held machine (with memory when asked
// and the backend can), counted like a checkpoint; DropPoint deletes it.
func (h *HeldSession) Snapshot(ctx context.Context, tag string, memory bool) (hypervisor.Snapshot, error) {
	snap, err := h.mc.Checkpoint(ctx, tag, memory && h.s.Capabilities.MemoryCheckpoint)
	if err != nil {
		return hypervisor.Snapshot{}, err
	}
	if err := h.m.admitCheckpoint(h.s, snap); err != nil {
		h.m.deleteSnapshot(snap)
		return hypervisor.Snapshot{}, err
	}
	h.m.vmEvent(h.s.ID, apiv1.VMEventCheckpoint, map[string]any{"point": tag, "memory": snap.Memory, "snapshot_id": snap.ID, "bytes": snap.Bytes})
	return snap, nil
}

// Restore puts the held machine back to snap.
func (h *HeldSession) Restore(ctx context.Context, snap hypervisor.Snapshot) error {
	h.Restores++
	if err := h.m.restoreHeld(ctx, h.s, h.mc, snap); err != nil {
		return err
	}
	h.m.vmEvent(h.s.ID, apiv1.VMEventRestore, map[string]any{"snapshot_id": snap.ID, "memory": snap.Memory, "by": "held"})
	h.m.vmEvent(h.s.ID, apiv1.VMEventBoot, map[string]any{"sandbox_id": h.mc.ID(), "from_snapshot": snap.ID})
	return nil
}

// Exec runs a shell line in the held machine's workspace under the
// session's confinement, as an exec would, with at most maxOutput bytes
// of output kept. The caller judged it first (the process policy).
func (h *HeldSession) Exec(ctx context.Context, shell string, timeoutSeconds, maxOutput int) (*api.ExecResult, error) {
	res, err := clientFor(h.mc).Exec(ctx, api.ExecRequest{Command: api.Command{Shell: shell, Cwd: h.s.Workspace.Path,
		TimeoutSeconds: timeoutSeconds, MaxOutputBytes: int64(maxOutput), Confine: confinement(h.s)}})
	if err != nil {
		return nil, fmt.Errorf("run the test: %w", guestErr(err))
	}
	return res, nil
}

// Release gives the session back.
func (h *HeldSession) Release() { h.leave() }

// ForkPoint starts count child sessions of session id (as the caller
// with tenant sees it) from snap, a rewind point tagged tag, for a rewind
// branch. It follows fork's rules (forkable backend, the lifecycle slot,
// max_children spent, admission, identity mode as ForkIdentityMode reads
// it) and leaves the parent's machine as it is. The children have no
// workspace baseline, so promote refuses them; each child's ledger gets
// session.branch_child and the parent's rewind.branch. The point's
// snapshot stays the caller's: the caller keeps it from being deleted
// until ForkPoint returns.
func (m *Manager) ForkPoint(ctx context.Context, tenant, id string, snap hypervisor.Snapshot, tag string, count int, identity string) (*ForkResult, error) {
	if count < 1 || count > hypervisor.MaxForkChildren {
		return nil, bad("count %d must be from 1 to %d", count, hypervisor.MaxForkChildren)
	}
	mode, err := ForkIdentityMode(identity)
	if err != nil {
		return nil, err
	}
	return m.forkFrom(ctx, tenant, id, -1, count, mode, forkSource{point: &snap, pointTag: tag})
}
