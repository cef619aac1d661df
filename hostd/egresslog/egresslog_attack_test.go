package egresslog

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"paddock.dev/paddock/egress"
	"paddock.dev/paddock/hostd/ledger"
	"paddock.dev/paddock/hostd/store"
)

// ledgerNames reports whether some entry of session's ledger names host:
// an itemised decision for it, or an egress.summary that lists it among
// its allowed hosts.
func ledgerNames(t *testing.T, led *ledger.Ledger, id, host string) (itemised, summarised bool) {
	t.Helper()
	es, err := led.List(context.Background(), id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		var d struct {
			Host    string `json:"host"`
			Method  string `json:"method"`
			Path    string `json:"path"`
			Allowed []struct {
				Host string `json:"host"`
			} `json:"allowed_hosts"`
		}
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		if e.Kind == "egress.allow" && d.Host == host {
			itemised = true
		}
		if e.Kind == "egress.summary" {
			for _, a := range d.Allowed {
				summarised = summarised || a.Host == host
			}
		}
	}
	return itemised, summarised
}

// logNames counts session's egress log rows for host.
func logNames(t *testing.T, st *store.Store, id, host string) int {
	t.Helper()
	rs, err := st.ListEgressLog(context.Background(), id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range rs {
		if r.Host == host {
			n++
		}
	}
	return n
}

// TestAttackEgressAllowHiddenByFlood: a sandbox fills its window with junk
// (denied names, then allowed decoys) so that the connection that matters,
// an allowed POST to a new host, finds no room. It must still be ledgered
// as itemised egress.allow and logged. Then, once the session's itemised
// budget is spent (hundreds of allowed decoys), a new allowed host must
// still be named in the window's egress.summary, and past the summary's
// bound the overflow is ledgered as egress.hosts_overflow.
func TestAttackEgressAllowHiddenByFlood(t *testing.T) {
	clock := newFakeClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	_, s, st, led := egressLogManager(t, clock)
	ctx := context.Background()
	const exfil = "exfil.allowed.test"

	t.Run("window full", func(t *testing.T) {
		const id = "ses-hide"
		for i := range 32 {
			s.Record(egress.Event{Sandbox: id, Kind: "dns.deny", Host: fmt.Sprintf("junk%d.test", i), Reason: "name not allowed by policy"})
		}
		for i := range 8 {
			s.Record(egress.Event{Sandbox: id, Kind: "egress.allow", Host: fmt.Sprintf("decoy%d.allowed.test", i), Port: 443, Method: "GET", Path: "/"})
		}
		s.Record(egress.Event{Sandbox: id, Kind: "egress.allow", Host: exfil, Port: 443, Method: "POST", Path: "/upload", Rule: "*.allowed.test"})
		clock.add(egressWindow)
		s.closeWindows(false)
		s.Settle()
		if itemised, _ := ledgerNames(t, led, id, exfil); !itemised {
			t.Errorf("the allowed POST to %s has no egress.allow entry in the ledger", exfil)
		}
		if n := logNames(t, st, id, exfil); n != 1 {
			t.Errorf("%d egress log rows name %s, want 1", n, exfil)
		}
		if res, err := led.Verify(ctx, id); err != nil || !res.OK {
			t.Errorf("verify: %+v %v", res, err)
		}
	})

	t.Run("past the itemised budget", func(t *testing.T) {
		const id = "ses-hide-budget"
		// Refusals spend theirs; they must not spend the allows'.
		for i := range 300 {
			s.Record(egress.Event{Sandbox: id, Kind: "dns.deny", Host: fmt.Sprintf("junk%d.test", i), Reason: "name not allowed by policy"})
		}
		const first = "first.allowed.test"
		s.Record(egress.Event{Sandbox: id, Kind: "egress.allow", Host: first, Port: 443})
		for i := range 300 {
			s.Record(egress.Event{Sandbox: id, Kind: "egress.allow", Host: fmt.Sprintf("decoy%d.allowed.test", i), Port: 443})
		}
		clock.add(egressWindow)
		s.closeWindows(false)
		s.Settle()
		if itemised, _ := ledgerNames(t, led, id, first); !itemised {
			t.Errorf("300 refusals first: the first allowed host %s was not itemised", first)
		}
		// A new window: busy decoys fill the top hosts, the new host
		// comes once.
		for i := range 40 {
			for range 5 {
				s.Record(egress.Event{Sandbox: id, Kind: "egress.allow", Host: fmt.Sprintf("busy%d.allowed.test", i), Port: 443})
			}
		}
		s.Record(egress.Event{Sandbox: id, Kind: "egress.allow", Host: exfil, Port: 443, Method: "POST", Path: "/upload"})
		clock.add(egressWindow)
		s.closeWindows(false)
		s.Settle()
		// The allows' budget is spent: the summary names it.
		if _, summarised := ledgerNames(t, led, id, exfil); !summarised {
			t.Errorf("past the itemised budget, %s is not among the window's egress.summary allowed hosts", exfil)
		}
		// Past what a summary names: counted and ledgered as overflow.
		for i := range 200 {
			s.Record(egress.Event{Sandbox: id, Kind: "egress.allow", Host: fmt.Sprintf("many%d.allowed.test", i), Port: 443})
		}
		clock.add(egressWindow)
		s.closeWindows(false)
		s.Settle()
		es, _ := led.List(ctx, id, 0, 0)
		var overflow struct {
			Named     int   `json:"named"`
			Decisions int64 `json:"decisions"`
			Hosts     int   `json:"hosts"`
		}
		found := false
		for _, e := range es {
			if e.Kind == "egress.hosts_overflow" {
				found = true
				if err := json.Unmarshal(e.Data, &overflow); err != nil {
					t.Fatal(err)
				}
			}
		}
		if !found || overflow.Named+overflow.Hosts != 200 || int64(overflow.Hosts) != overflow.Decisions {
			t.Errorf("200 new allowed hosts in a window: overflow entry %v %+v, want the named and the unnamed to add up to 200", found, overflow)
		}
		if res, err := led.Verify(ctx, id); err != nil || !res.OK {
			t.Errorf("verify: %+v %v", res, err)
		}
	})
	s.Flush()
}

// TestEgressLogByteBudget: the flood of the review (40 distinct hosts, 4
// requests each, per window, with hosts, reasons and paths as long as the
// proxy lets them be) for ten minutes and more keeps the session's egress
// log under egressLogBytes, with the pruned rows counted, and the ledger's
// growth per window under egressLedgerWindowBytes once the session's
// itemised budget is spent.
func TestEgressLogByteBudget(t *testing.T) {
	clock := newFakeClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	_, s, st, led := egressLogManager(t, clock)
	ctx := context.Background()
	const id = "ses-bytes"
	long := func(prefix string, n int) string { return prefix + strings.Repeat("x", n-len(prefix)) }
	ledgerBytes := func() (n int) {
		es, err := led.List(ctx, id, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			n += len(e.Data) + len(e.Kind) + len(e.Prev) + len(e.Hash) + 64
		}
		return n
	}
	const windows = 150 // 25 minutes
	var maxGrowth, before int
	for w := range windows {
		for h := range 40 {
			host := long(fmt.Sprintf("w%d-h%d.", w, h), 240) + ".test"
			kind, reason := "egress.deny", long(fmt.Sprintf("w%d-h%d ", w, h), 1024)
			if h%2 == 0 {
				kind, reason = "egress.allow", ""
			}
			for r := range 4 {
				s.Record(egress.Event{Sandbox: id, Kind: kind, Host: host, Port: 443, Method: "POST",
					Path: long(fmt.Sprintf("/%d/", r), 1024), Rule: long("rule ", 300), Reason: reason})
			}
		}
		clock.add(egressWindow)
		s.closeWindows(false)
		s.Settle()
		after := ledgerBytes()
		// Past the itemised budgets (256 keys each, 20 a window), what
		// a window adds is its summary and an overflow entry at most.
		if w > 2*egressChainKeys/20 && after-before > maxGrowth {
			maxGrowth = after - before
		}
		before = after
	}
	size, err := st.EgressLogBytes(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if size > egressLogBytes {
		t.Errorf("the egress log costs %d bytes, over the budget of %d", size, egressLogBytes)
	}
	rs, _ := st.ListEgressLog(ctx, id, 0, 0)
	var pruned int64
	var sum int64
	for _, r := range rs {
		sum += r.Size()
		if r.Kind == store.EgressLogPrunedKind {
			pruned = r.Count
		}
		if len(r.Reason) > egressTextBytes+len("…") || len(r.Data) > 4096 {
			t.Errorf("a row with a reason of %d bytes and data of %d", len(r.Reason), len(r.Data))
			break
		}
	}
	if pruned == 0 || sum != size {
		t.Errorf("%d rows pruned; the rows cost %d, the store says %d", pruned, sum, size)
	}
	if maxGrowth == 0 || maxGrowth > egressLedgerWindowBytes {
		t.Errorf("the ledger grew by up to %d bytes in a window, want ≤ %d", maxGrowth, egressLedgerWindowBytes)
	}
	t.Logf("log: %d rows, %d bytes, %d pruned; ledger: %d bytes, at most %d a window past the itemised budget", len(rs), size, pruned, before, maxGrowth)
	if res, err := led.Verify(ctx, id); err != nil || !res.OK {
		t.Errorf("verify: %+v %v", res, err)
	}
	s.Flush()
}

// TestEgressDroppedNamesAllowedHosts: when the writer's queue is full, an
// allowed host's itemised decision is not lost without a trace: the
// egress.dropped entry names the host, and the key goes back to
// unledgered, so its next decision is itemised again.
func TestEgressDroppedNamesAllowedHosts(t *testing.T) {
	clock := newFakeClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	_, s, _, led := egressLogManager(t, clock)
	ctx := context.Background()
	const id, host = "ses-dropped", "exfil.allowed.test"
	// A writer that never reads: every batch finds the queue full.
	l := s
	l.once.Do(func() {
		l.ch, l.done = make(chan egressWrite), make(chan struct{})
		l.windows, l.chained, l.dropped = map[string]*egressWindowState{}, map[string]*egressChain{}, map[string]int64{}
		l.logBytes, l.droppedAllowed = map[string]int64{}, map[string]map[string]int64{}
	})
	// No writer will say it is done: say it for it, so the manager's
	// shutdown at the test's end (Flush) does not wait forever. This
	// cleanup runs before the manager's, which was added first.
	t.Cleanup(func() { close(l.done) })
	s.Record(egress.Event{Sandbox: id, Kind: "egress.allow", Host: host, Port: 443, Method: "POST", Path: "/upload"})
	l.mu.Lock()
	chained := l.chained[id].keys[egressKey{kind: "egress.allow", host: host}]
	l.mu.Unlock()
	if chained {
		t.Error("the dropped decision's key is still marked as ledgered")
	}
	s.writeDropped(ctx)
	es, err := led.List(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Count   int64    `json:"count"`
		Allowed []string `json:"allowed_hosts"`
	}
	if len(es) != 1 || es[0].Kind != "egress.dropped" {
		t.Fatalf("ledger %+v, want one egress.dropped", es)
	}
	if err := json.Unmarshal(es[0].Data, &d); err != nil {
		t.Fatal(err)
	}
	if d.Count != 1 || len(d.Allowed) != 1 || d.Allowed[0] != host {
		t.Errorf("egress.dropped %s, want a count of 1 naming %s", es[0].Data, host)
	}
}
