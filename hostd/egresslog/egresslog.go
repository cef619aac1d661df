// Package egresslog is where a sandbox's network decisions go, bounded:
// the egress log (store.EgressLogRow, outside the hash chain) and the
// session's ledger. The session core hands every decision of a sandbox's
// proxy and resolver to the Service (it is the core's session.EgressLog,
// set by hostd/daemon), tells it when a sandbox's egress closes, asks it
// to settle before the ledger is read, to prune in the sweep and to flush
// at shutdown.
//
// A sandbox decides how many requests it makes, so recording each
// decision as a ledger entry let one sandbox write thousands of rows a
// second (issue 16). Decisions are now folded per sandbox in windows of
// egressWindow:
//
// A decision's key is (kind, host, reason code, grant): the code is the
// deciding rule (the reason when there is none), so paths and reasons
// that vary do not make new keys. Paths and reasons are clipped to
// egressTextBytes wherever they are kept.
//
//   - The ledger (the hash chain, kept forever) gets the first decision
//     of each key of the session as the entry it always was
//     (egress.allow, egress.deny, dns.deny), checked before anything
//     else, so that no window full of junk can hide a new host; the
//     session has egressChainKeys such keys for allows and as many for
//     refusals, so refusals cannot spend what allows get. For a window
//     in which some decisions were not itemised that way, one
//     egress.summary entry: counts per kind, the busiest keys (with
//     codes, not reasons), and every allowed host that has no entry of
//     its own (up to egressSummaryAllowHosts; past it a count, and an
//     egress.hosts_overflow entry that says so).
//   - The egress log (store.EgressLogRow, outside the hash chain) gets a
//     row for each itemised decision, and the first decision of each
//     other key in a window while the window has fewer than
//     egressKeysPerWindow keys; the rest of the window's decisions are
//     counted, and when the window closes each key that repeated gets
//     one summary row ("N more like this", with a few samples), and the
//     decisions past the key limit one row per kind. A session's log is
//     kept under egressLogBytes (its oldest rows trimmed, counted in an
//     egress.pruned row); retention (New's retention, paddock
//     serve --egress-log-retention) prunes it by age; the chain is
//     untouched.
//
// So a flood costs a sandbox at most 2×egressChainKeys itemised ledger
// entries in its life, then at most egressLedgerWindowBytes of ledger
// per window, and at most egressLogBytes of log, whatever its rate; every
// decision is counted somewhere: an itemised entry or a summary's count.
package egresslog

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"paddock.dev/paddock/egress"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/store"
)

// Bounds of the egress log.
const (
	// egressQueue bounds the writes waiting for the database.
	egressQueue = 4096
	// egressWindow is how long decisions are folded together.
	egressWindow = 10 * time.Second
	// egressKeysPerWindow is how many distinct (kind, host, reason) a
	// sandbox gets a row for in one window.
	egressKeysPerWindow = 32
	// egressChainKeys is how many distinct (kind, host, code) of a
	// session are ledgered one by one (their first decision), for
	// refusals and, apart, for allowed connections: a flood of refusals
	// cannot use up what the allows get.
	egressChainKeys = 256
	// egressSummaryAllowHosts is how many allowed hosts without a ledger
	// entry of their own an egress.summary names (all of them up to
	// that; past it a count, and an egress.hosts_overflow entry).
	egressSummaryAllowHosts = 64
	// egressTextBytes bounds a path or a reason kept in the log or the
	// ledger; egressCodeBytes a reason code (the deciding rule).
	egressTextBytes = 256
	egressCodeBytes = 128
	// egressLogBytes is what one session's egress log may cost (rows as
	// store.EgressLogRow.Size counts them); past it the oldest rows go
	// down to three quarters of it, counted in an egress.pruned row.
	egressLogBytes = 1 << 20
	// egressLedgerWindowBytes bounds what the ledger gets for one window
	// of one session once the session's itemised budgets are spent: the
	// egress.summary (16 busiest keys, 64 allowed hosts, per-kind
	// overflow counts) and an egress.hosts_overflow entry, every text in
	// them clipped (TestEgressLogByteBudget measures it).
	egressLedgerWindowBytes = 48 << 10
	// egressSamples is how many decisions a summary row keeps.
	egressSamples = 3
	// egressSummaryHosts is how many hosts an egress.summary names.
	egressSummaryHosts = 16
	// egressHostSample is how many hosts past the key limit are named.
	egressHostSample = 8
	// egressOverflowHosts bounds the distinct hosts counted past the key
	// limit (more count as "at least").
	egressOverflowHosts = 1024
)

