package egresslog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"paddock.dev/paddock/egress"
	"paddock.dev/paddock/hostd/ledger"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/session/sessiontest"
	"paddock.dev/paddock/hostd/store"
)

// fakeClock is a clock a test moves; safe to read from the egress log's
// writer while the test moves it.
type fakeClock struct{ t atomic.Pointer[time.Time] }

func newFakeClock(t time.Time) *fakeClock { c := &fakeClock{}; c.set(t); return c }
func (c *fakeClock) now() time.Time       { return *c.t.Load() }
func (c *fakeClock) set(t time.Time)      { c.t.Store(&t) }
func (c *fakeClock) add(d time.Duration)  { c.set(c.now().Add(d)) }

// egressLogManager is a session core on the fake backend and its egress
// log, wired as hostd/daemon wires them, on a clock the test moves. The
// decisions are fed straight to the Service, as the proxy would.
func egressLogManager(t *testing.T, clock *fakeClock) (*session.Manager, *Service, *store.Store, *ledger.Ledger) {
	t.Helper()
	m := sessiontest.New(t, sessiontest.Now(clock.now))
	s := New(m, 2*time.Hour)
	m.SetEgressLog(s)
	return m, s, m.Store(), sessiontest.Ledger(m)
}

// egressCounts sums an egress log by kind, and counts its rows.
func egressCounts(t *testing.T, st *store.Store, id string) (rows int, byKind map[string]int64) {
	t.Helper()
	rs, err := st.ListEgressLog(context.Background(), id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	byKind = map[string]int64{}
	for _, r := range rs {
		byKind[r.Kind] += r.Count
	}
	return len(rs), byKind
}

// TestEgressLogFoldsAFlood: thousands of decisions, to one host and to
// hundreds, make a bounded number of log rows and ledger entries, and
// every decision is counted: the log's counts and the egress.summary
// entries add up to what was decided. The ledger verifies throughout.
func TestEgressLogFoldsAFlood(t *testing.T) {
	clock := newFakeClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	_, s, st, led := egressLogManager(t, clock)
	ctx := context.Background()
	const id = "ses-flood"
	const same, distinct = 5000, 300
	for i := range same {
		s.Record(egress.Event{Sandbox: id, Kind: "egress.deny", Host: "denied.test", Port: 80, Method: "GET",
			Path: fmt.Sprintf("/%d", i), Reason: "no rule allows denied.test"})
	}
	for i := range distinct {
		h := fmt.Sprintf("h%d.test", i)
		s.Record(egress.Event{Sandbox: id, Kind: "dns.deny", Host: h, Reason: "name not allowed by policy"})
	}
	s.Record(egress.Event{Sandbox: id, Kind: "egress.allow", Host: "ok.test", Port: 443})
	// Before the window closes: a row for the first of each key in the
	// session while the refusals' ledger budget lasts (1 + 255), and the
	// allow, which has a budget of its own.
	s.Settle()
	if rows, _ := egressCounts(t, st, id); rows != egressChainKeys+1 {
		t.Errorf("%d rows while the window is open, want %d (the first of each key in the session, up to the budget)", rows, egressChainKeys+1)
	}
	clock.add(egressWindow)
	s.closeWindows(false)
	s.Settle()
	rows, byKind := egressCounts(t, st, id)
	if rows > egressChainKeys+1+egressKeysPerWindow+3 {
		t.Errorf("%d log rows for one window", rows)
	}
	if byKind["egress.deny"] != same || byKind["dns.deny"] != distinct || byKind["egress.allow"] != 1 {
		t.Errorf("log counts %v, want %d egress.deny, %d dns.deny, 1 egress.allow", byKind, same, distinct)
	}
	es, err := led.List(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	itemised := map[string]int64{}
	var summaries int
	var summed map[string]int64
	var notItemised int64
	for _, e := range es {
		switch e.Kind {
		case "egress.summary":
			summaries++
			var d struct {
				Decisions   map[string]int64 `json:"decisions"`
				NotItemised int64            `json:"not_itemised"`
				Hosts       []egressHostCount
				Past        []map[string]any `json:"past_host_limit"`
			}
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			summed, notItemised = d.Decisions, d.NotItemised
			if len(d.Hosts) == 0 || d.Hosts[0].Host != "denied.test" || d.Hosts[0].Count != same || len(d.Past) != 1 {
				t.Errorf("summary hosts %+v, past the limit %v", d.Hosts, d.Past)
			}
		default:
			itemised[e.Kind]++
		}
	}
	if len(es) > egressChainKeys+2 || summaries != 1 {
		t.Errorf("%d ledger entries, %d summaries", len(es), summaries)
	}
	if summed["egress.deny"] != same || summed["dns.deny"] != distinct || summed["egress.allow"] != 1 {
		t.Errorf("the summary counts %v", summed)
	}
	if total := itemised["egress.deny"] + itemised["dns.deny"] + itemised["egress.allow"]; total+notItemised != same+distinct+1 {
		t.Errorf("%d itemised + %d not itemised, want %d", total, notItemised, same+distinct+1)
	}
	// The next window: the host already in the ledger is not itemised
	// again; its log row is.
	s.Record(egress.Event{Sandbox: id, Kind: "egress.deny", Host: "denied.test", Reason: "no rule allows denied.test"})
	clock.add(egressWindow)
	s.Flush()
	es2, _ := led.List(ctx, id, 0, 0)
	if len(es2) != len(es)+1 || es2[len(es2)-1].Kind != "egress.summary" {
		t.Errorf("the second window added %d entries (last %s), want one summary", len(es2)-len(es), es2[len(es2)-1].Kind)
	}
	if res, err := led.Verify(ctx, id); err != nil || !res.OK {
		t.Errorf("verify: %+v %v", res, err)
	}
}

// TestEgressLogRetention: the sweep prunes log rows past the retention;
// the ledger's entries stay and the chain still verifies.
func TestEgressLogRetention(t *testing.T) {
	clock := newFakeClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	m, s, st, led := egressLogManager(t, clock)
	ctx := context.Background()
	const id = "ses-old"
	for range 10 {
		s.Record(egress.Event{Sandbox: id, Kind: "egress.deny", Host: "old.test", Reason: "no"})
	}
	clock.add(egressWindow)
	s.closeWindows(false)
	s.Settle()
	clock.add(time.Hour)
	s.Record(egress.Event{Sandbox: id, Kind: "egress.deny", Host: "new.test", Reason: "no"})
	s.Settle()
	before, _ := led.List(ctx, id, 0, 0)
	if rows, _ := egressCounts(t, st, id); rows != 3 {
		t.Fatalf("%d rows before the prune, want 3", rows)
	}
	// Two hours after the first window (the retention): its rows go.
	clock.add(time.Hour + time.Second)
	m.Sweep(ctx)
	rs, _ := st.ListEgressLog(ctx, id, 0, 0)
	if len(rs) != 1 || rs[0].Host != "new.test" {
		t.Errorf("after the prune: %+v", rs)
	}
	after, _ := led.List(ctx, id, 0, 0)
	if len(after) != len(before) {
		t.Errorf("the prune touched the ledger: %d entries, were %d", len(after), len(before))
	}
	if res, err := led.Verify(ctx, id); err != nil || !res.OK {
		t.Errorf("verify after the prune: %+v %v", res, err)
	}
	if err := CheckRetention(time.Minute); err == nil {
		t.Error("a retention of a minute was accepted")
	}
	s.Flush()
}

// TestListIsScoped: List reads a session's egress log as its caller may
// see it: the session's tenant (and the admin) get its rows, another
// tenant a 404, and so does an id with no session.
func TestListIsScoped(t *testing.T) {
	m := sessiontest.New(t)
	s := New(m, 0)
	m.SetEgressLog(s)
	ctx := context.Background()
	ses, err := m.Create(ctx, "acme", session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	s.Record(egress.Event{Sandbox: ses.ID, Kind: "egress.deny", Host: "denied.test", Reason: "no rule allows denied.test"})
	for _, tenant := range []string{"acme", ""} {
		rows, err := s.List(ctx, tenant, ses.ID, 0, 0)
		if err != nil || len(rows) != 1 || rows[0].Host != "denied.test" {
			t.Errorf("List as %q: %+v %v, want the one decision", tenant, rows, err)
		}
	}
	if rows, err := s.List(ctx, "other", ses.ID, 0, 0); !errors.Is(err, session.ErrNotFound) || rows != nil {
		t.Errorf("List as another tenant: %+v %v, want 404", rows, err)
	}
	if _, err := s.List(ctx, "", "ses-0123456789abcdef", 0, 0); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("List of no session: %v, want 404", err)
	}
	s.Flush()
}

// TestClosedWritesTheWindow: when a sandbox's egress closes, what its
// open window folded is in the log and the ledger by the time Closed
// returns, without waiting for the window to end: the core ledgers the
// session's end right after, and the summary must come before it.
func TestClosedWritesTheWindow(t *testing.T) {
	clock := newFakeClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	_, s, st, led := egressLogManager(t, clock)
	ctx := context.Background()
	const id = "ses-closing"
	for range 5 {
		s.Record(egress.Event{Sandbox: id, Kind: "egress.deny", Host: "denied.test", Reason: "no rule allows denied.test"})
	}
	s.Closed(id)
	rows, byKind := egressCounts(t, st, id)
	if rows != 2 || byKind["egress.deny"] != 5 {
		t.Errorf("after Closed: %d rows counting %v, want the first decision and one row for the 4 more", rows, byKind)
	}
	es, err := led.List(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || es[0].Kind != "egress.deny" || es[1].Kind != "egress.summary" {
		t.Errorf("after Closed the ledger has %d entries, want egress.deny then egress.summary", len(es))
	}
	s.Flush()
}
