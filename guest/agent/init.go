package agent

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// forwardedSignals are passed from init to the serve child.
var forwardedSignals = []os.Signal{
	syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2,
}

// RunInit is PID 1 of a sandbox's PID namespace. It starts argv (the serve
// command) as its child, forwards termination signals to it, reaps every
// process that is reparented to it, and returns the child's exit status
// (128+n when signal n killed it) once the child has exited. Outside PID 1
// it makes itself a child subreaper, so orphans still come to it.
func RunInit(argv []string) int { return RunInitFiles(argv, nil) }

// RunInitFiles is RunInit with extra descriptors for the child (the first
// becomes its fd 3).
func RunInitFiles(argv []string, extra []*os.File) int {
	if len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "paddock-guest init: no command; usage: paddock-guest init -- command [args...]")
		return 2
	}
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	sigs := make(chan os.Signal, 32)
	signal.Notify(sigs, append([]os.Signal{syscall.SIGCHLD}, forwardedSignals...)...)
	defer signal.Stop(sigs)

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.ExtraFiles = extra
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "paddock-guest init: %v\n", err)
		return 127
	}
	child := cmd.Process.Pid
	// The child is reaped below with every other process, never by
	// cmd.Wait, so one wait4(-1) loop sees them all.
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			_ = syscall.Kill(child, sig.(syscall.Signal))
			continue
		}
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if err == unix.EINTR {
				continue
			}
			if pid <= 0 || err != nil {
				break
			}
			if pid == child {
				if ws.Signaled() {
					return 128 + int(ws.Signal())
				}
				return ws.ExitStatus()
			}
		}
	}
	return 1
}
