package store

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// TestEgressLog: rows go in in order, are listed per session after an
// id, and pruning removes those whose last decision is older than the
// cut and nothing else.
func TestEgressLog(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	rows := []EgressLogRow{
		{Session: "a", Time: t0, Kind: "egress.deny", Host: "x.test", Reason: "no", Count: 1, Data: json.RawMessage(`{"path":"/1"}`)},
		{Session: "a", Time: t0.Add(time.Second), LastTime: t0.Add(time.Hour), Kind: "egress.deny", Host: "x.test", Reason: "no", Count: 41, Summary: true, Data: json.RawMessage(`{}`)},
		{Session: "b", Time: t0.Add(2 * time.Hour), Kind: "dns.deny", Host: "y.test", Count: 1, Data: json.RawMessage(`{}`)},
	}
	if err := s.AppendEgressLog(ctx, rows); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []EgressLogRow{
		{Session: "", Kind: "egress.deny", Count: 1, Data: json.RawMessage(`{}`)},
		{Session: "a", Kind: "egress.deny", Count: 0, Data: json.RawMessage(`{}`)},
		{Session: "a", Kind: "egress.deny", Count: 1, Data: json.RawMessage(`{`)},
	} {
		if err := s.AppendEgressLog(ctx, []EgressLogRow{bad}); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", bad, err)
		}
	}
	got, err := s.ListEgressLog(ctx, "a", 0, 0)
	if err != nil || len(got) != 2 {
		t.Fatalf("list a: %+v %v", got, err)
	}
	if got[0].Count != 1 || got[0].Summary || !got[0].LastTime.Equal(t0) || got[1].Count != 41 || !got[1].Summary ||
		!got[1].LastTime.Equal(t0.Add(time.Hour)) || string(got[0].Data) != `{"path":"/1"}` || got[1].ID <= got[0].ID {
		t.Errorf("rows of a: %+v", got)
	}
	if after, _ := s.ListEgressLog(ctx, "a", got[0].ID, 10); len(after) != 1 || after[0].ID != got[1].ID {
		t.Errorf("after the first id: %+v", after)
	}
	// The summary's last decision is an hour after t0: a cut at 30 min
	// takes only the first row.
	if n, err := s.PruneEgressLog(ctx, t0.Add(30*time.Minute)); err != nil || n != 1 {
		t.Errorf("prune: %d %v, want 1", n, err)
	}
	if left, _ := s.ListEgressLog(ctx, "a", 0, 0); len(left) != 1 || !left[0].Summary {
		t.Errorf("after the prune: %+v", left)
	}
	if left, _ := s.ListEgressLog(ctx, "b", 0, 0); len(left) != 1 {
		t.Errorf("b after the prune: %+v", left)
	}
}

// TestTrimEgressLog: trimming keeps a session's newest rows within the
// budget, removes the oldest, counts them (across trims) in one
// egress.pruned row, and leaves other sessions alone.
func TestTrimEgressLog(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	var rows []EgressLogRow
	for i := range 100 {
		rows = append(rows, EgressLogRow{Session: "a", Time: t0.Add(time.Duration(i) * time.Second), Kind: "egress.deny",
			Host: "x.test", Reason: "no", Count: 2, Data: json.RawMessage(`{"path":"/` + string(rune('a'+i%26)) + `"}`)})
	}
	other := EgressLogRow{Session: "b", Time: t0, Kind: "dns.deny", Host: "y.test", Count: 1, Data: json.RawMessage(`{}`)}
	if err := s.AppendEgressLog(ctx, append(rows, other)); err != nil {
		t.Fatal(err)
	}
	per := rows[0].Size()
	if n, err := s.EgressLogBytes(ctx, "a"); err != nil || n != 100*per {
		t.Fatalf("size %d %v, want %d", n, err, 100*per)
	}
	keep := 40*per + 512
	removed, size, err := s.TrimEgressLog(ctx, "a", keep, t0.Add(time.Hour))
	if err != nil || removed != 60 || size > keep {
		t.Fatalf("trim: removed %d, size %d, %v; want 60 removed, ≤ %d", removed, size, err, keep)
	}
	// A second trim adds to the count.
	if _, _, err := s.TrimEgressLog(ctx, "a", 20*per+512, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	got, _ := s.ListEgressLog(ctx, "a", 0, 0)
	last := got[len(got)-1]
	if len(got) != 21 || got[0].Host != "x.test" || !got[0].Time.Equal(t0.Add(80*time.Second)) ||
		last.Kind != EgressLogPrunedKind || last.Count != 80 || !json.Valid(last.Data) {
		t.Errorf("after two trims: %d rows, first at %v, last %+v", len(got), got[0].Time, last)
	}
	var d struct {
		Decisions int64 `json:"decisions_pruned"`
	}
	_ = json.Unmarshal(last.Data, &d)
	if d.Decisions != 160 {
		t.Errorf("decisions pruned %d, want 160", d.Decisions)
	}
	if n, _ := s.EgressLogBytes(ctx, "a"); n > 20*per+512 {
		t.Errorf("size after %d", n)
	}
	if b, _ := s.ListEgressLog(ctx, "b", 0, 0); len(b) != 1 {
		t.Errorf("session b has %d rows", len(b))
	}
}
