package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
	"paddock.dev/paddock/errdefs"
)

// approvalCommands are `session approvals`, `approve` and `deny`: commands
// a session's process policy held for an operator (ask rules).
func approvalCommands(g *globals, cl func() (*client.Client, error)) []*cobra.Command {
	printJSON := func(c *cobra.Command, v any) error {
		enc := json.NewEncoder(c.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	list := &cobra.Command{
		Use:   "approvals ID",
		Short: "List a session's approval requests (commands held by an ask rule)",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			k, err := cl()
			if err != nil {
				return err
			}
			as, err := k.Approvals(c.Context(), args[0])
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(c, as)
			}
			tw := newTable(c.OutOrStdout(), "ID", "STATE", "KIND", "COMMAND", "MATCHED", "REQUESTER", "DECIDER", "EXPIRES")
			for _, a := range as {
				tw.row(a.ID, a.State, a.Kind, clipCell(a.Command, 48), a.Matched,
					a.Requester, orDash(a.Decider), a.ExpiresAt.Local().Format(time.DateTime))
			}
			return tw.flush()
		},
	}
	var note string
	decide := func(approve bool) *cobra.Command {
		verb, short := "deny", "Deny a held command: retries with it are refused"
		if approve {
			verb, short = "approve", "Approve a held command: it may run once, exactly as asked"
		}
		cmd := &cobra.Command{
			Use:   verb + " ID APPROVAL",
			Short: short,
			Long: short + `.

Only the admin may decide (the approval Rego module says who may; a
session token never can, so an agent cannot approve its own command). The
agent then repeats its request with --approval-id APPROVAL, or a request
waiting with --approval-wait wakes and runs.`,
			Args: cobra.ExactArgs(2),
			RunE: func(c *cobra.Command, args []string) error {
				k, err := cl()
				if err != nil {
					return err
				}
				f := k.Deny
				if approve {
					f = k.Approve
				}
				a, err := f(c.Context(), args[0], args[1], note)
				if err != nil {
					return err
				}
				if g.json {
					return printJSON(c, a)
				}
				fmt.Fprintf(c.OutOrStdout(), "%s %s: %s\n", cell(a.ID), cell(a.State), cell(a.Command))
				return nil
			},
		}
		cmd.Flags().StringVar(&note, "note", "", "a note kept with the decision (at most 512 bytes)")
		return cmd
	}
	return []*cobra.Command{list, decide(true), decide(false)}
}

// heldError is a command that waits for an operator (428): the CLI exits
// with exitHeld after saying how to approve it.
type heldError struct {
	session string
	hold    *apiv1.Hold
}

// Unwrap makes it of the approval_required kind: exitCode gives exitHeld.
func (e heldError) Unwrap() error { return errdefs.ErrApprovalRequired }

func (e heldError) Error() string {
	return fmt.Sprintf("held for approval: %s matched %s; approve with `paddock session approve %s %s`, then repeat with --approval-id %s (before %s)",
		e.hold.Summary, e.hold.Matched, e.session, e.hold.ApprovalID, e.hold.ApprovalID, e.hold.ExpiresAt.Local().Format(time.DateTime))
}

func clipCell(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
