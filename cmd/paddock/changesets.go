package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
)

// Speculation from the command line: `speculate`, `changesets` and
// `changeset` under both `paddock session` and `paddock sandboxes`. The
// two differ only in the SDK methods they call and in the words they
// print, so one builder makes both from a changesetAPI.

// changesetAPI is the SDK's speculation methods for one kind of target.
type changesetAPI struct {
	// noun is the CLI command the verbs hang under ("session" or
	// "sandboxes"), used in the hints printed.
	noun      string
	speculate func(*client.Client, context.Context, string, apiv1.SpeculateRequest) (*apiv1.Changeset, error)
	list      func(*client.Client, context.Context, string) ([]apiv1.Changeset, error)
	get       func(*client.Client, context.Context, string, string) (*apiv1.Changeset, error)
	decide    func(*client.Client, context.Context, string, string, apiv1.ChangesetDecision) (*apiv1.Changeset, error)
	apply     func(*client.Client, context.Context, string, string) (*apiv1.ApplyResult, error)
	// read is a file's content on the target now (for --diff).
	read func(*client.Client, context.Context, string, string) ([]byte, error)
}

var sessionChangesets = changesetAPI{
	noun:      "session",
	speculate: (*client.Client).Speculate,
	list:      (*client.Client).Changesets,
	get:       (*client.Client).Changeset,
	decide:    (*client.Client).DecideChangeset,
	apply:     (*client.Client).ApplyChangeset,
	read: func(k *client.Client, ctx context.Context, id, path string) ([]byte, error) {
		var f apiv1.FileRead
		if err := k.Call(ctx, "GET", id, "/files/content", url.Values{"path": {path}}, nil, &f); err != nil {
			return nil, err
		}
		return base64.StdEncoding.DecodeString(f.ContentBase64)
	},
}

var sandboxChangesets = changesetAPI{
	noun:      "sandboxes",
	speculate: (*client.Client).SandboxSpeculate,
	list:      (*client.Client).SandboxChangesets,
	get:       (*client.Client).SandboxChangeset,
	decide:    (*client.Client).SandboxDecideChangeset,
	apply:     (*client.Client).SandboxApplyChangeset,
	read: func(k *client.Client, ctx context.Context, id, path string) ([]byte, error) {
		data, _, err := k.SandboxReadFile(ctx, id, path)
		return data, err
	},
}

// maxShownContent is the largest file whose content `changeset ID CID`
// prints (text files only); larger ones are left to --json.
const maxShownContent = 4 << 10

