package store

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// TestVMEvents: rows are listed per session in order, after a time or
// after an id; bad rows are refused; past MaxVMEventsPerSession the
// oldest of that session go and no other session's.
func TestVMEvents(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for i, k := range []string{"boot", "checkpoint", "fork"} {
		if err := s.AppendVMEvent(ctx, VMEventRow{Session: "a", Time: t0.Add(time.Duration(i) * time.Second), Kind: k, Data: json.RawMessage(`{"n":1}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AppendVMEvent(ctx, VMEventRow{Session: "b", Time: t0, Kind: "boot"}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []VMEventRow{{Session: "", Kind: "boot"}, {Session: "a"}, {Session: "a", Kind: "boot", Data: json.RawMessage(`{`)}} {
		if err := s.AppendVMEvent(ctx, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", bad, err)
		}
	}
	all, err := s.ListVMEvents(ctx, "a", time.Time{})
	if err != nil || len(all) != 3 || all[0].Kind != "boot" || all[2].Kind != "fork" || string(all[1].Data) != `{"n":1}` || !all[1].Time.Equal(t0.Add(time.Second)) {
		t.Fatalf("list a: %+v %v", all, err)
	}
	if got, _ := s.ListVMEvents(ctx, "a", t0.Add(time.Second)); len(got) != 1 || got[0].Kind != "fork" {
		t.Errorf("since t0+1s: %+v, want fork only", got)
	}
	if got, _ := s.ListVMEventsAfter(ctx, "a", all[0].ID); len(got) != 2 || got[0].Kind != "checkpoint" {
		t.Errorf("after the first id: %+v", got)
	}
	if got, _ := s.ListVMEventsTail(ctx, "a", 2); len(got) != 2 || got[0].Kind != "checkpoint" || got[1].Kind != "fork" {
		t.Errorf("the newest 2: %+v, want checkpoint, fork", got)
	}
	// The cap.
	for i := range MaxVMEventsPerSession {
		if err := s.AppendVMEvent(ctx, VMEventRow{Session: "a", Time: t0.Add(time.Hour + time.Duration(i)*time.Millisecond), Kind: "oom"}); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := s.ListVMEvents(ctx, "a", time.Time{})
	if len(got) != MaxVMEventsPerSession || got[0].Kind != "oom" {
		t.Errorf("past the cap: %d rows, first %q; want %d, the oldest gone", len(got), got[0].Kind, MaxVMEventsPerSession)
	}
	if got, _ := s.ListVMEvents(ctx, "b", time.Time{}); len(got) != 1 {
		t.Errorf("another session's rows after a's trim: %d", len(got))
	}
}
