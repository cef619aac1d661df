//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/hypervisor/image"
)

func newSandboxCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "sandbox", Short: "Run commands in a one-off sandbox (no daemon needed)"}
	var (
		backend, img               string
		cpus                       float64
		memMB, diskMB, pids        int64
		timeout                    int
		confine                    bool
		fsWrite, fsRead, execAllow []string
		bestEffort                 bool
	)
	run := &cobra.Command{
		Use:   "run [flags] -- COMMAND [ARG...]",
		Short: "Create a sandbox, run one command in it, print its output, delete it",
		Long: `Create a sandbox from an image, run one command through the guest agent,
print its output and delete the sandbox. One argument is a shell line
(run by /bin/sh -c); several are an argv. The exit code is the command's.`,
		Example: `  paddock sandbox run -- 'uname -a; id'
  paddock sandbox run --confine --fs-write /workspace -- sh -c 'echo hi > /etc/x'`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			b, err := g.backend(backend)
			if err != nil {
				return err
			}
			// A one-off sandbox: release the backend's store (a btrfs loop
			// mount) once it is gone.
			if cl, ok := b.(io.Closer); ok {
				defer cl.Close()
			}
			ctx := c.Context()
			if err := g.ensureImage(ctx, img); err != nil {
				return err
			}
			start := time.Now()
			m, err := b.Create(ctx, hypervisor.MachineSpec{Image: img, CPUs: cpus, MemoryMB: memMB, DiskMB: diskMB, PIDs: pids})
			if err != nil {
				return err
			}
			created := time.Since(start)
			defer m.Stop(context.Background())
			cl := client.New(func(ctx context.Context) (net.Conn, error) { return m.Dial(ctx) })
			req := api.ExecRequest{Command: api.Command{TimeoutSeconds: timeout}}
			if len(args) == 1 {
				req.Shell = args[0]
			} else {
				req.Argv = args
			}
			if confine {
				req.Confine = &api.Confinement{Enforcement: "strict", ReadWrite: fsWrite, ReadOnly: fsRead, Exec: execAllow}
				if bestEffort {
					req.Confine.Enforcement = "best-effort"
				}
			}
			res, err := cl.Exec(ctx, req)
			if err != nil {
				return err
			}
			if g.json {
				out := struct {
					Machine  string          `json:"machine"`
					CreateMS int64           `json:"create_ms"`
					Result   *api.ExecResult `json:"result"`
				}{m.ID(), created.Milliseconds(), res}
				if err := json.NewEncoder(c.OutOrStdout()).Encode(out); err != nil {
					return err
				}
			} else {
				os.Stdout.Write(res.Stdout)
				os.Stderr.Write(res.Stderr)
				if res.Confinement != nil && g.verbose {
					rep, _ := json.Marshal(res.Confinement)
					fmt.Fprintf(os.Stderr, "paddock: confinement %s\n", rep)
				}
				if res.TimedOut {
					fmt.Fprintf(os.Stderr, "paddock: command timed out after %ds\n", timeout)
				}
			}
			m.Stop(context.Background())
			if res.ExitCode != 0 {
				code := res.ExitCode
				if code < 0 {
					// Killed by a signal: exit as a shell would, 128+n.
					code = 128 + int(unix.SignalNum("SIG"+strings.TrimPrefix(res.Signal, "SIG")))
				}
				return exitCodeError(code)
			}
			return nil
		},
	}
	f := run.Flags()
	f.StringVar(&backend, "backend", "procbox", "sandbox backend (see `paddock backends`)")
	f.StringVar(&img, "image", image.DefaultName, "image to start from (see `paddock image ls`; the default one is built on first use)")
	f.Float64Var(&cpus, "cpus", 1, "CPU limit")
	f.Int64Var(&memMB, "memory-mb", 1024, "memory limit in MiB")
	f.Int64Var(&diskMB, "disk-mb", 1024, "writable layer size in MiB")
	f.Int64Var(&pids, "pids", 512, "process limit")
	f.IntVar(&timeout, "timeout", 300, "command timeout in seconds")
	f.BoolVar(&confine, "confine", false, "run the command under Landlock + seccomp")
	f.StringSliceVar(&fsWrite, "fs-write", []string{"/workspace", "/tmp"}, "writable paths under --confine")
	f.StringSliceVar(&fsRead, "fs-read", nil, "extra read-only paths under --confine")
	f.StringSliceVar(&execAllow, "exec-allow", nil, "executable allow-list under --confine (empty: any)")
	f.BoolVar(&bestEffort, "best-effort", false, "run even when the kernel cannot enforce every right")
	cmd.AddCommand(run, newShellCmd(g), newOrphansCmd(g))
	return cmd
}

func newShellCmd(g *globals) *cobra.Command {
	var backend, img string
	c := &cobra.Command{
		Use:   "shell [flags] [-- COMMAND]",
		Short: "Open a terminal in a one-off sandbox (deleted when the shell exits)",
		Example: `  paddock sandbox shell
  paddock sandbox shell -- 'top -b -n 1'`,
		RunE: func(c *cobra.Command, args []string) error {
			b, err := g.backend(backend)
			if err != nil {
				return err
			}
			if cl, ok := b.(io.Closer); ok {
				defer cl.Close()
			}
			ctx := c.Context()
			if err := g.ensureImage(ctx, img); err != nil {
				return err
			}
			m, err := b.Create(ctx, hypervisor.MachineSpec{Image: img})
			if err != nil {
				return err
			}
			defer m.Stop(context.Background())
			gc := client.New(func(ctx context.Context) (net.Conn, error) { return m.Dial(ctx) })
			code, err := runTerminal(ctx, func(ctx context.Context, cols, rows int) (*websocket.Conn, error) {
				return gc.PTY(ctx, uint16(cols), uint16(rows), strings.Join(args, " "))
			})
			if err != nil {
				return err
			}
			m.Stop(context.Background())
			if code != 0 {
				return exitCodeError(code)
			}
			return nil
		},
	}
	c.Flags().StringVar(&backend, "backend", "procbox", "sandbox backend")
	c.Flags().StringVar(&img, "image", image.DefaultName, "image to start from (the default one is built on first use)")
	return c
}

// ensureImage builds the built-in image when a one-off sandbox needs it
// and the state dir has none yet (image.Store.EnsureBuilt), saying so.
func (g *globals) ensureImage(ctx context.Context, name string) error {
	start := time.Now()
	built, err := image.Store{Dir: g.imagesDir()}.EnsureBuilt(ctx, name)
	if err != nil {
		return fmt.Errorf("build the built-in image %q on first use: %w", name, err)
	}
	if built {
		g.logger().Info("built the default image on first use", "image", name, "builder", "mini",
			"took", time.Since(start).Round(time.Millisecond))
	}
	return nil
}
