package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
)

func newSessionCmd(g *globals) *cobra.Command {
	var addr, token string
	cmd := &cobra.Command{
		Use:     "session",
		Aliases: []string{"agent"},
		Short:   "Agent sessions on a Paddock daemon (PADDOCK_URL, PADDOCK_TOKEN)",
	}
	cmd.PersistentFlags().StringVar(&addr, "url", envOr("PADDOCK_URL", "https://127.0.0.1:7788"), "daemon URL; env PADDOCK_URL (an https daemon is trusted through PADDOCK_CA, a PEM file, or on this machine the state dir's gateway root)")
	cmd.PersistentFlags().StringVar(&token, "token", "", "bearer token (default: env PADDOCK_TOKEN; not shown in argv when taken from the environment)")
	cl := func() (*client.Client, error) {
		t := token
		if t == "" {
			t = os.Getenv("PADDOCK_TOKEN")
		}
		if t == "" {
			return nil, usageError{errors.New("no token: set PADDOCK_TOKEN (printed by `paddock serve` on first start)")}
		}
		return daemonClient(g, addr, t)
	}
	out := func(c *cobra.Command, v any, table func()) error {
		if g.json {
			enc := json.NewEncoder(c.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(v)
		}
		table()
		return nil
	}
	var agent, img, backendName, gitURL string
	var ttl int
	var readOnly, requireReady bool
	var overlayLower, wsPath string
	var allowHosts, cmdAllow, cmdDeny, cmdAsk []string
	var cmdEnforce bool
	var preset, policyFile string
	var budgetArg string
	run := &cobra.Command{
		Use:   "run [AGENT]",
		Short: "Create a session: a sandbox with a workspace",
		Long: `Create a session: a sandbox with a workspace.

--git clones an https:// repository into the workspace when the session is
made. A user:password (or token) in the URL is used for the clone only and
never recorded; because a command line is visible to other local users,
put such a URL in PADDOCK_GIT_URL instead of --git. A clone that fails
leaves an empty workspace and a note, unless --require-ready makes it a
failed create.

--readonly makes the workspace readable but not writable for everything
the agent runs (enforced by Landlock in the guest); /tmp and the home stay
writable.

Network: none by default (offline). --allow HOST (repeatable) lets the
sandbox reach those hosts over HTTP and HTTPS through the host's egress
proxy, which every program's traffic goes to; --preset developer-safe
allows the usual code hosts and package registries; --policy FILE takes
a whole policy, method and path rules included.

Commands: --cmd-allow, --cmd-deny and --cmd-ask (repeatable; * is the only
wildcard) make the policy engine (Rego) judge every exec and job: a command
is split on ; && || | & and newlines, a piece matching a deny pattern
refuses it, one matching an ask pattern holds it for an operator
(paddock session approvals/approve/deny), and with allow patterns every
piece must match one. These match the command string, so they stop
accidents, not an adversary; --cmd-enforce adds the guest kernel's part:
only the programs the allow and ask patterns name may start.

--overlay-lower DIR shows DIR, a directory of the image, at the workspace
copy-on-write: the agent writes freely there and DIR stays as it was; the
artifacts list only the agent's changes. --workspace sets where the
workspace is (default /workspace).

` + budgetHelp,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			k, err := cl()
			if err != nil {
				return err
			}
			if len(args) == 1 {
				agent = args[0]
			}
			req := apiv1.CreateRequest{Agent: agent, Runtime: apiv1.Runtime{Backend: backendName, Image: img}, TTLSeconds: ttl}
			req.Workspace.Git = gitURL
			if req.Workspace.Git == "" {
				req.Workspace.Git = os.Getenv("PADDOCK_GIT_URL")
			}
			req.Workspace.RequireReady = requireReady
			if readOnly {
				req.Workspace.Mode = apiv1.ModeReadOnly
			}
			req.Workspace.Path = wsPath
			if overlayLower != "" {
				if readOnly {
					return usageError{errors.New("--readonly and --overlay-lower are two workspace modes: pick one")}
				}
				req.Workspace.Mode, req.Workspace.Lower = apiv1.ModeOverlay, overlayLower
			}
			pol, err := policyFromFlags(preset, allowHosts, policyFile, c.InOrStdin())
			if err != nil {
				return err
			}
			if len(cmdAllow)+len(cmdDeny)+len(cmdAsk) > 0 || cmdEnforce {
				if policyFile != "" {
					return usageError{errors.New("--policy takes the whole policy: put the process rules in it (\"process\": {\"allow\": […]}) instead of --cmd-*")}
				}
				if pol == nil {
					pol = &apiv1.PolicyRequest{}
				}
				pol.Process = &apiv1.ProcessRules{Allow: cmdAllow, Deny: cmdDeny, Ask: cmdAsk}
				if cmdEnforce {
					pol.Process.Enforce = "exec"
				}
			}
			req.Policy = pol
			if req.Budget, err = budgetFromFlag(budgetArg, c.InOrStdin()); err != nil {
				return err
			}
			s, err := k.CreateSession(c.Context(), req)
			if err != nil {
				return err
			}
			if s.Workspace.Note != "" && !g.json {
				fmt.Fprintf(c.ErrOrStderr(), "paddock: workspace: %s\n", text(s.Workspace.Note))
			}
			return out(c, s, func() { printSessions(c, []*apiv1.Session{s}) })
		},
	}
	run.Flags().StringVar(&img, "image", "", "image (default: the daemon's)")
	run.Flags().StringVar(&backendName, "backend", "", "backend to run on, e.g. qemu for a virtual machine (default: the daemon's; see paddock backends)")
	run.Flags().IntVar(&ttl, "ttl-seconds", 3600, "lifetime")
	run.Flags().StringVar(&gitURL, "git", "", "https:// repository to clone into the workspace (default: env PADDOCK_GIT_URL)")
	run.Flags().BoolVar(&readOnly, "readonly", false, "make the workspace read-only for everything the agent runs")
	run.Flags().StringArrayVar(&allowHosts, "allow", nil, "a host the sandbox may reach (exact, or *.suffix for subdomains; repeatable); everything else is denied")
	run.Flags().StringVar(&preset, "preset", "", "network preset: offline (the default), developer-safe or open")
	run.Flags().StringVar(&policyFile, "policy", "", "the policy as JSON ({\"preset\":…, \"network\":{…}}) from a file, or - for stdin")
	run.Flags().StringVar(&overlayLower, "overlay-lower", "", "show this image directory at the workspace, copy-on-write")
	run.Flags().StringArrayVar(&cmdAllow, "cmd-allow", nil, "a command pattern the agent may run (* is the only wildcard; repeatable); with any, every piece of a command must match one")
	run.Flags().StringArrayVar(&cmdDeny, "cmd-deny", nil, "a command pattern refused (repeatable); deny wins")
	run.Flags().StringArrayVar(&cmdAsk, "cmd-ask", nil, "a command pattern held for an operator's approval (repeatable)")
	run.Flags().BoolVar(&cmdEnforce, "cmd-enforce", false, "also let only the programs the --cmd-allow/--cmd-ask patterns name start in the sandbox (Landlock)")
	run.Flags().StringVar(&wsPath, "workspace", "", "workspace directory in the sandbox (default /workspace)")
	run.Flags().BoolVar(&requireReady, "require-ready", false, "fail the create (and remove the sandbox) if the workspace does not initialize, e.g. the clone fails")
	run.Flags().StringVar(&budgetArg, "budget", "", "the session's limits as JSON, or @FILE (@- for stdin); see above")
	var lsAll bool
	ls := &cobra.Command{Use: "ls", Short: "List sessions (--all: deleted ones too)", Args: cobra.NoArgs, RunE: func(c *cobra.Command, _ []string) error {
		k, err := cl()
		if err != nil {
			return err
		}
		list := k.ListSessions
		if lsAll {
			list = k.ListAllSessions
		}
		ss, err := list(c.Context())
		if err != nil {
			return err
		}
		return out(c, ss, func() { printSessions(c, ss) })
	}}
	ls.Flags().BoolVar(&lsAll, "all", false, "include deleted sessions")
	get := &cobra.Command{Use: "get ID", Short: "Show one session", Args: cobra.ExactArgs(1), RunE: func(c *cobra.Command, args []string) error {
		k, err := cl()
		if err != nil {
			return err
		}
		s, err := k.GetSession(c.Context(), args[0])
		if err != nil {
			return err
		}
		return out(c, s, func() { printSessions(c, []*apiv1.Session{s}); printUsage(c, s) })
	}}
	var timeout, approvalWait int
	var stream bool
	var approvalID string
	execCmd := &cobra.Command{
		Use:   "exec ID -- COMMAND...",
		Short: "Run a command in the session (exits with its code)",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			k, err := cl()
			if err != nil {
				return err
			}
			line := args[1]
			if len(args) > 2 {
				line = shellJoin(args[1:])
			}
			req := apiv1.ExecRequest{Command: line, TimeoutSeconds: timeout, ApprovalID: approvalID, ApprovalWaitSeconds: approvalWait}
			if stream {
				code, err := k.ExecStream(c.Context(), args[0], req, c.OutOrStdout(), c.ErrOrStderr())
				if h := client.HoldOf(err); h != nil {
					return heldError{args[0], h}
				}
				if err != nil {
					return err
				}
				if code != 0 {
					return exitCodeError(code)
				}
				return nil
			}
			r, err := k.Exec(c.Context(), args[0], req)
			if h := client.HoldOf(err); h != nil {
				return heldError{args[0], h}
			}
			if err != nil {
				return err
			}
			if g.json {
				json.NewEncoder(c.OutOrStdout()).Encode(r)
			} else {
				fmt.Fprint(c.OutOrStdout(), r.Stdout)
				fmt.Fprint(c.ErrOrStderr(), r.Stderr)
			}
			if r.ExitCode != 0 {
				if r.ExitCode < 0 {
					return exitCodeError(128 + 9)
				}
				return exitCodeError(r.ExitCode)
			}
			return nil
		},
	}
	execCmd.Flags().IntVar(&timeout, "timeout", 300, "seconds before the command is killed")
	execCmd.Flags().BoolVar(&stream, "stream", false, "print output while the command runs (Server-Sent Events)")
	execCmd.Flags().StringVar(&approvalID, "approval-id", "", "run a command an operator approved (the id a held command printed)")
	execCmd.Flags().IntVar(&approvalWait, "approval-wait", 0, "seconds (at most 120) to wait for an operator when the command needs approval")
	var tag string
	ckpt := &cobra.Command{Use: "checkpoint ID", Short: "Checkpoint the session", Args: cobra.ExactArgs(1), RunE: func(c *cobra.Command, args []string) error {
		k, err := cl()
		if err != nil {
			return err
		}
		mem := false
		cp, err := k.Checkpoint(c.Context(), args[0], -1, apiv1.CheckpointRequest{Tag: tag, Memory: &mem})
		if err != nil {
			return err
		}
		return out(c, cp, func() { fmt.Fprintf(c.OutOrStdout(), "checkpoint %s (%s)\n", cell(cp.Tag), cell(cp.Snapshot)) })
	}}
	ckpt.Flags().StringVar(&tag, "tag", "", "name of the checkpoint")
	restore := &cobra.Command{Use: "restore ID TAG", Short: "Restore a checkpoint", Args: cobra.ExactArgs(2), RunE: func(c *cobra.Command, args []string) error {
		k, err := cl()
		if err != nil {
			return err
		}
		s, err := k.Restore(c.Context(), args[0], -1, args[1])
		if err != nil {
			return err
		}
		return out(c, s, func() { fmt.Fprintf(c.OutOrStdout(), "restored %s to %s\n", cell(s.ID), cell(args[1])) })
	}}
	var count int
	var forkIdentity, forkFrom string
	fork := &cobra.Command{Use: "fork ID", Short: "Fork the session into children", Args: cobra.ExactArgs(1), RunE: func(c *cobra.Command, args []string) error {
		k, err := cl()
		if err != nil {
			return err
		}
		r, err := k.ForkWith(c.Context(), args[0], -1, apiv1.ForkRequest{Count: count, Identity: forkIdentity, From: forkFrom})
		if err != nil {
			return err
		}
		return out(c, r, func() { printFork(c, r) })
	}}
	fork.Flags().IntVar(&count, "count", 1, "children (1-32)")
	fork.Flags().StringVar(&forkIdentity, "identity", "", "the children's host names and machine ids: best-effort (default), unique or preserve")
	fork.Flags().StringVar(&forkFrom, "from", "", "start the children from this checkpoint tag instead of the state now")
	artifacts := &cobra.Command{Use: "artifacts ID", Short: "What changed in the workspace", Args: cobra.ExactArgs(1), RunE: func(c *cobra.Command, args []string) error {
		k, err := cl()
		if err != nil {
			return err
		}
		a, err := k.Artifacts(c.Context(), args[0])
		if err != nil {
			return err
		}
		return out(c, a, func() {
			for _, p := range a.Added {
				fmt.Fprintf(c.OutOrStdout(), "A %s\n", cell(p))
			}
			for _, p := range a.Modified {
				fmt.Fprintf(c.OutOrStdout(), "M %s\n", cell(p))
			}
			for _, p := range a.Deleted {
				fmt.Fprintf(c.OutOrStdout(), "D %s\n", cell(p))
			}
		})
	}}
	var timelineTail int
	timeline := &cobra.Command{Use: "timeline ID [--tail N]", Short: "What was done, in order (the ledger)", Args: cobra.ExactArgs(1), RunE: func(c *cobra.Command, args []string) error {
		if timelineTail < 0 || timelineTail > maxEventsPage {
			return usageError{fmt.Errorf("--tail %d: give 1 to %d", timelineTail, maxEventsPage)}
		}
		k, err := cl()
		if err != nil {
			return err
		}
		ev, err := k.EventsPage(c.Context(), args[0], client.EventsQuery{Tail: timelineTail})
		if err != nil {
			return err
		}
		es := ev.Ledger
		if ev.LedgerMore {
			defer moreNote(c.ErrOrStderr(), len(es))
		}
		return out(c, es, func() {
			tw := newTable(c.OutOrStdout(), "SEQ", "TIME", "KIND", "DATA")
			for _, e := range es {
				tw.row(e.Seq, e.Time.Format(time.RFC3339), e.Kind, newJSONCell(e.Data))
			}
			tw.flush()
		})
	}}
	timeline.Flags().IntVar(&timelineTail, "tail", 0, "only the newest N entries (at most 10000; one answer holds at most 10000, the oldest without it)")
	rm := &cobra.Command{Use: "rm ID", Short: "Delete a session and its sandbox", Args: cobra.ExactArgs(1), RunE: func(c *cobra.Command, args []string) error {
		k, err := cl()
		if err != nil {
			return err
		}
		return k.DeleteSession(c.Context(), args[0])
	}}
	cmd.AddCommand(run, ls, get, execCmd, ckpt, restore, fork, artifacts, timeline, rm)
	cmd.AddCommand(promoteCommand(g, cl), compilePolicyCommand(g, cl), tenantsCommand(g, cl))
	cmd.AddCommand(ioCommands(g, cl)...)
	cmd.AddCommand(grantCommands(g, cl)...)
	cmd.AddCommand(tokenCommands(g, cl)...)
	cmd.AddCommand(approvalCommands(g, cl)...)
	cmd.AddCommand(previewCommands(g, cl)...)
	cmd.AddCommand(rewindCommand(g, cl))
	cmd.AddCommand(eventsCommand(g, cl))
	cmd.AddCommand(shellCommand(cl))
	cmd.AddCommand(replayCommand(g, cl))
	cmd.AddCommand(orchestrateCommands(g, cl)...)
	cmd.AddCommand(changesetCommands(g, cl, sessionChangesets)...)
	return cmd
}

