package main

import (
	"context"
	"fmt"
	"time"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
)

// benchSpeculate measures a speculation of a small command (the copy, the
// run, the scan of its path and the changeset kept) beside what it is
// built on: a plain exec of the same command in the same session.
func benchSpeculate(ctx context.Context, cl *client.Client, runs int) {
	n := max(runs/4, 3)
	s, err := cl.CreateSession(ctx, apiv1.CreateRequest{})
	check(err)
	defer cl.DeleteSession(ctx, s.ID)
	const line = "echo changed > /workspace/spec.txt"
	spec := median(n, func() time.Duration {
		t0 := time.Now()
		cs, err := cl.Speculate(ctx, s.ID, apiv1.SpeculateRequest{Command: line, Paths: []string{"/workspace"}})
		check(err)
		d := time.Since(t0)
		if cs.ExitCode != 0 || len(cs.Files) != 1 {
			check(fmt.Errorf("speculate: exit %d, %d files, not 0 and 1", cs.ExitCode, len(cs.Files)))
		}
		// Rejected, it leaves room for the next (pending ones are capped).
		_, err = cl.DecideChangeset(ctx, s.ID, cs.ID, apiv1.ChangesetDecision{Decision: "reject"})
		check(err)
		return d
	})
	plain := median(n, func() time.Duration {
		t0 := time.Now()
		r, err := cl.Exec(ctx, s.ID, apiv1.ExecRequest{Command: line})
		check(err)
		if r.ExitCode != 0 {
			check(fmt.Errorf("%s: exit %d", line, r.ExitCode))
		}
		return time.Since(t0)
	})
	row("API: speculate vs a plain exec of it", spec, plain, "plain exec of echo > file")
}
