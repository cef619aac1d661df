package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
)

// promoteCommand is `session promote`: a fork child's workspace changes
// carried back to its parent.
func promoteCommand(g *globals, cl func() (*client.Client, error)) *cobra.Command {
	var req apiv1.PromoteRequest
	cmd := &cobra.Command{
		Use:   "promote CHILD [--dry-run] [--plan-id ID] [--skip-conflicts] [--path P]...",
		Short: "Apply a fork child's workspace changes to its parent",
		Long: `Compare the fork child's workspace with what it was at the fork and with
its parent now, and copy the child's changes (regular files under the
workspace, with their permission bits) onto the parent.

Review first with --dry-run: it prints the plan (what would be added,
modified or deleted, what the parent has already, and the conflicts:
paths the parent changed too) and its plan id. Apply with --plan-id ID to
be sure the plan is still the one reviewed (refused, exit 4, when either
session changed since). Any conflict refuses the whole promotion unless
--skip-conflicts applies the rest; --path limits it to files or
directories inside the workspace (repeatable). At most 2000 changes move
at once.

Before the first write the parent gets a disk checkpoint
(pre-promote-<child>-<time>, printed): restore it to undo the promotion.
Memory, processes and files outside the workspace never move. Refused
while commands run on either session. Needs the admin token or the
tenant's token (a session token cannot promote).`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			k, err := cl()
			if err != nil {
				return err
			}
			res, err := k.Promote(c.Context(), args[0], req)
			if err != nil {
				return err
			}
			if g.json {
				enc := json.NewEncoder(c.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(res)
			}
			printPromotion(c, res)
			return nil
		},
	}
	cmd.Flags().BoolVar(&req.DryRun, "dry-run", false, "print the plan and its id; change nothing")
	cmd.Flags().StringVar(&req.PlanID, "plan-id", "", "apply only if the plan is still this one (from --dry-run)")
	cmd.Flags().BoolVar(&req.SkipConflicts, "skip-conflicts", false, "apply the clean paths and leave the conflicts")
	cmd.Flags().StringArrayVar(&req.Paths, "path", nil, "limit to this file or directory inside the workspace (repeatable)")
	return cmd
}

// printPromotion prints a promotion's plan and outcome for people.
func printPromotion(c *cobra.Command, r *apiv1.PromoteResult) {
	w := c.OutOrStdout()
	p := r.Plan
	if len(p.Apply)+len(p.AlreadyApplied)+len(p.Conflicts) > 0 {
		tw := newTable(w, "CHANGE", "PATH", "SIZE", "MODE", "NOTE")
		for _, ch := range p.Apply {
			tw.row(ch.Op, ch.Path, ch.Size, orDash(ch.Mode), "apply")
		}
		for _, ch := range p.AlreadyApplied {
			tw.row(ch.Op, ch.Path, ch.Size, orDash(ch.Mode), "already applied")
		}
		for _, cf := range p.Conflicts {
			tw.row(cf.Op, cf.Path, "-", "-", "conflict: "+cf.Reason)
		}
		tw.flush()
	}
	fmt.Fprintf(w, "plan %s: %d to apply (%d bytes), %d already applied, %d conflicts, %d untouched\n",
		cell(r.PlanID), len(p.Apply), p.Bytes, len(p.AlreadyApplied), len(p.Conflicts), p.Untouched)
	for _, n := range r.NotCarried {
		if n.What == "not_regular_file" {
			fmt.Fprintf(w, "not moved: %s (%s)\n", cell(orDash(n.Path)), cell(n.Note))
		}
	}
	if r.DryRun {
		fmt.Fprintf(w, "dry run: nothing changed; apply with --plan-id %s\n", cell(r.PlanID))
		return
	}
	fmt.Fprintf(w, "applied %d paths to %s", len(r.Applied), cell(r.Parent))
	if len(r.Skipped) > 0 {
		fmt.Fprintf(w, ", skipped %d conflicts", len(r.Skipped))
	}
	fmt.Fprintln(w)
	if r.Checkpoint != "" {
		fmt.Fprintf(w, "undo with: paddock session restore %s %s\n", cell(r.Parent), cell(r.Checkpoint))
	}
}
