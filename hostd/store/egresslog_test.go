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
