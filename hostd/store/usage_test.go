package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestUsage(t *testing.T) {
	s, path := openTest(t)
	ctx := context.Background()
	mustCreate(t, s, session("a", "", time.Now()))
	if u, err := s.GetUsage(ctx, "a"); err != nil || u != (UsageRow{}) {
		t.Fatalf("fresh usage: %+v %v", u, err)
	}
	for i := 0; i < 3; i++ {
		if err := s.AddUsage(ctx, "a", UsageRow{Execs: 1, ExecMS: 10}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AddUsage(ctx, "a", UsageRow{Jobs: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddUsage(ctx, "missing", UsageRow{Execs: 1}); !errors.Is(err, ErrNotFound) {
		t.Errorf("usage of a missing session: %v", err)
	}
	if err := s.AddUsage(ctx, "a", UsageRow{Execs: -1}); err == nil {
		t.Error("usage went down")
	}
	before, _ := s.GetSession(ctx, "a")
	if err := s.AddUsage(ctx, "a", UsageRow{Execs: 0}); err != nil {
		t.Fatal(err)
	}
	if row, _ := s.GetSession(ctx, "a"); row.Revision != before.Revision {
		t.Errorf("counting changed the revision: %d", row.Revision)
	}
	// Kept across a reopen.
	s.Close()
	s2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if u, err := s2.GetUsage(ctx, "a"); err != nil || u != (UsageRow{Execs: 3, ExecMS: 30, Jobs: 1}) {
		t.Errorf("usage after a reopen: %+v %v", u, err)
	}
	// Cleanup keeps the record and drops the rest.
	if err := s2.PutJob(ctx, JobRow{SessionID: "a", JobID: "j", Command: "true", Record: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := s2.CleanupSession(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if u, _ := s2.GetUsage(ctx, "a"); u != (UsageRow{}) {
		t.Errorf("usage after cleanup: %+v", u)
	}
	if jobs, _ := s2.ListJobs(ctx, "a"); len(jobs) != 0 {
		t.Errorf("jobs after cleanup: %v", jobs)
	}
	if _, err := s2.GetSession(ctx, "a"); err != nil {
		t.Errorf("cleanup removed the record: %v", err)
	}
}
