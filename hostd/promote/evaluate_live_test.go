package promote_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
	"paddock.dev/paddock/errdefs"
	"paddock.dev/paddock/hostd/daemon/daemontest"
)

// liveIDs are the ids of the tenant's sessions that are not deleted.
func liveIDs(t *testing.T, c *client.Client) []string {
	t.Helper()
	ss, err := c.ListSessions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range ss {
		out = append(out, s.ID)
	}
	return out
}

// gone checks that the daemon deleted session id: its record says
// deleted, it has no machine, and a command there is refused.
func gone(t *testing.T, d *daemontest.Daemon, id string) {
	t.Helper()
	s, err := d.Client.GetSession(context.Background(), id)
	if err != nil || s.State != apiv1.StateDeleted {
		t.Errorf("session %s: %v, state %q; want deleted", id, err, s.State)
	}
	if d.Manager().Machine(id) != nil {
		t.Errorf("session %s still has a machine", id)
	}
	if _, err := d.Client.Exec(context.Background(), id, apiv1.ExecRequest{Command: "true"}); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("exec in deleted %s: %v", id, err)
	}
}

// TestEvaluateLive is evaluate on procbox through a real daemon: three
// candidates, one passing its test, one failing it and one that fails to
// run; the passing one wins, the losers are deleted, and promoting the
// winner applies its change to the parent. Then a rollout into 3 runs
// the command in 3 children and leaves none behind.
func TestEvaluateLive(t *testing.T) {
	evaluateLive(t, daemontest.New(t), apiv1.Runtime{})
}

// evaluateLive is the body of the evaluate tests: evaluate of three
// candidates in a new session of rt, promote of the winner, then a
// rollout into 3 children. The winner runs on the parent's backend.
func evaluateLive(t *testing.T, d *daemontest.Daemon, rt apiv1.Runtime) {
	c := d.Client
	ctx := context.Background()
	parent, err := c.CreateSession(ctx, apiv1.CreateRequest{Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	if rt.Backend != "" && parent.Backend != rt.Backend {
		t.Fatalf("the parent runs on %q, want %q", parent.Backend, rt.Backend)
	}
	t0 := time.Now()
	ws := parent.Workspace.Path
	daemontest.Sh(t, c, parent.ID, "cd "+ws+" && echo broken > app.txt && echo keep > other.txt")

	res, err := c.Evaluate(ctx, parent.ID, client.EvaluateRequest{
		Candidates: []string{
			"cd " + ws + " && echo wrong > app.txt",
			"cd " + ws + " && echo fixed > app.txt && echo new > added.txt",
			"/no/such/tool --fix",
		},
		Test: "grep -qx fixed " + ws + "/app.txt",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("evaluate of 3 candidates took %v", time.Since(t0))
	var scores []int
	for _, r := range res.Results {
		scores = append(scores, r.Score)
	}
	if !slices.Equal(scores, []int{10, 100, 0}) || res.Winner != 1 || res.WinnerSession != res.Results[1].Session {
		t.Fatalf("scores %v, winner %d %q: %+v", scores, res.Winner, res.WinnerSession, res.Results)
	}
	if r := res.Results[2]; r.ExitCode == nil || *r.ExitCode != 127 || r.TestExitCode != nil {
		t.Errorf("the candidate that cannot run: %+v", r)
	}
	if r := res.Results[0]; r.TestExitCode == nil || *r.TestExitCode != 1 {
		t.Errorf("the candidate whose test fails: %+v", r)
	}
	for _, i := range []int{0, 2} {
		if !res.Results[i].Deleted {
			t.Errorf("loser %d not deleted: %+v", i, res.Results[i])
		}
		gone(t, d, res.Results[i].Session)
	}
	if live := liveIDs(t, c); !slices.Equal(live, []string{parent.ID, res.WinnerSession}) {
		t.Errorf("sessions after evaluate %v, want the parent and the winner", live)
	}

	if w, err := c.GetSession(ctx, res.WinnerSession); err != nil || w.Backend != parent.Backend {
		t.Errorf("the winner: %v, on %q, want %q", err, w.Backend, parent.Backend)
	}

	// The winner is ready to promote.
	pr, err := c.Promote(ctx, res.WinnerSession, apiv1.PromoteRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := paths(pr.Plan.Apply); got != "added:added.txt,modified:app.txt" {
		t.Errorf("promote applied %s", got)
	}
	if out := daemontest.Sh(t, c, parent.ID, "cd "+ws+" && cat app.txt added.txt other.txt"); out != "fixed\nnew\nkeep\n" {
		t.Errorf("the parent after promoting the winner: %q", out)
	}

	// Rollout: 3 children, 3 results, none left.
	t0 = time.Now()
	ro, err := c.Rollout(ctx, parent.ID, client.RolloutRequest{Count: 3, Command: "cat " + ws + "/app.txt; hostname >/dev/null"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("rollout into 3 took %v", time.Since(t0))
	if len(ro.Runs) != 3 {
		t.Fatalf("rollout runs: %+v", ro.Runs)
	}
	for _, r := range ro.Runs {
		if r.ExitCode == nil || *r.ExitCode != 0 || r.StdoutTail != "fixed\n" || !r.Deleted || r.Session == parent.ID {
			t.Errorf("rollout run %+v", r)
		}
		gone(t, d, r.Session)
	}
	if live := liveIDs(t, c); !slices.Equal(live, []string{parent.ID, res.WinnerSession}) {
		t.Errorf("sessions after rollout %v, want the parent and the winner", live)
	}
}

// TestEvaluateLiveBudget: evaluate and rollout spend the parent's
// max_children. Evaluate of more candidates than the budget holds is
// refused with the budget's 403 and creates nothing; within it, it runs,
// and what it spent is spent even though it deleted the children.
func TestEvaluateLiveBudget(t *testing.T) {
	d := daemontest.New(t)
	c := d.Client
	ctx := context.Background()
	// A session that is not there (or another tenant's) is the fork's
	// 404, and nothing is made.
	if _, err := c.Evaluate(ctx, "ses-nothere", client.EvaluateRequest{Candidates: []string{"true"}}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("evaluate of a missing session: %v", err)
	}
	two := int64(2)
	parent, err := c.CreateSession(ctx, apiv1.CreateRequest{Budget: &apiv1.Budget{MaxChildren: &two}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Evaluate(ctx, parent.ID, client.EvaluateRequest{Candidates: []string{"true", "true", "true"}})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != 403 || !errors.Is(err, errdefs.ErrForbidden) {
		t.Fatalf("evaluate over max_children: %v", err)
	}
	all, err := c.ListAllSessions(ctx)
	if err != nil || len(all) != 1 {
		t.Fatalf("a refused evaluate left sessions: %d %v", len(all), err)
	}
	res, err := c.Evaluate(ctx, parent.ID, client.EvaluateRequest{Candidates: []string{"false", "true"}})
	if err != nil || res.Winner != 1 {
		t.Fatalf("evaluate within max_children: %+v %v", res, err)
	}
	gone(t, d, res.Results[0].Session)
	c.DeleteSession(ctx, res.WinnerSession)
	if _, err := c.Rollout(ctx, parent.ID, client.RolloutRequest{Count: 1, Command: "true"}); !errors.Is(err, errdefs.ErrForbidden) {
		t.Fatalf("rollout with max_children spent: %v", err)
	}
	if live := liveIDs(t, c); !slices.Equal(live, []string{parent.ID}) {
		t.Errorf("sessions left %v", live)
	}
}
