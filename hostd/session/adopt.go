package session

import (
	"context"
	"errors"

	"paddock.dev/paddock/hypervisor"
)

// StateLost is saved for a session whose sandbox did not survive a daemon
// restart (it died, or the host rebooted); the record and ledger stay.
const StateLost = "lost"

// Reattach takes over the sandboxes of running sessions that an earlier
// daemon on this state dir left behind, and records the sessions whose
// sandbox is gone as lost (ledgered once, with the reason). Then it sweeps
// what nobody claimed. Call it once at start, before serving.
func (m *Manager) Reattach(ctx context.Context) (adopted, lost int) {
	rows, err := m.st.ListSessions(ctx, "")
	if err != nil {
		m.log.Warn("reattach: list sessions", "err", err)
		return 0, 0
	}
	ad, canAdopt := m.backend.(hypervisor.Adopter)
	for _, r := range rows {
		if r.State != StateRunning {
			continue
		}
		s, _, err := m.load(ctx, "", r.ID)
		if err != nil || s.State == StateExpired {
			continue // the sweep stops what expired
		}
		reason := "the " + m.backend.Name() + " backend cannot adopt sandboxes across a restart"
		if canAdopt {
			mc, err := ad.Adopt(ctx, s.SandboxID)
			if err == nil {
				m.mu.Lock()
				m.machines[s.ID] = mc
				m.mu.Unlock()
				m.ledgerAppend(ctx, s.ID, "sandbox.adopt", map[string]any{"sandbox_id": s.SandboxID})
				adopted++
				continue
			}
			reason = err.Error()
			if !errors.Is(err, hypervisor.ErrNotFound) {
				m.log.Warn("reattach: adopt", "session", s.ID, "err", err)
			}
		}
		if _, err := m.update(ctx, s.ID, -1, func(s *Session) error {
			s.State, s.Note = StateLost, "sandbox lost across a daemon restart: "+reason
			return nil
		}); err != nil {
			m.log.Warn("reattach: mark lost", "session", s.ID, "err", err)
			continue
		}
		m.ledgerAppend(ctx, s.ID, "sandbox.lost", map[string]any{"sandbox_id": s.SandboxID, "reason": reason})
		lost++
	}
	if canAdopt {
		ad.SweepLeftovers()
	}
	m.log.Info("reattached sandboxes", "adopted", adopted, "lost", lost)
	return adopted, lost
}

// Detach lets the running sandboxes outlive this daemon for the next one
// to Reattach, when the backend can; otherwise it stops them (Shutdown).
func (m *Manager) Detach(ctx context.Context) {
	ad, ok := m.backend.(hypervisor.Adopter)
	if !ok {
		m.Shutdown(ctx)
		return
	}
	m.mu.Lock()
	m.machines = map[string]hypervisor.Machine{}
	m.mu.Unlock()
	ad.Detach()
}
