package api_test

import (
	"context"
	"testing"
	"time"

	"paddock.dev/paddock/hostd/session"
)

// TestReviewExecDisconnectNotCounted (found by review): a caller that
// drops the connection while its exec runs used to get the exec's unit
// back and leave no ledger entry, although the command ran; with
// max_execs 1 any number of commands could run. Now the dropped exec keeps
// its unit, its time counts, and the ledger records it as interrupted.
func TestReviewExecDisconnectNotCounted(t *testing.T) {
	d := newTestDaemon(t)
	s := budgetSession(t, d, `{"max_execs":1}`)
	for i := range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		_, err := d.c.Exec(ctx, s.ID, session.ExecRequest{Command: "echo x >> /workspace/ran; sleep 5"})
		cancel()
		if err == nil {
			t.Fatalf("exec %d finished", i)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if _, err := d.c.Exec(context.Background(), s.ID, session.ExecRequest{Command: "true"}); status(err) != 403 {
		t.Errorf("max_execs 1: a third exec after a dropped one: %v", err)
	}
	got, _ := d.c.GetSession(context.Background(), s.ID)
	if got.Usage.Execs != 1 || got.Usage.ExecMS < 1000 {
		t.Errorf("usage after a dropped exec: %+v", got.Usage)
	}
	_, data := ledgerOf(t, d.c, s.ID)
	interrupted := 0
	for _, e := range data {
		if e["interrupted"] == true {
			interrupted++
		}
	}
	if interrupted != 1 {
		t.Errorf("ledger: %d interrupted exec entries, want 1: %v", interrupted, data)
	}
}