// changesetCommands are `speculate`, `changesets` and `changeset` for one
// kind of target.
func changesetCommands(g *globals, cl func() (*client.Client, error), a changesetAPI) []*cobra.Command {
	printJSON := func(c *cobra.Command, v any) error {
		enc := json.NewEncoder(c.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	where := "the session's workspace (or absolute)"
	if a.noun == "sandboxes" {
		where = "absolute paths in the sandbox"
	}

	var (
		paths      []string
		cwd        string
		timeout    time.Duration
		diff       bool
		approvalID string
	)
	speculate := &cobra.Command{
		Use:   "speculate ID --path P [--path P]... [--timeout D] -- COMMAND...",
		Short: "See what a command would change, without changing anything",
		Long: `Run COMMAND in a throwaway copy of ID and record the files it added,
modified or deleted under the --path files or directories (` + where + `;
1 to ` + fmt.Sprint(apiv1.MaxSpeculatePaths) + ` of them). ID itself is left as it was. The changes are
kept as a pending changeset: review it with ` + "`changeset ID CID`" + `, approve
or reject it, and apply an approved one to make the changes for real.

Only file changes under the paths are kept. Processes the command started
and what it held in memory end with the copy. Network calls cannot be
taken back: if the copy could reach out they really happened, and the
network line says whether it could.

The exit status is 0 when the changeset was made, whatever the command's
own exit code (printed, and in --json).`,
		Example: "  paddock " + a.noun + " speculate ID --path /workspace -- 'sed -i s/old/new/ /workspace/app.conf'",
		Args:    cobra.MinimumNArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			if len(paths) == 0 {
				return usageError{fmt.Errorf("give at least one --path: only changes under the paths are recorded")}
			}
			if len(paths) > apiv1.MaxSpeculatePaths {
				return usageError{fmt.Errorf("%d paths: at most %d", len(paths), apiv1.MaxSpeculatePaths)}
			}
			if timeout < 0 || timeout > apiv1.MaxSpeculateTimeoutSeconds*time.Second {
				return usageError{fmt.Errorf("--timeout %s: give at most %s", timeout, apiv1.MaxSpeculateTimeoutSeconds*time.Second)}
			}
			line := args[1]
			if len(args) > 2 {
				line = shellJoin(args[1:])
			}
			if len(line) > apiv1.MaxSpeculateCommandBytes {
				return usageError{fmt.Errorf("the command is %d bytes: at most %d", len(line), apiv1.MaxSpeculateCommandBytes)}
			}
			req := apiv1.SpeculateRequest{Command: line, Paths: paths, Cwd: cwd, ApprovalID: approvalID}
			if timeout > 0 {
				// Whole seconds, rounded up so a short timeout is not 0 (the default).
				req.TimeoutSeconds = int((timeout + time.Second - 1) / time.Second)
			}
			k, err := cl()
			if err != nil {
				return err
			}
			cs, err := a.speculate(k, c.Context(), args[0], req)
			if h := client.HoldOf(err); h != nil {
				return heldError{args[0], h}
			}
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(c, cs)
			}
			printChangeset(c.OutOrStdout(), cs, false)
			if diff {
				if err := printDiffs(c, k, a, args[0], cs); err != nil {
					return err
				}
			}
			if cs.Status == apiv1.ChangesetPending {
				fmt.Fprintf(c.ErrOrStderr(), "review: paddock %s changeset %s %s; then approve (or reject) and apply\n", a.noun, cell(args[0]), cell(cs.ID))
			}
			return nil
		},
	}
	speculate.Flags().StringArrayVar(&paths, "path", nil, "record changes under this file or directory (repeatable, at least one)")
	speculate.Flags().StringVar(&cwd, "cwd", "", "the command's working directory")
	speculate.Flags().DurationVar(&timeout, "timeout", 0, "the command's timeout (default 60s, at most 1h)")
	speculate.Flags().BoolVar(&diff, "diff", false, "also print a unified diff of each added or modified text file")
	if a.noun == "session" {
		// A sandbox has no approvals: its speculations are never held.
		speculate.Flags().StringVar(&approvalID, "approval-id", "", "spend this approved request (after exit 6, held for approval)")
	}

	list := &cobra.Command{
		Use:   "changesets ID",
		Short: "List the changesets speculations made on ID",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			k, err := cl()
			if err != nil {
				return err
			}
			css, err := a.list(k, c.Context(), args[0])
			if err != nil {
				return err
			}
			if g.json {
				if css == nil {
					css = []apiv1.Changeset{}
				}
				return printJSON(c, css)
			}
			tw := newTable(c.OutOrStdout(), "ID", "STATUS", "FILES", "EXIT", "COMPLETE", "CREATED", "COMMAND")
			for _, cs := range css {
				tw.row(cs.ID, cs.Status, len(cs.Files), cs.ExitCode, cs.Complete, cs.CreatedAt.Format(time.RFC3339), cs.Command)
			}
			return tw.flush()
		},
	}

	var reason string
	one := &cobra.Command{
		Use:   "changeset ID CID [approve|reject [--reason R] | apply]",
		Short: "Show, approve, reject or apply one changeset",
		Long: `  paddock ` + a.noun + ` changeset ID CID                    the changeset, with small text files' contents
  paddock ` + a.noun + ` changeset ID CID approve [--reason R]
  paddock ` + a.noun + ` changeset ID CID reject [--reason R]
  paddock ` + a.noun + ` changeset ID CID apply               write an approved changeset into ID

Only a pending changeset can be decided, and it needs the admin token or
the tenant's token: a session token cannot decide. apply is refused (exit
4) and writes nothing when a file the changeset touches changed since the
speculation, when it is not approved, or when it is incomplete (a file
too large to keep, or too many files).`,
		Args: cobra.RangeArgs(2, 3),
		RunE: func(c *cobra.Command, args []string) error {
			id, cid, verb := args[0], args[1], ""
			if len(args) == 3 {
				verb = args[2]
			}
			switch verb {
			case "", "approve", "reject", "apply":
			default:
				return usageError{fmt.Errorf("%q: use approve, reject or apply", verb)}
			}
			var flagErr error
			c.Flags().Visit(func(f *pflag.Flag) {
				if f.Name == "reason" && verb != "approve" && verb != "reject" {
					flagErr = usageError{fmt.Errorf("--reason goes with approve or reject")}
				}
				if f.Name == "diff" && verb != "" {
					flagErr = usageError{fmt.Errorf("--diff goes with showing a changeset, not with %s", verb)}
				}
			})
			if flagErr != nil {
				return flagErr
			}
			k, err := cl()
			if err != nil {
				return err
			}
			ctx := c.Context()
			switch verb {
			case "":
				cs, err := a.get(k, ctx, id, cid)
				if err != nil {
					return err
				}
				if g.json {
					return printJSON(c, cs)
				}
				printChangeset(c.OutOrStdout(), cs, true)
				if diff {
					return printDiffs(c, k, a, id, cs)
				}
				return nil
			case "apply":
				res, err := a.apply(k, ctx, id, cid)
				if err != nil {
					return err
				}
				if g.json {
					return printJSON(c, res)
				}
				fmt.Fprintf(c.OutOrStdout(), "applied %s to %s, paths written or removed:\n", cell(res.Changeset.ID), cell(id))
				for _, p := range res.Applied {
					fmt.Fprintf(c.OutOrStdout(), "  %s\n", cell(p))
				}
				return nil
			default:
				cs, err := a.decide(k, ctx, id, cid, apiv1.ChangesetDecision{Decision: verb, Reason: reason})
				if err != nil {
					return err
				}
				if g.json {
					return printJSON(c, cs)
				}
				fmt.Fprintf(c.OutOrStdout(), "%s is %s\n", cell(cs.ID), cell(cs.Status))
				if cs.Status == apiv1.ChangesetApproved {
					fmt.Fprintf(c.ErrOrStderr(), "apply: paddock %s changeset %s %s apply\n", a.noun, cell(id), cell(cs.ID))
				}
				return nil
			}
		},
	}
	one.Flags().StringVar(&reason, "reason", "", "why, kept with the decision")
	one.Flags().BoolVar(&diff, "diff", false, "also print a unified diff of each added or modified text file")
	return []*cobra.Command{speculate, list, one}
}

