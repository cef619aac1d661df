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

// newSandboxesCmd is `paddock sandboxes`: the daemon's lower sandbox API
// (/v1/sandboxes). `paddock sandbox` stays the daemon-less one-off runner.
func newSandboxesCmd(g *globals) *cobra.Command {
	var addr, token string
	cmd := &cobra.Command{
		Use:     "sandboxes",
		Aliases: []string{"sbx"},
		Short:   "Sandboxes on a Paddock daemon: create, exec, read, write, speculate, rm (PADDOCK_URL, PADDOCK_TOKEN)",
		Long: `Sandboxes kept by a running daemon (paddock serve): each lives until it is
removed or its TTL runs out (default 600 s). For a one-off sandbox without a
daemon, use ` + "`paddock sandbox run`" + `.`,
		Example: `  ID=$(paddock sandboxes create -q --ttl-seconds 300)
  paddock sandboxes exec $ID -- 'uname -a; exit 3'; echo $?     # 3
  paddock sandboxes write $ID /workspace/in.txt ./in.txt --mode 640
  paddock sandboxes read $ID /workspace/in.txt
  paddock sandboxes speculate $ID --path /workspace -- 'rm /workspace/in.txt'   # shown, not done
  paddock sandboxes rm $ID`,
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
	printJSON := func(c *cobra.Command, v any) error {
		enc := json.NewEncoder(c.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}

	var req apiv1.SandboxRequest
	var quiet bool
	create := &cobra.Command{Use: "create", Short: "Start a sandbox (returns once commands can run)", Args: cobra.NoArgs, RunE: func(c *cobra.Command, _ []string) error {
		k, err := cl()
		if err != nil {
			return err
		}
		sb, err := k.CreateSandbox(c.Context(), req)
		if err != nil {
			return err
		}
		switch {
		case g.json:
			return printJSON(c, sb)
		case quiet:
			fmt.Fprintln(c.OutOrStdout(), sb.ID)
			return nil
		}
		printSandboxes(c, []*apiv1.Sandbox{sb})
		return nil
	}}
	create.Flags().IntVar(&req.TTLSeconds, "ttl-seconds", 0, "lifetime in seconds (0: the daemon's default, 600)")
	create.Flags().StringVar(&req.Image, "image", "", "image (default: the daemon's)")
	create.Flags().StringVar(&req.Backend, "backend", "", "backend to run on, e.g. qemu for a virtual machine (default: the daemon's)")
	create.Flags().Float64Var(&req.CPUs, "cpus", 0, "CPU limit (0: the backend's default)")
	create.Flags().Int64Var(&req.MemoryMB, "memory-mb", 0, "memory limit in MiB (0: the backend's default)")
	create.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only the id")

	ls := &cobra.Command{Use: "ls", Short: "List sandboxes, oldest first", Args: cobra.NoArgs, RunE: func(c *cobra.Command, _ []string) error {
		k, err := cl()
		if err != nil {
			return err
		}
		sbs, err := k.ListSandboxes(c.Context())
		if err != nil {
			return err
		}
		if g.json {
			return printJSON(c, sbs)
		}
		printSandboxes(c, sbs)
		return nil
	}}
	get := &cobra.Command{Use: "get ID", Short: "Show one sandbox", Args: cobra.ExactArgs(1), RunE: func(c *cobra.Command, args []string) error {
		k, err := cl()
		if err != nil {
			return err
		}
		sb, err := k.GetSandbox(c.Context(), args[0])
		if err != nil {
			return err
		}
		if g.json {
			return printJSON(c, sb)
		}
		printSandboxes(c, []*apiv1.Sandbox{sb})
		return nil
	}}
	rm := &cobra.Command{Use: "rm ID...", Short: "Stop and remove sandboxes (removing one that is gone is not an error)", Args: cobra.MinimumNArgs(1), RunE: func(c *cobra.Command, args []string) error {
		k, err := cl()
		if err != nil {
			return err
		}
		for _, id := range args {
			if err := k.DeleteSandbox(c.Context(), id); err != nil {
				return err
			}
		}
		return nil
	}}

	var preq apiv1.ProcessRequest
	var envs []string
	execCmd := &cobra.Command{
		Use:   "exec ID -- COMMAND...",
		Short: "Run a command in the sandbox (exits with its code)",
		Long: `Run a command in the sandbox. One argument is a shell line; several are
quoted into one. Its stdout and stderr are printed, and paddock exits with
its exit code (128+n when a signal ended it). --json prints the whole result.`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			k, err := cl()
			if err != nil {
				return err
			}
			r := preq
			r.Command = args[1]
			if len(args) > 2 {
				r.Command = shellJoin(args[1:])
			}
			for _, kv := range envs {
				name, val, ok := strings.Cut(kv, "=")
				if !ok || name == "" {
					return usageError{fmt.Errorf("--env %q: give NAME=VALUE", kv)}
				}
				if r.Env == nil {
					r.Env = map[string]string{}
				}
				r.Env[name] = val
			}
			res, err := k.SandboxProcess(c.Context(), args[0], r)
			if err != nil {
				return err
			}
			if g.json {
				if err := printJSON(c, res); err != nil {
					return err
				}
			} else {
				fmt.Fprint(c.OutOrStdout(), res.Stdout)
				fmt.Fprint(c.ErrOrStderr(), res.Stderr)
				if res.TimedOut {
					fmt.Fprintf(c.ErrOrStderr(), "paddock: the command timed out after %d s\n", r.TimeoutSeconds)
				}
			}
			return processExit(res)
		},
	}
	execCmd.Flags().IntVar(&preq.TimeoutSeconds, "timeout", 300, "seconds before the command is killed")
	execCmd.Flags().StringVar(&preq.Cwd, "cwd", "", "directory to run in (default: the sandbox's workdir)")
	execCmd.Flags().StringArrayVarP(&envs, "env", "e", nil, "NAME=VALUE added to the environment (repeatable)")

	read := &cobra.Command{Use: "read ID PATH [LOCAL]", Short: "Copy a file (≤ 32 MiB) out of the sandbox to LOCAL or stdout", Args: cobra.RangeArgs(2, 3), RunE: func(c *cobra.Command, args []string) error {
		k, err := cl()
		if err != nil {
			return err
		}
		data, f, err := k.SandboxReadFile(c.Context(), args[0], args[1])
		if err != nil {
			return err
		}
		switch {
		case g.json:
			return printJSON(c, f)
		case len(args) == 3:
			if err := os.WriteFile(args[2], data, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(c.ErrOrStderr(), "read %s (%d bytes, mode %s) into %s\n", cell(f.Path), f.Size, cell(f.Mode), cell(args[2]))
			return nil
		}
		_, err = c.OutOrStdout().Write(data)
		return err
	}}
	var mode string
	write := &cobra.Command{Use: "write ID PATH [LOCAL|-]", Short: "Write LOCAL (or stdin) to PATH in the sandbox (≤ 32 MiB; parents are created)", Args: cobra.RangeArgs(2, 3), RunE: func(c *cobra.Command, args []string) error {
		k, err := cl()
		if err != nil {
			return err
		}
		var in io.Reader = c.InOrStdin()
		name := "stdin"
		if len(args) == 3 && args[2] != "-" {
			f, err := os.Open(args[2])
			if err != nil {
				return err
			}
			defer f.Close()
			in, name = f, args[2]
		}
		data, err := io.ReadAll(io.LimitReader(in, apiv1.MaxSandboxFileBytes+1))
		if err != nil {
			return err
		}
		if len(data) > apiv1.MaxSandboxFileBytes {
			return usageError{fmt.Errorf("%s is larger than the %d bytes a sandbox write takes", name, apiv1.MaxSandboxFileBytes)}
		}
		w, err := k.SandboxWriteFile(c.Context(), args[0], args[1], data, mode)
		if err != nil {
			return err
		}
		if g.json {
			return printJSON(c, w)
		}
		fmt.Fprintf(c.OutOrStdout(), "wrote %s (%d bytes, mode %s)\n", cell(w.Path), w.Size, cell(w.Mode))
		return nil
	}}
	write.Flags().StringVar(&mode, "mode", "", "octal mode, e.g. 640 (default 0644)")
	cmd.AddCommand(create, ls, get, rm, execCmd, read, write)
	cmd.AddCommand(changesetCommands(g, cl, sandboxChangesets)...)
	return cmd
}

// processExit turns a command's result into paddock's exit status.
func processExit(r *apiv1.ProcessResult) error {
	switch {
	case r.ExitCode == 0:
		return nil
	case r.ExitCode > 0:
		return exitCodeError(r.ExitCode)
	}
	// Ended by a signal: exit as a shell would, 128+n.
	if n := linuxSignalNum(r.Signal); n > 0 {
		return exitCodeError(128 + n)
	}
	return exitCodeError(128 + sigKill)
}

func printSandboxes(c *cobra.Command, sbs []*apiv1.Sandbox) {
	tw := newTable(c.OutOrStdout(), "ID", "STATUS", "IMAGE", "BACKEND", "CREATED", "EXPIRES")
	for _, s := range sbs {
		tw.row(s.ID, s.Status, s.Image, s.Backend, s.CreatedAt.Format(time.RFC3339), s.ExpiresAt.Format(time.RFC3339))
	}
	tw.flush()
}
