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
	"paddock.dev/paddock/hostd/ledger"
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

// MaxEventsPage is the most ledger entries (and VM events) one answer of
// GET .../events holds.
const MaxEventsPage = ledger.MaxList

// EventsQuery picks what GET .../events answers with. Tail gives the
// newest Tail ledger entries and VM events, and goes with nothing else.
// Otherwise the ledger entries after Since (a time) or after After (a
// seq; not both) come oldest first, at most Limit of them (0:
// MaxEventsPage), with LedgerMore set when more follow; the VM events are
// those after Since, or from the time of entry After on.
type EventsQuery struct {
	Since time.Time
	After int64
	Limit int
	Tail  int
}

// EventsSince answers GET .../events?since=: the ledger entries and VM
// events after since (the zero time: all, up to MaxEventsPage of each).
func (m *Manager) EventsSince(ctx context.Context, tenant, id string, since time.Time) (*Events, error) {
	return m.EventsPage(ctx, tenant, id, EventsQuery{Since: since})
}

// EventsPage answers GET .../events (see EventsQuery).
func (m *Manager) EventsPage(ctx context.Context, tenant, id string, q EventsQuery) (*Events, error) {
	switch {
	case q.Tail < 0 || q.Tail > MaxEventsPage || q.Limit < 0 || q.Limit > MaxEventsPage || q.After < 0:
		return nil, bad("events: tail and limit must be 1 to %d, after 0 or more", MaxEventsPage)
	case q.Tail > 0 && (q.Limit > 0 || q.After > 0 || !q.Since.IsZero()):
		return nil, bad("events: tail gives the newest entries; it goes with no since, after or limit")
	case q.After > 0 && !q.Since.IsZero():
		return nil, bad("events: give since (a time) or after (a seq), not both")
	}
	if _, _, err := m.load(ctx, tenant, id); err != nil {
		return nil, err
	}
	m.settleEgressLog()
	limit := q.Limit
	if limit == 0 {
		limit = MaxEventsPage
	}
	var err error
	out := &Events{}
	vmSince := q.Since
	switch {
	case q.Tail > 0:
		out.Ledger, err = m.ledger.Tail(ctx, id, q.Tail)
	case !q.Since.IsZero():
		out.Ledger, out.LedgerMore, err = m.ledger.Since(ctx, id, q.Since, limit)
	default:
		if out.Ledger, err = m.ledger.List(ctx, id, q.After, limit); err == nil && len(out.Ledger) == limit {
			var next []apiv1.LedgerEntry
			next, err = m.ledger.List(ctx, id, out.Ledger[limit-1].Seq, 1)
			out.LedgerMore = len(next) > 0
		}
		if err == nil && q.After > 0 {
			// The VM events from the time of entry After on (one with
			// that very time may come again), as the stream resumes.
			var at []apiv1.LedgerEntry
			if at, err = m.ledger.List(ctx, id, q.After-1, 1); err == nil && len(at) > 0 && at[0].Seq == q.After {
				vmSince = at[0].Time.Add(-time.Nanosecond)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	if out.Ledger == nil {
		out.Ledger = []apiv1.LedgerEntry{}
	}
	if q.Tail > 0 {
		out.VMEvents, err = m.vmEventsTail(ctx, id, q.Tail)
	} else {
		out.VMEvents, err = m.vmEvents(ctx, id, vmSince)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (m *Manager) vmEventsTail(ctx context.Context, id string, n int) ([]VMEvent, error) {
	rows, err := m.st.ListVMEventsTail(ctx, id, n)
	if err != nil {
		return nil, err
	}
	out := make([]VMEvent, len(rows))
	for i, r := range rows {
		out[i] = VMEvent{ID: r.ID, Time: r.Time, Kind: r.Kind, Data: r.Data}
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
	es, _, err := m.ledger.Since(ctx, id, since, 1)
	if err != nil {
		return 0, err
	}
	if len(es) > 0 {
		return es[0].Seq - 1, nil
	}
	// None newer yet: the newest seq (one row, not the whole ledger).
	if es, err = m.ledger.Tail(ctx, id, 1); err != nil || len(es) == 0 {
		return 0, err
	}
	return es[0].Seq, nil
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
