package previews

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"paddock.dev/paddock/hostd/ledger"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/session/sessiontest"
	"paddock.dev/paddock/hostd/store"
	"paddock.dev/paddock/internal/testutil"
)

// previewManager is a session manager on procbox with a clock the test
// moves, and its previews.
func previewManager(t *testing.T) (*session.Manager, *Service, *store.Store, *ledger.Ledger, *sessiontest.Clock) {
	t.Helper()
	clock := new(sessiontest.Clock)
	m := sessiontest.New(t, sessiontest.Procbox(), sessiontest.Now(clock.Now))
	return m, New(m), m.Store(), sessiontest.Ledger(m), clock
}

// TestPreviewLifecycle on a real sandbox with a moved clock: a preview
// resolves while live and its session runs; one past its own expiry does
// not; neither does one whose session is past its expiry, and the sweep
// that expires the session removes the rows (nothing to ledger: a
// preview's TTL is capped at the session's, so they all expired on
// their own); a sandbox that dies drops its session's live previews,
// ledgered as preview.delete "sandbox lost". The token is never ledgered.
func TestPreviewLifecycle(t *testing.T) {
	mgr, m, st, led, skew := previewManager(t)
	ctx := context.Background()
	s, err := mgr.Create(ctx, "", session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	short, err := m.CreatePreview(ctx, "", s.ID, PreviewRequest{Port: 8000, TTLSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	long, err := m.CreatePreview(ctx, "", s.ID, PreviewRequest{Port: 8001})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*Preview{short, long} {
		tg, err := m.ResolvePreview(ctx, p.Token)
		if err != nil || tg.ID != p.ID || tg.Session != s.ID || tg.Port != p.Port {
			t.Fatalf("resolve %s: %+v %v", p.ID, tg, err)
		}
	}
	for _, bad := range []string{"", "pvw-", strings.ToUpper(short.Token), short.Token + "a", PreviewTokenPrefix + strings.Repeat("a", 52)} {
		if _, err := m.ResolvePreview(ctx, bad); !errors.Is(err, ErrPreviewNotFound) {
			t.Errorf("resolve %q: %v", bad, err)
		}
	}
	skew.Set(2 * time.Minute)
	if _, err := m.ResolvePreview(ctx, short.Token); !errors.Is(err, ErrPreviewNotFound) {
		t.Errorf("past its expiry: %v", err)
	}
	if _, err := m.ResolvePreview(ctx, long.Token); err != nil {
		t.Errorf("the other one: %v", err)
	}
	if ps, err := m.Previews(ctx, "", s.ID); err != nil || len(ps) != 1 || ps[0].ID != long.ID || ps[0].Token != "" || ps[0].URL != "" {
		t.Errorf("list: %+v %v", ps, err)
	}
	// Another tenant does not see the session's previews.
	if _, err := m.Previews(ctx, "other", s.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("another tenant's list: %v", err)
	}
	if err := m.DeletePreview(ctx, "other", s.ID, long.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("another tenant's delete: %v", err)
	}
	skew.Set(11 * time.Minute)
	if _, err := m.ResolvePreview(ctx, long.Token); !errors.Is(err, ErrPreviewNotFound) {
		t.Errorf("past the session's expiry, before the sweep: %v", err)
	}
	if n := mgr.Sweep(ctx); n != 1 {
		t.Fatalf("sweep expired %d", n)
	}
	if rows, _ := st.ListPreviews(ctx, s.ID, time.Now()); len(rows) != 0 {
		t.Errorf("rows left after the sweep: %+v", rows)
	}
	// A preview never outlives its session (its TTL is capped), so by the
	// sweep every one has expired on its own: nothing to ledger.
	kinds := sessiontest.LedgerKinds(t, led, s.ID)
	if strings.Count(kinds, "preview.create") != 2 || strings.Contains(kinds, "preview.delete") {
		t.Errorf("ledger: %s", kinds)
	}
	es, _ := led.List(ctx, s.ID, 0, 100)
	for _, e := range es {
		if data := string(e.Data); strings.Contains(data, short.Token) || strings.Contains(data, long.Token) {
			t.Errorf("%s holds a token: %s", e.Kind, data)
		}
	}

	// A sandbox that dies takes its session's previews along.
	skew.Set(0)
	s2, err := mgr.Create(ctx, "", session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	p2, err := m.CreatePreview(ctx, "", s2.ID, PreviewRequest{Port: 8000})
	if err != nil {
		t.Fatal(err)
	}
	testutil.KillSandbox(t, s2.SandboxID)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		es, _ := led.List(ctx, s2.ID, 0, 100)
		if e := es[len(es)-1]; e.Kind == "sandbox.lost" {
			var found bool
			for _, e := range es {
				found = found || e.Kind == "preview.delete" && strings.Contains(string(e.Data), p2.ID) && strings.Contains(string(e.Data), "sandbox lost")
			}
			if !found {
				t.Errorf("no preview.delete \"sandbox lost\": %s", sessiontest.LedgerKinds(t, led, s2.ID))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no sandbox.lost after the sandbox died: %s", sessiontest.LedgerKinds(t, led, s2.ID))
		}
	}
	if _, err := m.ResolvePreview(ctx, p2.Token); !errors.Is(err, ErrPreviewNotFound) {
		t.Errorf("after the sandbox died: %v", err)
	}
}

// TestPreviewConnTable: connections through a preview close when it is
// deleted (closeAll) or when it expires (the timer), and leave the table
// when closed.
func TestPreviewConnTable(t *testing.T) {
	var tb previewConnTable
	pipe := func() (net.Conn, net.Conn) {
		a, b := net.Pipe()
		t.Cleanup(func() { a.Close(); b.Close() })
		return a, b
	}
	closed := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err := c.Read(make([]byte, 1))
		return err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
	}
	a1, a1Peer := pipe()
	a2, a2Peer := pipe()
	b1, b1Peer := pipe()
	ta1, ta2 := tb.track("pv-a", a1, time.Hour), tb.track("pv-a", a2, time.Hour)
	tb1 := tb.track("pv-b", b1, time.Hour)
	tb.closeAll("pv-a")
	if !closed(a1Peer) || !closed(a2Peer) {
		t.Error("closeAll left a connection of the preview open")
	}
	go b1Peer.Write([]byte("x"))
	if _, err := tb1.Read(make([]byte, 1)); err != nil {
		t.Errorf("another preview's connection: %v", err)
	}
	ta1.Close()
	ta2.Close()
	tb1.Close()
	tb.mu.Lock()
	n := len(tb.by)
	tb.mu.Unlock()
	if n != 0 {
		t.Errorf("%d previews left in the table after every connection closed", n)
	}
	c, cPeer := pipe()
	start := time.Now()
	tb.track("pv-c", c, 100*time.Millisecond)
	if !closed(cPeer) || time.Since(start) < 100*time.Millisecond {
		t.Errorf("expiry: closed %v after %v", closed(cPeer), time.Since(start))
	}
	d, dPeer := pipe()
	tb.track("pv-d", d, -time.Second) // expired already
	if !closed(dPeer) {
		t.Error("a connection of an expired preview stayed open")
	}
}