// Retention of the egress log.
const (
	DefaultRetention = 7 * 24 * time.Hour
	MinRetention     = time.Hour
	MaxRetention     = 10 * 365 * 24 * time.Hour
)

// CheckRetention refuses a retention out of its bounds.
func CheckRetention(d time.Duration) error {
	if d < MinRetention || d > MaxRetention {
		return fmt.Errorf("the egress log retention %s must be from %s to %s", d, MinRetention, MaxRetention)
	}
	return nil
}

// egressKey is what makes two decisions alike: the kind, the host, the
// reason code (the deciding rule, or the reason when no rule is named)
// and the grant injected, if any.
type egressKey struct{ kind, host, code, grant string }

func keyOf(ev egress.Event) egressKey {
	code := ev.Rule
	if code == "" {
		code = ev.Reason
	}
	return egressKey{ev.Kind, ev.Host, session.ClipText(code, egressCodeBytes), ev.Grant}
}

// clipEvent bounds what a decision carries into the log and the ledger.
func clipEvent(ev egress.Event) egress.Event {
	ev.Host = session.ClipText(ev.Host, 255)
	ev.Method = session.ClipText(ev.Method, 32)
	ev.Path = session.ClipText(ev.Path, egressTextBytes)
	ev.Reason = session.ClipText(ev.Reason, egressTextBytes)
	ev.Rule = session.ClipText(ev.Rule, egressCodeBytes)
	ev.Grant = session.ClipText(ev.Grant, 64)
	return ev
}

// egressChain is what a session's ledger itemises.
type egressChain struct {
	keys           map[egressKey]bool
	allows, denies int
}

// egressAllowHost is one allowed host (and grant) in a summary.
type egressAllowHost struct {
	Host  string `json:"host"`
	Grant string `json:"grant,omitempty"`
	Count int64  `json:"count"`
}

// egressTally counts decisions alike after the first of a window.
type egressTally struct {
	more          int64 // after the first
	from, last    time.Time
	samples       []egress.Event
	hosts         map[string]bool // overflow tallies only
	hostSample    []string        // the first hosts seen, overflow only
	hostsOverflow bool
}

func (t *egressTally) add(ev egress.Event, now time.Time) {
	if t.more == 0 {
		t.from = now
	}
	t.more++
	t.last = now
	if len(t.samples) < egressSamples {
		t.samples = append(t.samples, ev)
	}
	if t.hosts != nil {
		if len(t.hosts) < egressOverflowHosts && !t.hosts[ev.Host] {
			t.hosts[ev.Host] = true
			if len(t.hostSample) < egressHostSample {
				t.hostSample = append(t.hostSample, ev.Host)
			}
		} else if !t.hosts[ev.Host] {
			t.hostsOverflow = true
		}
	}
}

// egressWindowState is one sandbox's open window.
type egressWindowState struct {
	start, last time.Time
	decisions   map[string]int64 // by kind
	keys        map[egressKey]*egressTally
	overflow    map[string]*egressTally // by kind, past egressKeysPerWindow
	// unchained counts the window's decisions that have no ledger entry
	// of their own.
	unchained int64
	// allowed: the window's allowed decisions whose (host, grant) has
	// no ledger entry of its own, by host and grant, at most
	// egressSummaryAllowHosts; the rest counted in allowUnnamed, their
	// distinct hosts in allowUnnamedHosts (at most egressOverflowHosts).
	allowed           map[egressAllowHost]int64
	allowUnnamed      int64
	allowUnnamedHosts map[string]bool
}

// noteAllow names an allowed decision that has no ledger entry of its own
// in the window's summary.
func (w *egressWindowState) noteAllow(ev egress.Event) {
	k := egressAllowHost{Host: ev.Host, Grant: ev.Grant}
	if _, ok := w.allowed[k]; ok || len(w.allowed) < egressSummaryAllowHosts {
		w.allowed[k]++
		return
	}
	w.allowUnnamed++
	if len(w.allowUnnamedHosts) < egressOverflowHosts {
		w.allowUnnamedHosts[ev.Host] = true
	}
}

