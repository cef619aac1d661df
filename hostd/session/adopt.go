package session

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/egress/rules"

	"paddock.dev/paddock/hypervisor"
)

// StateLost is saved for a session whose sandbox did not survive a daemon
// restart (it died, or the host rebooted); the record and ledger stay.
const StateLost = apiv1.StateLost

// Reattach takes over the sandboxes of running sessions that an earlier
// daemon on this state dir left behind, and records the sessions whose
// sandbox is gone as lost (ledgered once, with the reason). Then it sweeps
// what nobody claimed. Call it once at start, before serving. Credential
// grants are not restored: they lived in the previous daemon's memory
// only, and the adoption's ledger entry says so.
func (m *Manager) Reattach(ctx context.Context) (adopted, lost int) {
	rows, err := m.st.ListSessions(ctx, "")
	if err != nil {
		m.log.Warn("reattach: list sessions", "err", err)
		return 0, 0
	}
	for _, r := range rows {
		if ctx.Err() != nil {
			return adopted, lost // stopping: the rest stay as they are
		}
		if r.State == StateRunning || r.State == StateLost {
			// What it holds counts again: its checkpoints until it is
			// deleted, its machine while adopted (admission.go).
			var st stored
			if json.Unmarshal(r.Record, &st) == nil && st.Session != nil {
				m.holdRecord(&st)
			}
		}
		if r.State != StateRunning {
			continue
		}
		s, _, err := m.load(ctx, "", r.ID)
		if err != nil || s.State == StateExpired {
			continue // the sweep stops what expired
		}
		b := m.backendOf(s.Backend)
		if b == nil {
			// Not known to be gone: a later start with the backend
			// enabled may still adopt it.
			m.log.Warn("reattach: the session's backend is not enabled on this daemon", "session", s.ID, "backend", s.Backend)
			continue
		}
		ad, canAdopt := b.(hypervisor.Adopter)
		reason := "the " + b.Name() + " backend cannot adopt sandboxes across a restart"
		if canAdopt {
			mc, err := ad.Adopt(ctx, s.SandboxID)
			if err == nil {
				m.track(s.ID, mc)
				m.followStreamedAgain(ctx, s.ID, mc)
				if pol, err := m.policyOf(ctx, s.ID); err != nil {
					m.log.Warn("reattach: policy", "session", s.ID, "err", err)
				} else if err := m.openEgress(s.ID, pol); err != nil {
					m.log.Warn("reattach: serve egress", "session", s.ID, "err", err)
				}
				if s.Kind == KindSandbox {
					m.sandboxAdopted(s) // its removal at expiry is armed again
				}
				// Credential grants lived in the old daemon's memory
				// only: the adopted sandbox has none until granted again.
				m.ledgerAppend(ctx, s.ID, "sandbox.adopt", map[string]any{"sandbox_id": s.SandboxID, "grants": 0,
					"grants_note": "credential grants are kept in memory only and did not survive the restart; grant again"})
				m.runAdoptHooks(ctx, s.ID)
				adopted++
				continue
			}
			reason = err.Error()
			if !errors.Is(err, hypervisor.ErrNotFound) {
				// Not known to be gone (owned by another process,
				// a transient failure): leave the record as it is.
				m.log.Warn("reattach: adopt", "session", s.ID, "err", err)
				continue
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
	for _, b := range m.backends {
		if ad, ok := b.(hypervisor.Adopter); ok {
			ad.SweepLeftovers()
		}
	}
	m.log.Info("reattached sandboxes", "adopted", adopted, "lost", lost)
	return adopted, lost
}

// track registers a session's running sandbox and watches it: a sandbox
// that ends without the daemon stopping it (its init died, someone killed
// it) makes the session lost, with the reason, instead of one that looks
// running. Stops on purpose (delete, expiry, shutdown) take the machine out
// of m.machines first, which is how the watcher tells them apart.
func (m *Manager) track(id string, mc hypervisor.Machine) {
	m.mu.Lock()
	m.machines[id] = mc
	m.mu.Unlock()
	done := make(chan struct{})
	go m.watchOOM(id, mc, done)
	go func() {
		defer close(done)
		if mc.Wait(context.Background()) != nil {
			return
		}
		forgetClient(mc)
		m.mu.Lock()
		ours := m.machines[id] == mc
		if ours {
			delete(m.machines, id)
		}
		m.mu.Unlock()
		if !ours {
			return
		}
		mc.Stop(context.Background()) // what the dead sandbox held
		m.closeEgress(id)
		m.runStopHooks(context.Background(), id, StopLost)
		const reason = "the sandbox ended on its own (its init exited or was killed)"
		ctx := context.Background()
		if _, err := m.update(ctx, id, -1, func(s *Session) error {
			if s.State == StateRunning {
				s.State, s.Note = StateLost, reason
			}
			return nil
		}); err != nil {
			m.log.Warn("mark a session lost", "session", id, "err", err)
			return
		}
		m.ledgerAppend(ctx, id, "sandbox.lost", map[string]any{"sandbox_id": mc.ID(), "reason": reason})
		m.vmEvent(id, apiv1.VMEventDeath, map[string]any{"sandbox_id": mc.ID(), "reason": reason})
		m.log.Warn("sandbox ended on its own", "session", id)
	}()
}

// Detach lets the running sandboxes outlive this daemon for the next one
// to Reattach, when their backend can; the others are stopped as
// Shutdown stops them. It returns the sandboxes it left running, by
// session id.
func (m *Manager) Detach(ctx context.Context) []LeftRunning {
	defer m.flushEgressLog()
	m.runShutdownHooks()
	adopters := 0
	for _, b := range m.backends {
		if _, ok := b.(hypervisor.Adopter); ok {
			adopters++
		}
	}
	if adopters == 0 {
		m.Shutdown(ctx)
		return nil
	}
	// Sandboxes on backends that cannot be adopted are stopped first, by
	// the same path as a shutdown; the rest are let go.
	m.mu.Lock()
	running := maps.Clone(m.machines)
	m.mu.Unlock()
	var left []LeftRunning
	for id, mc := range running {
		s, _, err := m.load(ctx, "", id)
		if err != nil {
			left = append(left, LeftRunning{Session: id, Sandbox: mc.ID()})
			continue
		}
		if _, ok := m.backendOf(s.Backend).(hypervisor.Adopter); !ok {
			m.stopForShutdown(ctx, id)
			continue
		}
		left = append(left, LeftRunning{Session: id, Sandbox: s.SandboxID, Backend: s.Backend})
	}
	slices.SortFunc(left, func(a, b LeftRunning) int { return strings.Compare(a.Session, b.Session) })
	m.mu.Lock()
	m.machines, m.done = map[string]hypervisor.Machine{}, true
	m.mu.Unlock()
	for _, b := range m.backends {
		if ad, ok := b.(hypervisor.Adopter); ok {
			ad.Detach()
		}
	}
	return left
}

// stopped reports whether Shutdown or Detach ran.
func (m *Manager) stopped() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.done
}

// policyOf compiles the policy session id was created with.
func (m *Manager) policyOf(ctx context.Context, id string) (*rules.Compiled, error) {
	row, err := m.st.GetSession(ctx, id)
	if err != nil {
		return nil, err
	}
	var st stored
	if err := json.Unmarshal(row.Record, &st); err != nil {
		return nil, err
	}
	return m.compilePolicy(st.PolicyInput)
}