// printChangeset prints a changeset for people: its files as a table, the
// network side effects, the exit code and the id; full adds the command's output
// and the contents of small text files.
func printChangeset(w io.Writer, cs *apiv1.Changeset, full bool) {
	if len(cs.Files) == 0 {
		fmt.Fprintln(w, "no changes under", cell(strings.Join(cs.Paths, ", ")))
	} else {
		tw := newTable(w, "OP", "PATH", "SIZE", "NOTE")
		for _, f := range cs.Files {
			size, note := "-", ""
			if f.Op != apiv1.PromoteDeleted {
				size = fmt.Sprint(f.Size)
			}
			if f.ContentOmitted {
				note = "content not kept (too large)"
			}
			tw.row(f.Op, f.Path, size, note)
		}
		tw.flush()
	}
	// Network calls are the side effects a speculation cannot undo.
	net := "no"
	if cs.SideEffects.Network {
		net = "yes, calls the command made really happened"
	}
	fmt.Fprintf(w, "network: %s\n", net)
	if cs.SideEffects.Detail != "" {
		fmt.Fprintf(w, "  %s\n", cell(cs.SideEffects.Detail))
	}
	fmt.Fprintf(w, "exit code %d, took %d ms (%s)\n", cs.ExitCode, cs.TookMS, cell(cs.How))
	if !cs.Complete {
		fmt.Fprintln(w, "incomplete: some content was not kept, so it cannot be applied")
	}
	if full {
		fmt.Fprintf(w, "command: %s\n", cell(cs.Command))
		if cs.DecidedBy != "" || cs.Reason != "" {
			fmt.Fprintf(w, "decided by %s: %s\n", cell(orDash(cs.DecidedBy)), cell(orDash(cs.Reason)))
		}
		for _, o := range []struct{ name, s string }{{"stdout", cs.Stdout}, {"stderr", cs.Stderr}} {
			if o.s != "" {
				fmt.Fprintf(w, "%s:\n", o.name)
				quoted(w, o.s)
			}
		}
		for _, f := range cs.Files {
			if f.Op == apiv1.PromoteDeleted || len(f.Content) == 0 || len(f.Content) > maxShownContent || !isText(f.Content) {
				continue
			}
			fmt.Fprintf(w, "%s (%s):\n", cell(f.Path), cell(f.Op))
			quoted(w, string(f.Content))
		}
	}
	fmt.Fprintf(w, "changeset %s %s\n", cell(cs.ID), cell(cs.Status))
}

// isText reports whether b looks like text: UTF-8 without NUL bytes.
func isText(b []byte) bool { return utf8.Valid(b) && bytes.IndexByte(b, 0) < 0 }

// quoted prints s (a command's output or a file's content) line by line,
// each line after "  | " and escaped as cell escapes (a tab too), so
// nothing in it can pass for a line of the CLI's own; --json has the
// exact bytes.
func quoted(w io.Writer, s string) {
	for _, line := range strings.SplitAfter(strings.TrimSuffix(s, "\n"), "\n") {
		fmt.Fprintf(w, "  | %s\n", cell(strings.TrimSuffix(line, "\n")))
	}
}

// printDiffs writes a unified diff for each added or modified text file
// of cs whose content it holds: against the file on the target now (the
// state the command started from, as a speculation leaves the target as
// it was), or against nothing for an added file. A file that changed on
// the target since the speculation is named and not compared.
func printDiffs(c *cobra.Command, k *client.Client, a changesetAPI, id string, cs *apiv1.Changeset) error {
	w := c.OutOrStdout()
	for _, f := range cs.Files {
		if f.Op == apiv1.PromoteDeleted || f.ContentOmitted || !isText(f.Content) {
			continue
		}
		var base []byte
		nameA := "a" + f.Path
		if f.Op == apiv1.PromoteAdded {
			nameA = "/dev/null"
		} else {
			b, err := a.read(k, c.Context(), id, f.Path)
			if err != nil {
				return err
			}
			if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != f.BaseSHA256 {
				fmt.Fprintf(c.ErrOrStderr(), "%s changed since the speculation: no diff\n", cell(f.Path))
				continue
			}
			base = b
		}
		var d strings.Builder
		if err := unifiedDiff(&d, nameA, "b"+f.Path, string(base), string(f.Content)); err != nil {
			fmt.Fprintln(c.ErrOrStderr(), cell(err.Error()))
			continue
		}
		// Raw for a program (patch -p1 reads it), escaped for a screen.
		fmt.Fprint(w, textFor(w, d.String()))
	}
	return nil
}
