package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestChargeCPU: what a machine's CPU reading grew by is charged once; a
// reading that goes back charges nothing until it passes the last one;
// AddUsage cannot touch it; a missing session is ErrNotFound.
func TestChargeCPU(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	mustCreate(t, s, session("a", "", time.Now()))
	for _, step := range []struct{ reading, want int64 }{
		{1500, 1500}, {1500, 1500}, {4000, 4000}, {200, 4000}, {4100, 4100},
	} {
		got, err := s.ChargeCPU(ctx, "a", step.reading)
		if err != nil || got != step.want {
			t.Errorf("reading %d: charged %d %v, want %d", step.reading, got, err, step.want)
		}
	}
	if u, _ := s.GetUsage(ctx, "a"); u.CPUMS != 4100 {
		t.Errorf("usage %+v, want cpu 4100", u)
	}
	if err := s.AddUsage(ctx, "a", UsageRow{CPUMS: 1}); err == nil {
		t.Error("AddUsage changed the CPU time")
	}
	if _, err := s.ChargeCPU(ctx, "missing", 10); !errors.Is(err, ErrNotFound) {
		t.Errorf("a missing session: %v", err)
	}
	if _, err := s.ChargeCPU(ctx, "a", -1); !errors.Is(err, ErrInvalid) {
		t.Errorf("a negative reading: %v", err)
	}
}