// printFork shows a fork's children with their identities, then the
// parent's jobs the children do not have.
func printFork(c *cobra.Command, r *apiv1.ForkResult) {
	tw := newTable(c.OutOrStdout(), "CHILD", "HOSTNAME", "MACHINE-ID", "FROM", "MEMORY")
	for i, k := range r.Children {
		var id apiv1.ChildIdentity
		if i < len(r.Identities) {
			id = r.Identities[i]
		}
		from := r.From
		if from == "" {
			from = "now"
		}
		tw.row(k.ID, id.Hostname, id.MachineID, from, r.Memory)
	}
	tw.flush()
	if r.IdentityNote != "" {
		fmt.Fprintf(c.OutOrStdout(), "identity (%s): %s\n", cell(r.Identity), cell(r.IdentityNote))
	}
	for _, j := range r.NotCarried {
		fmt.Fprintf(c.OutOrStdout(), "not carried: job %s (%s): still running in the parent\n", cell(j.Job), cell(j.Command))
	}
}

func printSessions(c *cobra.Command, ss []*apiv1.Session) {
	tw := newTable(c.OutOrStdout(), "ID", "AGENT", "STATE", "IMAGE", "CHECKPOINTS", "EXECS", "JOBS", "CREATED", "EXPIRES")
	for _, s := range ss {
		b := s.Budget
		if b == nil {
			b = &apiv1.Budget{}
		}
		tw.row(s.ID, s.Agent, s.State, s.Runtime.Image, len(s.Checkpoints),
			usedOf(s.Usage.Execs, b.MaxExecs), usedOf(s.Usage.Jobs, b.MaxJobs), s.CreatedAt.Format(time.RFC3339), s.ExpiresAt.Format(time.RFC3339))
	}
	tw.flush()
}

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

// shellJoin quotes argv words into one shell line.
func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// policyFromFlags builds the create body's policy from run's flags; nil
// when none was given (offline).
func policyFromFlags(preset string, allow []string, file string, stdin io.Reader) (*apiv1.PolicyRequest, error) {
	if file != "" {
		if preset != "" || len(allow) > 0 {
			return nil, usageError{errors.New("--policy takes the whole policy: leave out --preset and --allow")}
		}
		var raw []byte
		var err error
		if file == "-" {
			raw, err = io.ReadAll(io.LimitReader(stdin, 1<<20))
		} else {
			raw, err = os.ReadFile(file)
		}
		if err != nil {
			return nil, err
		}
		var p apiv1.PolicyRequest
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, usageError{fmt.Errorf("--policy %s: %w", file, err)}
		}
		return &p, nil
	}
	if preset == "" && len(allow) == 0 {
		return nil, nil
	}
	p := &apiv1.PolicyRequest{PolicyInput: apiv1.PolicyInput{Preset: preset}}
	if len(allow) > 0 {
		p.Network = &apiv1.Network{Default: "deny"}
		for _, h := range allow {
			p.Network.Allow = append(p.Network.Allow, apiv1.AllowEntry{Host: h})
		}
	}
	return p, nil
}
