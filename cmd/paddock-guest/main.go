// Command paddock-guest is the agent that runs inside every Paddock
// sandbox. Subcommands:
//
//	serve    serve the guest API (guest/agent) on a unix socket
//	init     run as PID 1: start a command, forward signals, reap orphans
//	sandbox-init  first process of a namespace sandbox: build its root, then init + serve
//	vm-init  PID 1 of a virtual machine: mount, then init + vm-serve
//	vm-serve serve the guest API over the VM's agent channel (guest/vminit)
//	confine  apply a confinement policy, then exec a command (see api.ConfineArgs)
//	version  print the version
//
// It is built static and kept small: see deps_test.go for what it may not
// import.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"paddock.dev/paddock/guest/agent"
	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/egressfwd"
	"paddock.dev/paddock/guest/sandboxinit"
	"paddock.dev/paddock/guest/vminit"
)

// version is set with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if vminit.IsInitramfs() {
		// The kernel ran us as a VM's /init (hypervisor/qemu's kit).
		os.Exit(vminit.Initramfs())
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stderr)
	case "init":
		rest := args[1:]
		if len(rest) > 0 && rest[0] == "--" {
			rest = rest[1:]
		}
		return agent.RunInit(rest)
	case sandboxinit.Subcommand:
		return sandboxinit.Main(args[1:])
	case vminit.InitSubcommand:
		return vminit.Init(args[1:])
	case vminit.ServeSubcommand:
		return vminit.Serve(args[1:])
	case api.ConfineSubcommand:
		return confineMain(args[1:])
	case "version":
		fmt.Fprintf(stdout, "paddock-guest %s (protocol %d)\n", version, api.Version)
		return 0
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "paddock-guest: unknown subcommand %q\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: paddock-guest <command> [flags]
  serve    serve the guest API (--listen-fd N or --listen PATH; -h for flags)
  init     init -- command...: run command as PID 1's child, reap orphans
  confine  confine --policy-fd 3 --report-fd 4 -- argv...
  version  print the version
`)
}

func serve(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listenFD := fs.Int("listen-fd", -1, "file descriptor of a listening unix socket to serve on")
	listen := fs.String("listen", "", "unix socket path to listen on (tests, development)")
	root := fs.String("root", "/", "directory file operations are confined to")
	user := fs.String("user", "", "uid:gid commands run as (when the agent is root)")
	home := fs.String("home", "", "home directory of the guest user")
	spool := fs.String("spool-dir", agent.DefaultSpoolDir, "directory for job output spools")
	uploads := fs.String("upload-dir", agent.DefaultUploadDir, "directory for upload parts")
	logJSON := fs.Bool("log-json", false, "log JSON lines instead of text")
	debug := fs.Bool("debug", false, "log every request")
	egressDir := fs.String("egress-dir", "", "directory with the host's egress sockets: serve the proxy and resolver on loopback (see guest/egressfwd)")
	var env envFlag
	fs.Var(&env, "env", "KEY=VALUE added to every command's environment (repeatable)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	level := slog.LevelInfo
	if *debug {
		level = slog.LevelDebug
	}
	opts := &slog.HandlerOptions{Level: level}
	var log *slog.Logger
	if *logJSON {
		log = slog.New(slog.NewJSONHandler(stderr, opts))
	} else {
		log = slog.New(slog.NewTextHandler(stderr, opts))
	}

	ln, err := listener(*listenFD, *listen)
	if err != nil {
		log.Error("listen", "err", err)
		return 1
	}
	srv, err := agent.New(agent.Config{
		Root:      *root,
		GuestUser: *user,
		Home:      *home,
		SpoolDir:  *spool,
		UploadDir: *uploads,
		Env:       env,
		Logger:    log,
	})
	if err != nil {
		log.Error("configure agent", "err", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if *egressDir != "" {
		// A sandbox meant to have egress and left without it would look
		// offline for no reason: refuse to start instead.
		if _, err := egressfwd.Start(ctx, egressfwd.Config{Dir: *egressDir, Logger: log}); err != nil {
			log.Error("egress forwarders", "err", err)
			return 1
		}
	}
	if err := srv.Serve(ctx, ln); err != nil {
		log.Error("serve", "err", err)
		return 1
	}
	return 0
}

// envFlag collects repeated --env KEY=VALUE flags.
type envFlag []string

func (e *envFlag) String() string { return strings.Join(*e, " ") }

func (e *envFlag) Set(v string) error {
	if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
		return fmt.Errorf("%q is not KEY=VALUE", v)
	}
	*e = append(*e, v)
	return nil
}

// listener returns the socket passed as fd, or listens on path.
func listener(fd int, path string) (net.Listener, error) {
	switch {
	case fd >= 0 && path != "":
		return nil, errors.New("give --listen-fd or --listen, not both")
	case fd >= 0:
		f := os.NewFile(uintptr(fd), "listen-fd")
		if f == nil {
			return nil, fmt.Errorf("fd %d is not open", fd)
		}
		defer f.Close() // FileListener dups it
		return net.FileListener(f)
	case path != "":
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("remove stale socket: %w", err)
		}
		return net.Listen("unix", path)
	}
	return nil, errors.New("give --listen-fd N (a listening socket) or --listen PATH")
}