// egressWrite is one batch for the writer: log rows, and ledger entries.
// forget tells the writer the session's egress is closed.
type egressWrite struct {
	sandbox   string
	rows      []store.EgressLogRow
	entries   []egressEntry
	decisions int64 // what the batch accounts for, for egress.dropped
	forget    bool
}

// egressEntry is one ledger entry to append.
type egressEntry struct {
	kind string
	data any
}

// Service folds decisions and hands the result to one writer goroutine,
// off the request path (each write is a transaction synced to disk, which
// a request should not wait for). A batch that finds the queue full is
// counted per sandbox and the count ledgered as egress.dropped. It is the
// core's session.EgressLog.
type Service struct {
	m         *session.Manager
	retention time.Duration

	pending atomic.Int64 // queued and not yet written
	once    sync.Once
	ch      chan egressWrite
	done    chan struct{}
	mu      sync.Mutex
	windows map[string]*egressWindowState
	chained map[string]*egressChain // sandbox → keys with a ledger entry
	dropped map[string]int64
	// droppedAllowed: the allowed hosts named in dropped batches, per
	// sandbox (at most egressSummaryAllowHosts, the rest counted under
	// ""), so that egress.dropped names them.
	droppedAllowed map[string]map[string]int64
	closed         bool
	// logBytes: what each session's log costs, as far as the writer
	// knows (the writer's alone).
	logBytes map[string]int64
}

var _ session.EgressLog = (*Service)(nil)

// New returns the egress log of m's sandboxes, keeping rows for
// retention (0: DefaultRetention; CheckRetention says what is allowed).
// It starts nothing: the writer starts with the first decision. Give it
// to m with m.SetEgressLog.
func New(m *session.Manager, retention time.Duration) *Service {
	if retention <= 0 {
		retention = DefaultRetention
	}
	return &Service{m: m, retention: retention}
}

func (l *Service) start() {
	l.once.Do(func() {
		l.mu.Lock()
		l.ch, l.done = make(chan egressWrite, egressQueue), make(chan struct{})
		l.windows, l.chained, l.dropped = map[string]*egressWindowState{}, map[string]*egressChain{}, map[string]int64{}
		l.logBytes, l.droppedAllowed = map[string]int64{}, map[string]map[string]int64{}
		l.mu.Unlock()
		go l.write()
	})
}

// Record takes one decision of the proxy or the resolver. It never
// waits for the database.
func (l *Service) Record(ev egress.Event) {
	l.start()
	now := l.m.Now().UTC()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || ev.Sandbox == "" || ev.Kind == "" {
		return
	}
	w := l.windows[ev.Sandbox]
	if w != nil && now.Sub(w.start) >= egressWindow {
		l.closeWindowLocked(ev.Sandbox, w)
		w = nil
	}
	if w == nil {
		w = &egressWindowState{start: now, decisions: map[string]int64{}, keys: map[egressKey]*egressTally{}, overflow: map[string]*egressTally{},
			allowed: map[egressAllowHost]int64{}, allowUnnamedHosts: map[string]bool{}}
		l.windows[ev.Sandbox] = w
	}
	w.last = now
	w.decisions[ev.Kind]++
	ev = clipEvent(ev)
	key := keyOf(ev)
	allow := ev.Kind == "egress.allow"
	chain := l.chained[ev.Sandbox]
	if chain == nil {
		chain = &egressChain{keys: map[egressKey]bool{}}
		l.chained[ev.Sandbox] = chain
	}
	if t := w.keys[key]; t != nil {
		t.add(ev, now)
		w.unchained++
		if allow && !chain.keys[key] {
			w.noteAllow(ev)
		}
		return
	}
	raw, _ := json.Marshal(ev)
	wr := egressWrite{sandbox: ev.Sandbox, decisions: 1,
		rows: []store.EgressLogRow{{Session: ev.Sandbox, Time: now, Kind: ev.Kind, Host: ev.Host, Reason: ev.Reason, Count: 1, Data: raw}}}
	// The first decision of a key in the session is ledgered (and logged)
	// however full the window is, while the session's budget for its
	// class lasts: checked before the window's key limit, so a window
	// filled with junk cannot hide a new host.
	if !chain.keys[key] {
		room := chain.denies < egressChainKeys
		if allow {
			room = chain.allows < egressChainKeys
		}
		if room {
			chain.keys[key] = true
			if allow {
				chain.allows++
			} else {
				chain.denies++
			}
			w.keys[key] = &egressTally{}
			wr.entries = []egressEntry{{ev.Kind, ev}}
			l.queueLocked(wr)
			return
		}
	}
	// Not itemised in the ledger: counted in the summary, and an allowed
	// host without an entry of its own is named there.
	w.unchained++
	if allow && !chain.keys[key] {
		w.noteAllow(ev)
	}
	if len(w.keys) >= egressKeysPerWindow {
		t := w.overflow[ev.Kind]
		if t == nil {
			t = &egressTally{hosts: map[string]bool{}}
			w.overflow[ev.Kind] = t
		}
		t.add(ev, now)
		return
	}
	w.keys[key] = &egressTally{}
	l.queueLocked(wr)
}

