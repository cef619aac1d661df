package api_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
	"paddock.dev/paddock/hostd/ledger"
)

// fillLedger appends n entries to id's ledger, straight through the
// ledger (the API has no verb that writes 10000 entries quickly).
func fillLedger(t *testing.T, led *ledger.Ledger, id string, n int) {
	t.Helper()
	start := time.Now()
	for i := range n {
		if _, err := led.Append(t.Context(), id, "test.fill", "test", map[string]int{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d ledger entries in %s", n, time.Since(start))
}

// TestEventsPages: GET .../events on a ledger longer than one page
// (10000 entries): without a query the oldest page with ledger_more set;
// ?tail=N the newest N (the newest entry included, which the first page
// lacks); ?after=SEQ&limit=N the entries after SEQ, ledger_more unset at
// the end; since still works. tail, limit and after out of range, or
// combined with what they do not go with, are 400 invalid_argument;
// another tenant gets 404 and a session token of another session 403.
func TestEventsPages(t *testing.T) {
	d := fakeDaemon(t)
	ctx := t.Context()
	s, err := d.c.CreateSession(ctx, apiv1.CreateRequest{Agent: "pages"})
	if err != nil {
		t.Fatal(err)
	}
	fillLedger(t, d.led, s.ID, ledger.MaxList+5)
	marker, err := d.led.Append(ctx, s.ID, "test.newest", "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	page := func(q client.EventsQuery) *apiv1.Events {
		t.Helper()
		ev, err := d.c.EventsPage(ctx, s.ID, q)
		if err != nil {
			t.Fatalf("%+v: %v", q, err)
		}
		return ev
	}
	first := page(client.EventsQuery{})
	if len(first.Ledger) != ledger.MaxList || first.Ledger[0].Seq != 1 || !first.LedgerMore {
		t.Errorf("no query: %d entries from seq %d, more %v", len(first.Ledger), first.Ledger[0].Seq, first.LedgerMore)
	}
	tail := page(client.EventsQuery{Tail: 3})
	if len(tail.Ledger) != 3 || tail.Ledger[2].Seq != marker.Seq || tail.Ledger[2].Kind != "test.newest" || tail.Ledger[0].Seq != marker.Seq-2 {
		t.Errorf("tail=3: %+v, want up to the newest, seq %d", tail.Ledger, marker.Seq)
	}
	if len(tail.VMEvents) > 3 {
		t.Errorf("tail=3: %d vm events", len(tail.VMEvents))
	}
	rest := page(client.EventsQuery{After: first.Ledger[len(first.Ledger)-1].Seq, Limit: 4})
	if len(rest.Ledger) != 4 || rest.Ledger[0].Seq != int64(ledger.MaxList)+1 || !rest.LedgerMore {
		t.Errorf("after the first page, limit 4: %d entries, more %v", len(rest.Ledger), rest.LedgerMore)
	}
	end := page(client.EventsQuery{After: rest.Ledger[3].Seq, Limit: 100})
	if len(end.Ledger) == 0 || end.Ledger[len(end.Ledger)-1].Seq != marker.Seq || end.LedgerMore {
		t.Errorf("the last page: %d entries, more %v", len(end.Ledger), end.LedgerMore)
	}
	since := page(client.EventsQuery{Since: marker.Time.Add(-time.Nanosecond)})
	if len(since.Ledger) == 0 || since.Ledger[len(since.Ledger)-1].Seq != marker.Seq {
		t.Errorf("since just before the newest: %d entries", len(since.Ledger))
	}

	get := func(query, tok string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.url+"/v1/agents/sessions/"+s.ID+"/events?"+query, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e struct{ Code string }
		json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, e.Code
	}
	max := strconv.Itoa(ledger.MaxList)
	over := strconv.Itoa(ledger.MaxList + 1)
	for _, q := range []string{"tail=" + over, "tail=0", "tail=x", "limit=" + over, "limit=0", "after=-1",
		"tail=5&limit=5", "tail=5&after=3", "tail=5&since=2026-01-02T15:04:05Z", "after=3&since=2026-01-02T15:04:05Z"} {
		if code, c := get(q, token); code != http.StatusBadRequest || c != "invalid_argument" {
			t.Errorf("?%s: %d %q, want 400 invalid_argument", q, code, c)
		}
	}
	if code, _ := get("tail="+max, token); code != http.StatusOK {
		t.Errorf("?tail=%s: %d", max, code)
	}
	other, err := d.c.CreateSession(ctx, apiv1.CreateRequest{Agent: "other"})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := d.c.MintToken(ctx, other.ID, apiv1.TokenRequest{Ops: []string{apiv1.OpRead}})
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := get("tail=1", tok.Token); code != http.StatusForbidden {
		t.Errorf("another session's token: %d, want 403", code)
	}
	toks := withTenants(t, d, "beta")
	if code, _ := get("tail=1", toks["beta"]); code != http.StatusNotFound {
		t.Errorf("another tenant: %d, want 404", code)
	}
}
