package session

// Holding a session for a sibling's operation that spans two sessions and
// many steps (a promotion): part of the core's surface for siblings
// (core.go). A hold is the lifecycle slot that checkpoint, restore and
// fork take, so nothing else starts on the session while it lasts, and
// the holder does its own work inside it: a checkpoint (CheckpointHeld)
// and file changes through walks that leave the gate step out (the hold
// is their gate).

import (
	"context"
	"fmt"

	"paddock.dev/paddock/guest/api"
)

// Hold takes running session s's lifecycle slot for op (a sibling's
// operation: "promote"), as a checkpoint, restore or fork does. It is
// refused (409) while another operation holds
// the slot, and while commands run on the session: an exec, job start or
// file write in flight, a running job, or a sibling's busy check (an open
// terminal). Until end is called every command, file change and lifecycle
// operation on the session is refused with 409 naming op; the holder's
// own work goes through CheckpointHeld and walks without a gate step.
// end frees the slot; it is safe to call twice. No marker row is
// written (the store knows the core's operations only): a daemon that dies
// during a hold leaves what the holder ledgered (a promotion's checkpoint
// is ledgered before its first write).
func (m *Manager) Hold(ctx context.Context, s *Session, op string) (end func(), err error) {
	if op != "promote" {
		return nil, bad("hold: %q is no operation a session can be held for", op)
	}
	mc := m.Machine(s.ID)
	if mc == nil {
		return nil, fmt.Errorf("%w: session %s has no running sandbox any more", ErrConflict, s.ID)
	}
	leave, err := m.enter(s.ID, op)
	if err != nil {
		return nil, err
	}
	if err := m.refuseWhileCommands(ctx, s.ID, op, mc); err != nil {
		leave()
		return nil, err
	}
	done := false
	return func() {
		if !done {
			done = true
			leave()
		}
	}, nil
}

// Holds reports whether session id's slot is held for op (Hold).
func (m *Manager) Holds(id, op string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gate[id] == op
}

// CheckpointHeld takes a checkpoint tagged tag of session id while the
// caller holds its slot for op (Hold), recorded and ledgered as any
// checkpoint is (a disk checkpoint unless memory is set). The tag must be
// a checkpoint tag and new to the session (409 otherwise).
func (m *Manager) CheckpointHeld(ctx context.Context, tenant, id, op, tag string, memory bool) (*Checkpoint, error) {
	if !tagRE.MatchString(tag) {
		return nil, bad("tag %q: use letters, digits, '.', '_' and '-', at most %d", tag, MaxTagLen)
	}
	if !m.Holds(id, op) {
		return nil, fmt.Errorf("%w: session %s is not held for %s", ErrConflict, id, op)
	}
	s, _, mc, err := m.running(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	for _, c := range s.Checkpoints {
		if c.Tag == tag {
			return nil, fmt.Errorf("%w: session %s already has a checkpoint tagged %q", ErrConflict, id, tag)
		}
	}
	if memory && !s.Capabilities.MemoryCheckpoint {
		return nil, fmt.Errorf("%w: memory checkpoints are not available: %s", ErrConflict, s.Capabilities.MemoryCheckpointReason)
	}
	return m.checkpointIn(ctx, s, -1, mc, tag, memory)
}

// Baseline is the workspace manifest session id's changes are measured
// from (what artifacts diff against): the workspace at create, or, for a
// fork child, its parent's workspace at the fork. nil when the record has
// none.
func (m *Manager) Baseline(ctx context.Context, tenant, id string) (*api.Manifest, error) {
	_, base, err := m.load(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	return base, nil
}
