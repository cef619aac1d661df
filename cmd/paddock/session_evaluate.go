package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"paddock.dev/paddock/client"
)

// exitNoneWon is the exit code of an evaluate where no candidate passed,
// and of a rollout where a child's command failed or never ran: the
// verb itself worked, the commands did not.
const exitNoneWon = 8

// orchestrateCommands are `session evaluate` and `session rollout`: the
// SDK's orchestration over fork, exec and delete (client.Evaluate,
// client.Rollout).
func orchestrateCommands(g *globals, cl func() (*client.Client, error)) []*cobra.Command {
	printJSON := func(c *cobra.Command, v any) error {
		enc := json.NewEncoder(c.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	var ereq client.EvaluateRequest
	evaluate := &cobra.Command{
		Use:   "evaluate ID --candidate CMD [--candidate CMD]... [--test CMD] [--keep-all] [--timeout D]",
		Short: "Try candidates in fork children, test each, keep the winner",
		Long: `Fork the session into one child per candidate (1 to 16), run each
candidate in its own child and then, if it exited 0, the test, all children
at once. Each is scored 100 (the test passed; with no --test, the candidate
exited 0), 10 (the candidate ran but the test failed) or 0 (the candidate
failed or never ran). The winner is the best score, then the shortest run,
then the lowest index, and exists only when something passed. Every child
but the winner is deleted unless --keep-all.

Review and apply the winner with:
  paddock session promote WINNER --dry-run

The fork spends the session's max_children budget; a refused fork creates
no child. Each command gets --timeout (default 5m, at most 1h). Exits 0
with a winner, 8 when no candidate passed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			k, err := cl()
			if err != nil {
				return err
			}
			res, err := k.Evaluate(c.Context(), args[0], ereq)
			if err != nil {
				return err
			}
			if g.json {
				err = printJSON(c, res)
			} else {
				printEvaluation(c, res)
			}
			if err == nil && res.Winner < 0 {
				return exitCodeError(exitNoneWon)
			}
			return err
		},
	}
	evaluate.Flags().StringArrayVar(&ereq.Candidates, "candidate", nil, "a shell line to try, in a child of its own (repeatable, 1-16)")
	evaluate.Flags().StringVar(&ereq.Test, "test", "", "the shell line run after each candidate that exited 0")
	evaluate.Flags().BoolVar(&ereq.KeepAll, "keep-all", false, "keep every child, not only the winner")
	evaluate.Flags().DurationVar(&ereq.Timeout, "timeout", 0, "each command's timeout (default 5m, at most 1h)")

	var rreq client.RolloutRequest
	rollout := &cobra.Command{
		Use:   "rollout ID --count N [--keep] [--timeout D] -- CMD",
		Short: "Fork into N children and run one command in each",
		Long: `Fork the session into --count children (1 to 32), run the command in
every child at once, print each run and delete the children unless --keep.
The fork spends the session's max_children budget; a refused fork creates
no child. Exits 0 when the command exited 0 in every child, 8 otherwise.`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			k, err := cl()
			if err != nil {
				return err
			}
			rreq.Command = strings.Join(args[1:], " ")
			res, err := k.Rollout(c.Context(), args[0], rreq)
			if err != nil {
				return err
			}
			if g.json {
				err = printJSON(c, res)
			} else {
				printRollout(c, res)
			}
			if err != nil {
				return err
			}
			for _, r := range res.Runs {
				if r.ExitCode == nil || *r.ExitCode != 0 || r.TimedOut {
					return exitCodeError(exitNoneWon)
				}
			}
			return nil
		},
	}
	rollout.Flags().IntVar(&rreq.Count, "count", 0, "children (1-32)")
	rollout.Flags().BoolVar(&rreq.Keep, "keep", false, "keep the children")
	rollout.Flags().DurationVar(&rreq.Timeout, "timeout", 0, "the command's timeout (default 5m, at most 1h)")
	return []*cobra.Command{evaluate, rollout}
}

// exitText is an exit code for a table ("-" when the command never ran).
func exitText(code *int, timedOut bool) string {
	switch {
	case code == nil:
		return "-"
	case timedOut:
		return fmt.Sprintf("%d (timed out)", *code)
	}
	return fmt.Sprint(*code)
}

// lastLine is the last non-empty line of s, for a table cell.
func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if r := []rune(s); len(r) > 60 {
		s = string(r[:57]) + "..."
	}
	return s
}

// childState says what became of a child.
func childState(deleted bool, deleteErr string) string {
	switch {
	case deleteErr != "":
		return "delete failed: " + deleteErr
	case deleted:
		return "deleted"
	}
	return "kept"
}

// printEvaluation prints every candidate's result and the winner.
func printEvaluation(c *cobra.Command, r *client.EvaluateResult) {
	w := c.OutOrStdout()
	tw := newTable(w, "#", "SCORE", "EXIT", "TEST", "MS", "CHILD", "STATE", "CANDIDATE", "LAST OUTPUT")
	for _, x := range r.Results {
		last := lastLine(x.StderrTail)
		if x.StdoutTail != "" {
			last = lastLine(x.StdoutTail)
		}
		if x.Error != "" {
			last = x.Error
		}
		tw.row(x.Index, x.Score, exitText(x.ExitCode, x.TimedOut && x.TestExitCode == nil), exitText(x.TestExitCode, x.TimedOut && x.TestExitCode != nil),
			x.DurationMS, x.Session, childState(x.Deleted, x.DeleteError), lastLine(x.Command), last)
	}
	tw.flush()
	if r.Winner < 0 {
		fmt.Fprintln(w, "no candidate passed: no winner")
		return
	}
	fmt.Fprintf(w, "winner: candidate %d, session %s\n", r.Winner, cell(r.WinnerSession))
	fmt.Fprintf(w, "review it with: paddock session promote %s --dry-run\n", cell(r.WinnerSession))
}

// printRollout prints each child's run.
func printRollout(c *cobra.Command, r *client.RolloutResult) {
	tw := newTable(c.OutOrStdout(), "#", "EXIT", "MS", "CHILD", "STATE", "LAST OUTPUT")
	for _, x := range r.Runs {
		last := lastLine(x.StderrTail)
		if x.StdoutTail != "" {
			last = lastLine(x.StdoutTail)
		}
		if x.Error != "" {
			last = x.Error
		}
		tw.row(x.Index, exitText(x.ExitCode, x.TimedOut), x.DurationMS, x.Session, childState(x.Deleted, x.DeleteError), last)
	}
	tw.flush()
}
