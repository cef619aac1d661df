package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
)

// rewindCommand is `session rewind ID [on|off|undo|pin TAG|branch TAG|bisect TEST]`:
// a session's automatic points before commands, undo, pins, branches and
// bisect.
func rewindCommand(g *globals, cl func() (*client.Client, error)) *cobra.Command {
	var (
		maxPoints       int
		diskOnly, unpin bool
		triggers        string
		steps           int
		to, good, bad   string
		timeout         time.Duration
		count           int
		identity        string
	)
	printJSON := func(c *cobra.Command, v any) error {
		enc := json.NewEncoder(c.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	printPoints := func(c *cobra.Command, rw *apiv1.Rewind) error {
		if g.json {
			return printJSON(c, rw)
		}
		state := "off"
		if rw.Config.Enabled {
			state = "on"
		}
		fmt.Fprintf(c.ErrOrStderr(), "rewind %s: at most %d points, taken before %s\n", state, rw.Config.MaxPoints, strings.Join(rw.Config.Triggers, ", "))
		tw := newTable(c.OutOrStdout(), "TAG", "TRIGGER", "PINNED", "MEMORY", "CREATED", "COMMAND")
		for _, p := range rw.Points {
			tw.row(p.Tag, p.Trigger, p.Pinned, p.Memory, p.CreatedAt.Format(time.RFC3339), p.Command)
		}
		return tw.flush()
	}
	cmd := &cobra.Command{
		Use:   "rewind ID [on|off|undo|pin TAG|branch TAG|bisect TEST]",
		Short: "List, turn on or off, undo to, pin, branch from and bisect a session's rewind points",
		Long: `With rewind on, the daemon takes a point (a snapshot of the machine) just
before each command of the kinds --triggers names (exec by default; job,
file and git too), and keeps the last --max-points (default 10, at most
50) of them. Points cost a snapshot each, and outlive a daemon restart.

  paddock session rewind ID                      list the config and points
  paddock session rewind ID on [--max-points N] [--disk-only] [--triggers exec,file,git]
  paddock session rewind ID off
  paddock session rewind ID undo [--steps N | --to TAG]
  paddock session rewind ID pin TAG [--unpin]
  paddock session rewind ID branch TAG [--count N] [--identity MODE]
  paddock session rewind ID bisect TEST [--good TAG] [--bad TAG] [--timeout 60s]

undo restores the machine to the point and drops it and the newer
unpinned ones. A pinned point is never evicted; one slot stays free.
branch starts N child sessions (default 1) from the point and leaves the
session as it is; the children cannot be promoted (they have no baseline).
bisect runs TEST (a shell line, exit 0 = good) in the states it picks and
prints the command that broke it; the session ends as it started.`,
		Args: cobra.RangeArgs(1, 3),
		RunE: func(c *cobra.Command, args []string) error {
			id, verb := args[0], ""
			if len(args) > 1 {
				verb = args[1]
			}
			// Each flag belongs to one verb.
			owner := map[string]string{"max-points": "on", "disk-only": "on", "triggers": "on", "steps": "undo", "to": "undo",
				"unpin": "pin", "count": "branch", "identity": "branch", "good": "bisect", "bad": "bisect", "timeout": "bisect"}
			var flagErr error
			c.Flags().Visit(func(f *pflag.Flag) {
				if v, ok := owner[f.Name]; ok && v != verb && flagErr == nil {
					flagErr = usageError{fmt.Errorf("--%s goes with `rewind ID %s`", f.Name, v)}
				}
			})
			if flagErr != nil {
				return flagErr
			}
			wantArgs := map[string]int{"": 1, "on": 2, "off": 2, "undo": 2, "pin": 3, "branch": 3, "bisect": 3}
			n, ok := wantArgs[verb]
			if !ok {
				return usageError{fmt.Errorf("%q: use on, off, undo, pin TAG, branch TAG or bisect TEST", verb)}
			}
			if len(args) != n {
				return usageError{fmt.Errorf("rewind %s takes %d argument(s) after ID", verb, n-1)}
			}
			k, err := cl()
			if err != nil {
				return err
			}
			ctx := c.Context()
			switch verb {
			case "":
				rw, err := k.Rewind(ctx, id)
				if err != nil {
					return err
				}
				return printPoints(c, rw)
			case "on", "off":
				enabled := verb == "on"
				req := apiv1.RewindConfigRequest{Enabled: &enabled}
				if c.Flags().Changed("max-points") {
					req.MaxPoints = &maxPoints
				}
				if diskOnly {
					mem := false
					req.Memory = &mem
				}
				if triggers != "" {
					req.Triggers = strings.Split(triggers, ",")
				}
				rw, err := k.RewindConfig(ctx, id, req)
				if err != nil {
					return err
				}
				return printPoints(c, rw)
			case "undo":
				if c.Flags().Changed("steps") && to != "" {
					return usageError{fmt.Errorf("give --steps or --to, not both")}
				}
				u, err := k.RewindUndo(ctx, id, apiv1.RewindUndoRequest{Steps: steps, To: to})
				if err != nil {
					return err
				}
				if g.json {
					return printJSON(c, u)
				}
				fmt.Fprintf(c.OutOrStdout(), "restored %s (before: %s)\n", u.Restored.Tag, u.Restored.Command)
				if len(u.Dropped) > 0 {
					fmt.Fprintf(c.ErrOrStderr(), "dropped %s\n", strings.Join(u.Dropped, ", "))
				}
				return nil
			case "pin":
				p, err := k.RewindPin(ctx, id, args[2], !unpin)
				if err != nil {
					return err
				}
				if g.json {
					return printJSON(c, p)
				}
				fmt.Fprintf(c.OutOrStdout(), "%s pinned: %t\n", p.Tag, p.Pinned)
				return nil
			case "branch":
				b, err := k.RewindBranch(ctx, id, apiv1.RewindBranchRequest{Tag: args[2], Count: count, Identity: identity})
				if err != nil {
					return err
				}
				if g.json {
					return printJSON(c, b)
				}
				printFork(c, &b.ForkResult)
				fmt.Fprintf(c.ErrOrStderr(), "branched from %s (before: %s); %s is as it was\n", cell(b.Point.Tag), cell(b.Point.Command), id)
				return nil
			default: // bisect
				req := apiv1.RewindBisectRequest{Test: args[2], Good: good, Bad: bad}
				if timeout != 0 {
					if timeout < time.Second || timeout%time.Second != 0 {
						return usageError{fmt.Errorf("--timeout %s: give whole seconds, at least 1s", timeout)}
					}
					req.TimeoutSeconds = int(timeout / time.Second)
				}
				b, err := k.RewindBisect(ctx, id, req)
				if err != nil {
					return err
				}
				if g.json {
					return printJSON(c, b)
				}
				fmt.Fprintf(c.OutOrStdout(), "%s\n", b.Command)
				fmt.Fprintf(c.ErrOrStderr(), "broke between %s (good) and %s (bad); %d states tested, %d restores\n",
					b.LastGood, b.FirstBad, len(b.Tested), b.Restores)
				return nil
			}
		},
	}
	f := cmd.Flags()
	f.IntVar(&maxPoints, "max-points", apiv1.DefaultRewindPoints, "on: how many points the ring keeps (1 to 50)")
	f.BoolVar(&diskOnly, "disk-only", false, "on: disk points even where the backend can save memory")
	f.StringVar(&triggers, "triggers", "", "on: what takes a point, of exec,job,file,git (default exec)")
	f.IntVar(&steps, "steps", 0, "undo: how many points back (default 1)")
	f.StringVar(&to, "to", "", "undo: back to this point's tag")
	f.BoolVar(&unpin, "unpin", false, "pin: release the pin")
	f.IntVar(&count, "count", 0, "branch: how many children (1 to 32, default 1)")
	f.StringVar(&identity, "identity", "", "branch: the children's host names and machine ids: best-effort (default), unique or preserve")
	f.StringVar(&good, "good", "", "bisect: a point where TEST passes (default the oldest)")
	f.StringVar(&bad, "bad", "", "bisect: a point where TEST fails (default now)")
	f.DurationVar(&timeout, "timeout", 0, "bisect: how long one run of TEST may take (default 60s, at most 10m)")
	return cmd
}
