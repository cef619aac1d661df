// Command paddock is Paddock's one binary: the daemon, the image builder and
// the client verbs. `paddock help` lists what it can do.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"paddock.dev/paddock/hypervisor"
)

// Exit codes that mean something to scripts.
const (
	exitOK           = 0
	exitError        = 1 // anything else that went wrong
	exitUsage        = 2 // bad flags or arguments
	exitNotFound     = 3 // the thing named does not exist
	exitConflict     = 4 // refused because of the current state (409)
	exitForbidden    = 5 // the token may not do this (403): another session, an op not granted
	exitHeld         = 6 // the command waits for an operator's approval (428)
	exitUnauthorized = 7 // no valid token: unknown, revoked or expired (401)
)

type globals struct {
	stateDir string
	guest    string
	json     bool
	logJSON  bool
	verbose  bool
	// storeSize and diskReserve are serve's --store-size and
	// --disk-reserve, given to the backends it opens.
	storeSize   string
	diskReserve hypervisor.Reserve
}

func main() {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	root := newRoot()
	err := root.ExecuteContext(ctx)
	var ec exitCodeError
	if err != nil && !errors.As(err, &ec) {
		// An error can quote what a sandbox made (a path, git's words).
		fmt.Fprintln(os.Stderr, "paddock:", text(err.Error()))
		if hint := trustHint(err, rootStateDir(root)); hint != "" {
			fmt.Fprintln(os.Stderr, "paddock:", hint)
		}
	}
	os.Exit(exitCode(err))
}

type usageError struct{ error }

// exitCodeError carries a command's own exit code out of `sandbox run`.
type exitCodeError int

func (e exitCodeError) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "paddock",
		Short:         "Disposable, isolated machines for AI agents",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err} })
	defState := os.Getenv("PADDOCK_STATE_DIR")
	if defState == "" {
		defState = "/var/lib/paddock"
	}
	root.PersistentFlags().StringVar(&g.stateDir, "state-dir", defState, "state directory (images, sandboxes, snapshots); env PADDOCK_STATE_DIR")
	root.PersistentFlags().StringVar(&g.guest, "guest", os.Getenv("PADDOCK_GUEST"), "path to the static paddock-guest binary (default: beside this binary); env PADDOCK_GUEST")
	root.PersistentFlags().BoolVar(&g.json, "json", false, "print JSON for scripts instead of tables")
	root.PersistentFlags().BoolVar(&g.logJSON, "log-json", false, "write logs as JSON")
	root.PersistentFlags().BoolVarP(&g.verbose, "verbose", "v", false, "debug logging")
	root.AddCommand(newImageCmd(g), newSandboxCmd(g), newVersionCmd(), newBackendsCmd(g), newServeCmd(g), newSessionCmd(g), newSandboxesCmd(g), newLedgerCmd(g))
	root.AddCommand(newTenantCmd(g))
	root.AddCommand(newGatewayCmd(g))
	root.AddCommand(newPolicyCmd(g))
	root.AddCommand(newMCPCmd(g))
	root.SetOut(os.Stdout)
	root.SetErr(os.Stderr)
	return root
}

func (g *globals) logger() *slog.Logger {
	lvl := slog.LevelInfo
	if g.verbose {
		lvl = slog.LevelDebug
	}
	opts := &slog.HandlerOptions{Level: lvl}
	if g.logJSON {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

func (g *globals) imagesDir() string { return filepath.Join(g.stateDir, "images") }

// vmCacheDir is where VM kernels, busybox and initramfs images are
// cached: env PADDOCK_VM_CACHE, else <state-dir>/vm-cache (which is the
// qemu backend's own default for <state-dir>/images).
func (g *globals) vmCacheDir() string {
	if d := os.Getenv("PADDOCK_VM_CACHE"); d != "" {
		return d
	}
	return filepath.Join(g.stateDir, "vm-cache")
}

// guestBinary finds paddock-guest: the flag, then beside this binary.
func (g *globals) guestBinary() (string, error) {
	if g.guest != "" {
		if _, err := os.Stat(g.guest); err != nil {
			return "", fmt.Errorf("guest binary %s: %w", g.guest, err)
		}
		return g.guest, nil
	}
	self, err := os.Executable()
	if err == nil {
		p := filepath.Join(filepath.Dir(self), "paddock-guest")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("paddock-guest not found beside this binary: run `make build`, or pass --guest PATH")
}

func (g *globals) backend(name string) (hypervisor.Backend, error) {
	return g.backendWith(name, false)
}

// backendWith opens a backend; adopt keeps what an earlier process left
// running for hypervisor.Adopter (the daemon adopts, then sweeps).
func (g *globals) backendWith(name string, adopt bool) (hypervisor.Backend, error) {
	guest, err := g.guestBinary()
	if err != nil {
		return nil, err
	}
	c, err := hypervisor.Lookup(name)
	if err != nil {
		return nil, usageError{err}
	}
	opts := map[string]string{"cache": g.vmCacheDir()}
	if g.storeSize != "" {
		opts["store_size"] = g.storeSize
	}
	b, err := c(hypervisor.Config{StateDir: g.stateDir, GuestBinary: guest, ImagesDir: g.imagesDir(), Logger: g.logger(), AdoptLeftovers: adopt,
		Options: opts, DiskReserve: g.diskReserve})
	if errors.Is(err, hypervisor.ErrInvalidSpec) {
		return nil, usageError{err}
	}
	return b, err
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(c *cobra.Command, _ []string) {
			fmt.Fprintln(c.OutOrStdout(), "paddock", version)
		},
	}
}

var version = "dev"