// queueLocked hands a batch to the writer, or counts it as dropped.
func (l *Service) queueLocked(wr egressWrite) {
	l.pending.Add(1)
	select {
	case l.ch <- wr:
	default:
		l.pending.Add(-1)
		l.dropped[wr.sandbox] += wr.decisions
		l.droppedLocked(wr)
	}
}

// droppedLocked keeps what a batch lost to a full queue must not lose:
// the keys it itemised go back to unledgered (the next decision of each
// is itemised again), and its allowed hosts are named in egress.dropped.
func (l *Service) droppedLocked(wr egressWrite) {
	var hosts []string
	for _, e := range wr.entries {
		switch d := e.data.(type) {
		case egress.Event:
			if chain := l.chained[wr.sandbox]; chain != nil && chain.keys[keyOf(d)] {
				delete(chain.keys, keyOf(d))
				if d.Kind == "egress.allow" {
					chain.allows--
				} else {
					chain.denies--
				}
			}
			if d.Kind == "egress.allow" {
				hosts = append(hosts, d.Host)
			}
		case map[string]any:
			if a, ok := d["allowed_hosts"].([]egressAllowHost); ok {
				for _, h := range a {
					hosts = append(hosts, h.Host)
				}
			}
		}
	}
	for _, r := range wr.rows {
		if r.Kind == "egress.allow" && !r.Summary {
			hosts = append(hosts, r.Host)
		}
	}
	if len(hosts) == 0 {
		return
	}
	named := l.droppedAllowed[wr.sandbox]
	if named == nil {
		named = map[string]int64{}
		l.droppedAllowed[wr.sandbox] = named
	}
	for _, h := range hosts {
		if _, ok := named[h]; ok || len(named) < egressSummaryAllowHosts {
			named[h]++
		} else {
			named[""]++
		}
	}
}

// egressHostCount is one line of an egress.summary's hosts.
type egressHostCount struct {
	Kind  string `json:"kind"`
	Host  string `json:"host"`
	Code  string `json:"code,omitempty"`
	Grant string `json:"grant,omitempty"`
	Count int64  `json:"count"`
}

