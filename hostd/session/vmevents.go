package session

// VM events: what happened to a session's machine (boot, checkpoint,
// restore, fork, stop, oom, death), kept apart from the ledger (which
// records the API's actions) and served beside it by events and merged
// into the trajectory.

import (
	"context"
	"encoding/json"
	"sort"
	"time"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/hostd/store"
	"paddock.dev/paddock/hypervisor"
)

// The public wire types (package api), kept under these names here.
type (
	VMEvent = apiv1.VMEvent
	Events  = apiv1.Events
)

// oomPoll is how often a running machine's OOM count is read.
const oomPoll = 2 * time.Second

// vmEvent records kind for session id's machine. It never fails the
// caller: a lost event is logged.
func (m *Manager) vmEvent(id, kind string, data map[string]any) {
	raw, err := json.Marshal(data)
	if err != nil || data == nil {
		raw = []byte("{}")
	}
	if err := m.st.AppendVMEvent(context.Background(), store.VMEventRow{Session: id, Time: m.now().UTC(), Kind: kind, Data: raw}); err != nil {
		m.log.Warn("record a vm event", "session", id, "kind", kind, "err", err)
	}
}

// watchOOM reads the machine's OOM count every oomPoll until done is
// closed, and records an oom event each time it rises. A count that
// falls (the machine booted again) starts over.
func (m *Manager) watchOOM(id string, mc hypervisor.Machine, done <-chan struct{}) {
	oc, ok := mc.(hypervisor.OOMCounter)
	if !ok {
		return
	}
	last, _ := oc.OOMKills()
	t := time.NewTicker(oomPoll)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		n, err := oc.OOMKills()
		if err != nil {
			continue
		}
		if n < last {
			last = 0
		}
		if n > last {
			m.vmEvent(id, apiv1.VMEventOOM, map[string]any{"sandbox_id": mc.ID(), "killed": n - last, "oom_kills": n})
			last = n
		}
	}
}

// EventsSince answers GET .../events: the ledger entries and VM events
// after since (the zero time: all, up to 10000 of each).
func (m *Manager) EventsSince(ctx context.Context, tenant, id string, since time.Time) (*Events, error) {
	if _, _, err := m.load(ctx, tenant, id); err != nil {
		return nil, err
	}
	m.settleEgressLog()
	var err error
	out := &Events{}
	if since.IsZero() {
		out.Ledger, err = m.ledger.List(ctx, id, 0, 10000)
	} else {
		out.Ledger, err = m.ledger.Since(ctx, id, since)
		if len(out.Ledger) > 10000 {
			out.Ledger = out.Ledger[:10000]
		}
	}
	if err != nil {
		return nil, err
	}
	if out.Ledger == nil {
		out.Ledger = []apiv1.LedgerEntry{}
	}
	if out.VMEvents, err = m.vmEvents(ctx, id, since); err != nil {
		return nil, err
	}
	return out, nil
}

func (m *Manager) vmEvents(ctx context.Context, id string, since time.Time) ([]VMEvent, error) {
	rows, err := m.st.ListVMEvents(ctx, id, since)
	if err != nil {
		return nil, err
	}
	out := make([]VMEvent, len(rows))
	for i, r := range rows {
		out[i] = VMEvent{ID: r.ID, Time: r.Time, Kind: r.Kind, Data: r.Data}
	}
	return out, nil
}

// mergeVMEvents adds the VM events to a trajectory's steps in time order
// (a ledger entry first when both have one time) and numbers them again.
func mergeVMEvents(steps []Step, evs []VMEvent) []Step {
	for _, e := range evs {
		steps = append(steps, Step{Time: e.Time, Source: "vm", Kind: e.Kind, Data: e.Data})
	}
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].Time.Before(steps[j].Time) })
	for i := range steps {
		steps[i].Step = i + 1
	}
	return steps
}

// VMEventStop is the kind of a stop the daemon made (delete, expiry).
const VMEventStop = apiv1.VMEventStop

// LedgerSeqBefore is the events stream's cursor for ?since=: the seq
// after which the ledger entries newer than since begin (the newest seq
// when there are none yet).
func (m *Manager) LedgerSeqBefore(ctx context.Context, tenant, id string, since time.Time) (int64, error) {
	if _, _, err := m.load(ctx, tenant, id); err != nil {
		return 0, err
	}
	es, err := m.ledger.Since(ctx, id, since)
	if err != nil {
		return 0, err
	}
	if len(es) > 0 {
		return es[0].Seq - 1, nil
	}
	var after int64
	for {
		page, err := m.ledger.List(ctx, id, after, 10000)
		if err != nil {
			return 0, err
		}
		if len(page) == 0 {
			return after, nil
		}
		after = page[len(page)-1].Seq
	}
}

// VMEventsFor is the events stream's read of the VM events: those with a
// row id over afterID, or, when afterID is 0, those after since (the
// zero time: all).
func (m *Manager) VMEventsFor(ctx context.Context, tenant, id string, afterID int64, since time.Time) ([]VMEvent, error) {
	if _, _, err := m.load(ctx, tenant, id); err != nil {
		return nil, err
	}
	if afterID == 0 {
		return m.vmEvents(ctx, id, since)
	}
	rows, err := m.st.ListVMEventsAfter(ctx, id, afterID)
	if err != nil {
		return nil, err
	}
	out := make([]VMEvent, len(rows))
	for i, r := range rows {
		out[i] = VMEvent{ID: r.ID, Time: r.Time, Kind: r.Kind, Data: r.Data}
	}
	return out, nil
}
