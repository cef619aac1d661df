package main

import (
	"context"
	"fmt"
	"time"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
)

// benchEvaluate measures an evaluate of 4 candidates (one fork of 4, each
// candidate and its test in its own child at once, 3 losers deleted)
// beside what it cannot beat: the slowest candidate and the test run
// alone in the session, one after the other (goal ≤ 1.5×).
func benchEvaluate(ctx context.Context, cl *client.Client, runs int) {
	n := max(runs/4, 3)
	parent, err := cl.CreateSession(ctx, apiv1.CreateRequest{})
	check(err)
	defer cl.DeleteSession(ctx, parent.ID)
	cands := []string{"sleep 0.25", "sleep 0.5", "sleep 0.75", "sleep 1"}
	const test = "test -d /workspace"
	eval := median(n, func() time.Duration {
		t0 := time.Now()
		res, err := cl.Evaluate(ctx, parent.ID, client.EvaluateRequest{Candidates: cands, Test: test})
		check(err)
		d := time.Since(t0)
		if res.Winner != 0 {
			check(fmt.Errorf("evaluate's winner is %d, not the shortest (0)", res.Winner))
		}
		check(cl.DeleteSession(ctx, res.WinnerSession))
		return d
	})
	alone := median(n, func() time.Duration {
		t0 := time.Now()
		for _, line := range []string{cands[len(cands)-1], test} {
			r, err := cl.Exec(ctx, parent.ID, apiv1.ExecRequest{Command: line})
			check(err)
			if r.ExitCode != 0 {
				check(fmt.Errorf("%s: exit %d", line, r.ExitCode))
			}
		}
		return time.Since(t0)
	})
	row("SDK: evaluate of 4 vs the slowest alone", eval, alone, "sleep 1 + test (goal ≤ 1.5×)")
}