// closeWindowLocked writes what a window folded: a summary row per key
// that repeated, one per kind past the key limit, and an egress.summary
// ledger entry when some decisions have no entry of their own.
func (l *Service) closeWindowLocked(sandbox string, w *egressWindowState) {
	delete(l.windows, sandbox)
	keys := make([]egressKey, 0, len(w.keys))
	for k := range w.keys {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.kind != b.kind {
			return a.kind < b.kind
		}
		if a.host != b.host {
			return a.host < b.host
		}
		if a.code != b.code {
			return a.code < b.code
		}
		return a.grant < b.grant
	})
	wr := egressWrite{sandbox: sandbox}
	var hosts []egressHostCount
	for _, k := range keys {
		t := w.keys[k]
		hosts = append(hosts, egressHostCount{Kind: k.kind, Host: k.host, Code: k.code, Grant: k.grant, Count: t.more + 1})
		if t.more == 0 {
			continue
		}
		raw, _ := json.Marshal(map[string]any{"more_like_this": t.more, "samples": t.samples})
		wr.rows = append(wr.rows, store.EgressLogRow{Session: sandbox, Time: t.from, LastTime: t.last, Kind: k.kind,
			Host: k.host, Reason: session.ClipText(k.code, egressCodeBytes), Count: t.more, Summary: true, Data: raw})
		wr.decisions += t.more
	}
	kinds := make([]string, 0, len(w.overflow))
	for k := range w.overflow {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var overflow []map[string]any
	for _, kind := range kinds {
		t := w.overflow[kind]
		sample := t.hostSample
		o := map[string]any{"kind": kind, "count": t.more, "hosts": len(t.hosts), "host_sample": sample}
		if t.hostsOverflow {
			o["hosts_at_least"] = true
		}
		overflow = append(overflow, o)
		raw, _ := json.Marshal(map[string]any{"reason": fmt.Sprintf("past the %d distinct host and reason pairs a window itemises", egressKeysPerWindow),
			"hosts": len(t.hosts), "hosts_at_least": t.hostsOverflow, "host_sample": sample, "samples": t.samples})
		wr.rows = append(wr.rows, store.EgressLogRow{Session: sandbox, Time: t.from, LastTime: t.last, Kind: kind,
			Count: t.more, Summary: true, Data: raw})
		wr.decisions += t.more
	}
	if w.unchained > 0 {
		sort.SliceStable(hosts, func(i, j int) bool { return hosts[i].Count > hosts[j].Count })
		others := 0
		if len(hosts) > egressSummaryHosts {
			others, hosts = len(hosts)-egressSummaryHosts, hosts[:egressSummaryHosts]
		}
		d := map[string]any{"from": w.start, "to": w.last, "decisions": w.decisions, "not_itemised": w.unchained, "hosts": hosts}
		if others > 0 {
			d["other_hosts"] = others
		}
		if len(overflow) > 0 {
			d["past_host_limit"] = overflow
		}
		if len(w.allowed) > 0 {
			allowed := make([]egressAllowHost, 0, len(w.allowed))
			for k, n := range w.allowed {
				allowed = append(allowed, egressAllowHost{Host: k.Host, Grant: k.Grant, Count: n})
			}
			sort.Slice(allowed, func(i, j int) bool {
				if allowed[i].Host != allowed[j].Host {
					return allowed[i].Host < allowed[j].Host
				}
				return allowed[i].Grant < allowed[j].Grant
			})
			d["allowed_hosts"] = allowed
		}
		wr.entries = append(wr.entries, egressEntry{"egress.summary", d})
		if w.allowUnnamed > 0 {
			o := map[string]any{"from": w.start, "to": w.last, "named": len(w.allowed), "decisions": w.allowUnnamed,
				"hosts":  len(w.allowUnnamedHosts),
				"reason": fmt.Sprintf("more allowed hosts without a ledger entry of their own than the %d a summary names", egressSummaryAllowHosts)}
			if len(w.allowUnnamedHosts) >= egressOverflowHosts {
				o["hosts_at_least"] = true
			}
			d["allowed_hosts_unnamed"] = o
			wr.entries = append(wr.entries, egressEntry{"egress.hosts_overflow", o})
		}
	}
	if len(wr.rows) > 0 || len(wr.entries) > 0 {
		l.queueLocked(wr)
	}
}

// Closed closes sandbox's open window now (its egress closed), so what
// it folded reaches the log and the ledger before whatever ended the
// sandbox is ledgered, and forgets what its ledger has.
func (l *Service) Closed(sandbox string) {
	l.mu.Lock()
	if w := l.windows[sandbox]; w != nil && !l.closed {
		l.closeWindowLocked(sandbox, w)
	}
	if l.chained != nil {
		delete(l.chained, sandbox)
	}
	if l.ch != nil && !l.closed {
		l.queueLocked(egressWrite{sandbox: sandbox, forget: true})
	}
	l.mu.Unlock()
	l.Settle()
}

// closeWindows closes the windows older than egressWindow (all of them
// when all is set).
func (l *Service) closeWindows(all bool) {
	now := l.m.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	for sb, w := range l.windows {
		if all || now.Sub(w.start) >= egressWindow {
			l.closeWindowLocked(sb, w)
		}
	}
}

// Settle waits (a little) for queued writes to reach the database, so a
// read of the ledger shows what was decided before it.
func (l *Service) Settle() {
	for deadline := time.Now().Add(2 * time.Second); l.pending.Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
}

