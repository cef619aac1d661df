package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
	"paddock.dev/paddock/errdefs"
)

// replayCommand is `session replay`: a session's exec commands run again,
// in order, in another session (or listed, with --dry-run).
func replayCommand(g *globals, cl func() (*client.Client, error)) *cobra.Command {
	var (
		req       apiv1.ReplayRequest
		keepGoing bool
		timeout   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "replay ID (--target T | --dry-run)",
		Short: "Run a session's exec commands again, in order, in another session",
		Long: `Run the exec commands recorded in session ID's ledger, in order, in the
session --target, each through the target's own exec: its process
policy, approvals, budget and confinement apply, and its ledger records
each command and one replay entry. --dry-run lists the steps and what is
skipped (file writes, uploads, deletes, jobs, git steps, promotions and
restores cannot be redone: the ledger keeps what was done, not the
content) and runs nothing; it needs no target.

--since and --until bound the ledger entries replayed (seq numbers, as
'paddock session timeline' shows them; both included). The replay stops
at the first step that exits non-zero (--keep-going goes on), and always
at a step the target refuses or holds for approval; it then prints where
to go on (--since), with --approval-id once an operator approved the
held step. At most 500 commands per call.

Exit status: 0 when every step ran and exited 0 (or a limit stopped it
between steps), 1 when a step failed, else the status of the target's
refusal (5 refused, 6 held for approval, 4 conflict, ...).`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if req.Target == "" && !req.DryRun {
				return usageError{fmt.Errorf("give --target SESSION, or --dry-run to list the steps")}
			}
			if keepGoing {
				no := false
				req.StopOnFailure = &no
			}
			if timeout != 0 {
				if timeout < time.Second || timeout%time.Second != 0 {
					return usageError{fmt.Errorf("--timeout %s: give whole seconds, at least 1s", timeout)}
				}
				req.TimeoutSeconds = int(timeout / time.Second)
			}
			k, err := cl()
			if err != nil {
				return err
			}
			r, err := k.Replay(c.Context(), args[0], req)
			if err != nil {
				return err
			}
			if g.json {
				enc := json.NewEncoder(c.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(r); err != nil {
					return err
				}
			} else {
				printReplay(c, r)
			}
			return replayExit(r)
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Target, "target", "", "the session the commands run in")
	f.BoolVar(&req.DryRun, "dry-run", false, "list the steps and what is skipped; run nothing")
	f.Int64Var(&req.Since, "since", 0, "the first ledger seq to replay")
	f.Int64Var(&req.Until, "until", 0, "the last ledger seq to replay")
	f.BoolVar(&keepGoing, "keep-going", false, "go on past a step that exits non-zero")
	f.DurationVar(&timeout, "timeout", 0, "each command's timeout (default 5m, at most 1h)")
	f.StringVar(&req.ApprovalID, "approval-id", "", "an approved request for the first step (after a replay held there)")
	return cmd
}

// printReplay is the answer as a table for people: one row per step,
// the skipped entries, and why it stopped.
func printReplay(c *cobra.Command, r *apiv1.ReplayResult) {
	w := c.OutOrStdout()
	num := func(p *int) string {
		if p == nil {
			return "-"
		}
		return strconv.Itoa(*p)
	}
	tw := newTable(w, "SEQ", "STATUS", "EXIT", "RECORDED", "SAME", "COMMAND")
	for _, s := range r.Steps {
		same := "-"
		if s.SameExitCode != nil {
			same = map[bool]string{true: "yes", false: "NO"}[*s.SameExitCode]
		}
		tw.row(s.Seq, s.Status, num(s.ExitCode), num(s.RecordedExitCode), same, clipCell(s.Command, 60))
	}
	tw.flush()
	if len(r.Skipped) > 0 {
		fmt.Fprintln(w)
		st := newTable(w, "SKIPPED", "KIND", "REASON")
		for _, s := range r.Skipped {
			st.row(s.Seq, s.Kind, s.Reason)
		}
		st.flush()
		if r.SkippedOmitted > 0 {
			fmt.Fprintf(w, "(and %d more skipped)\n", r.SkippedOmitted)
		}
	}
	verb := "ran"
	if r.DryRun {
		verb = "planned"
	}
	n := r.Ran
	if r.DryRun {
		n = len(r.Steps)
	}
	fmt.Fprintf(w, "\n%s %d, failed %d, skipped %d", verb, n, r.Failed, len(r.Skipped)+r.SkippedOmitted)
	if st := r.Stopped; st != nil {
		fmt.Fprintf(w, "; stopped (%s)", st.Reason)
		if st.Seq != 0 {
			fmt.Fprintf(w, " at seq %d", st.Seq)
		}
		if st.Status != 0 {
			fmt.Fprintf(w, ": %d %s", st.Status, st.Code)
		}
		fmt.Fprintf(w, "\n  %s", cell(st.Error))
		if st.ApprovalID != "" {
			fmt.Fprintf(w, "\n  approve it: paddock session approve %s %s", cell(r.Target), cell(st.ApprovalID))
		}
	}
	fmt.Fprintln(w)
	if r.NextSince != 0 {
		more := ""
		if r.Stopped != nil && r.Stopped.ApprovalID != "" {
			more = " --approval-id " + cell(r.Stopped.ApprovalID)
		}
		where := "--target " + cell(r.Target)
		if r.DryRun {
			where = "--dry-run"
		}
		fmt.Fprintf(w, "go on with: paddock session replay %s %s --since %d%s\n", cell(r.Source), where, r.NextSince, more)
	}
}

// replayExit is the exit status of a replay (see the command's help).
func replayExit(r *apiv1.ReplayResult) error {
	st := r.Stopped
	switch {
	case st == nil || st.Reason == apiv1.ReplayStopLimit:
		if r.Failed > 0 {
			return exitCodeError(exitError)
		}
		return nil
	case st.Reason == apiv1.ReplayStopFailure:
		return exitCodeError(exitError)
	}
	return exitCodeError(exitCode(errdefs.FromHTTP(st.Status, st.Code, st.Error)))
}
