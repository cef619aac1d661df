package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestRewindRing: a ring goes in and comes back as it was (points in
// order, flags, times); a second put replaces it whole; other sessions'
// rings are not touched; bad rings and rings over the limit are refused;
// a delete leaves nothing.
func TestRewindRing(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	pt := func(tag string, pinned bool) RewindPointRow {
		return RewindPointRow{Tag: tag, Kind: "exec", Command: "echo " + tag, Pinned: pinned,
			Snapshot: json.RawMessage(`{"id":"snap-` + tag + `"}`), CreatedAt: t0}
	}
	r := RewindRing{Session: "a", Config: json.RawMessage(`{"enabled":true}`), Seq: 3,
		Points: []RewindPointRow{pt("rw-2", false), pt("rw-1", true), pt("rw-3", false)}}
	if err := s.PutRewindRing(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := s.PutRewindRing(ctx, RewindRing{Session: "b", Config: json.RawMessage(`{}`), Points: []RewindPointRow{pt("rw-1", false)}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetRewindRing(ctx, "a")
	if err != nil || got.Seq != 3 || string(got.Config) != `{"enabled":true}` || len(got.Points) != 3 {
		t.Fatalf("get: %+v %v", got, err)
	}
	if got.Points[0].Tag != "rw-2" || got.Points[1].Tag != "rw-1" || !got.Points[1].Pinned || got.Points[0].Pinned ||
		got.Points[2].Command != "echo rw-3" || string(got.Points[2].Snapshot) != `{"id":"snap-rw-3"}` || !got.Points[0].CreatedAt.Equal(t0) {
		t.Errorf("points: %+v", got.Points)
	}
	r.Seq, r.Points = 4, []RewindPointRow{pt("rw-4", false)}
	if err := s.PutRewindRing(ctx, r); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetRewindRing(ctx, "a"); got.Seq != 4 || len(got.Points) != 1 || got.Points[0].Tag != "rw-4" {
		t.Errorf("after a second put: %+v", got)
	}
	if got, _ := s.GetRewindRing(ctx, "b"); len(got.Points) != 1 {
		t.Errorf("b touched: %+v", got)
	}
	big := RewindRing{Session: "a", Config: json.RawMessage(`{}`)}
	for i := range MaxRewindPointsStored + 1 {
		big.Points = append(big.Points, pt(fmt.Sprintf("rw-%d", i), false))
	}
	if err := s.PutRewindRing(ctx, big); !errors.Is(err, ErrTooLarge) {
		t.Errorf("%d points: %v, want ErrTooLarge", len(big.Points), err)
	}
	for _, bad := range []RewindRing{{Config: json.RawMessage(`{}`)}, {Session: "a", Config: json.RawMessage(`{`)},
		{Session: "a", Config: json.RawMessage(`{}`), Points: []RewindPointRow{{Snapshot: json.RawMessage(`{}`)}}}} {
		if err := s.PutRewindRing(ctx, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", bad, err)
		}
	}
	if got, _ := s.GetRewindRing(ctx, "a"); got.Seq != 4 || len(got.Points) != 1 {
		t.Errorf("a refused put changed the ring: %+v", got)
	}
	if err := s.DeleteRewindRing(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetRewindRing(ctx, "a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("after delete: %v, want ErrNotFound", err)
	}
	var n int
	s.DB().QueryRow(`SELECT COUNT(*) FROM rewind_points WHERE session = 'a'`).Scan(&n)
	if n != 0 {
		t.Errorf("%d points left after delete", n)
	}
}