// write is the writer goroutine: it writes the batches in order, closes
// old windows every second, and ledgers what was dropped.
func (l *Service) write() {
	defer close(l.done)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	ctx := context.Background()
	for {
		select {
		case <-tick.C:
			l.closeWindows(false)
			continue
		case wr, ok := <-l.ch:
			if !ok {
				l.writeDropped(ctx)
				return
			}
			if wr.forget {
				delete(l.logBytes, wr.sandbox)
			}
			if len(wr.rows) > 0 {
				if err := l.m.Store().AppendEgressLog(ctx, wr.rows); err != nil {
					l.m.Logger().Error("egress log append", "session", wr.sandbox, "err", err)
				} else {
					l.bound(ctx, wr.sandbox, wr.rows)
				}
			}
			for _, e := range wr.entries {
				l.m.LedgerAppend(ctx, wr.sandbox, e.kind, e.data)
			}
			l.pending.Add(-1)
		}
		if len(l.ch) == 0 {
			l.writeDropped(ctx)
		}
	}
}

// bound keeps a session's egress log under egressLogBytes after rows
// were added: past it, the oldest rows go (store.TrimEgressLog).
func (l *Service) bound(ctx context.Context, sandbox string, rows []store.EgressLogRow) {
	st, log := l.m.Store(), l.m.Logger()
	n, ok := l.logBytes[sandbox]
	if !ok {
		var err error
		if n, err = st.EgressLogBytes(ctx, sandbox); err != nil {
			log.Warn("egress log size", "session", sandbox, "err", err)
			return
		}
	} else {
		for _, r := range rows {
			n += r.Size()
		}
	}
	if n > egressLogBytes {
		removed, size, err := st.TrimEgressLog(ctx, sandbox, egressLogBytes*3/4, l.m.Now().UTC())
		if err != nil {
			log.Warn("trim the egress log", "session", sandbox, "err", err)
			delete(l.logBytes, sandbox)
			return
		}
		if removed > 0 {
			log.Info("trimmed the egress log", "session", sandbox, "rows", removed, "bytes", size)
		}
		n = size
	}
	l.logBytes[sandbox] = n
}

// writeDropped ledgers the decisions whose batches found the queue full,
// per sandbox.
func (l *Service) writeDropped(ctx context.Context) {
	l.mu.Lock()
	dropped, allowed := l.dropped, l.droppedAllowed
	l.dropped, l.droppedAllowed = map[string]int64{}, map[string]map[string]int64{}
	l.mu.Unlock()
	for id, n := range dropped {
		d := map[string]any{"count": n, "reason": "more decisions at once than the egress log's queue holds"}
		if named := allowed[id]; len(named) > 0 {
			hosts := make([]string, 0, len(named))
			for h := range named {
				if h != "" {
					hosts = append(hosts, h)
				}
			}
			sort.Strings(hosts)
			d["allowed_hosts"] = hosts
			if named[""] > 0 {
				d["allowed_hosts_unnamed"] = named[""]
			}
		}
		l.m.LedgerAppend(ctx, id, "egress.dropped", d)
	}
}

// Flush closes every window, writes what is queued and stops the writer
// (the core's Shutdown and Detach). Decisions after it are dropped; a
// second Flush does nothing.
func (l *Service) Flush() {
	l.mu.Lock()
	started := l.ch != nil && !l.closed
	if started {
		for sb, w := range l.windows {
			l.closeWindowLocked(sb, w)
		}
	}
	l.closed = true
	l.mu.Unlock()
	if started {
		close(l.ch)
		<-l.done
	}
}

// Prune removes egress log rows older than the retention (the core's
// sweep).
func (l *Service) Prune(ctx context.Context) {
	n, err := l.m.Store().PruneEgressLog(ctx, l.m.Now().Add(-l.retention))
	if err != nil {
		l.m.Logger().Warn("prune the egress log", "err", err)
		return
	}
	if n > 0 {
		l.m.Logger().Info("pruned the egress log", "rows", n, "retention", l.retention.String())
	}
}

// List returns session id's egress log rows after afterID (at most
// limit; ≤ 0 means store.MaxEgressLogList), as the caller with tenant
// may see them: another tenant's session is ErrNotFound.
func (l *Service) List(ctx context.Context, tenant, id string, afterID int64, limit int) ([]store.EgressLogRow, error) {
	if _, err := l.m.Load(ctx, tenant, id); err != nil {
		return nil, err
	}
	l.Settle()
	return l.m.Store().ListEgressLog(ctx, id, afterID, limit)
}
