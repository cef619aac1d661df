package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"paddock.dev/paddock/guest/api"
)

// pipeGrace is how long output is still read after a command exits, for
// background children that hold its pipes.
const pipeGrace = 2 * time.Second

// process is a command ready to start, with the pipes of the confine
// protocol when it is confined.
type process struct {
	cmd     *exec.Cmd
	confine bool
	policy  []byte
	policyW *os.File // parent's end of the policy pipe
	reportR *os.File // parent's end of the report pipe
	// childEnds are closed in the parent once the child has started.
	childEnds []*os.File
	report    chan *api.ConfineReport
}

// commandArgv returns the argv of c (/bin/sh -c for a shell line).
func commandArgv(c *api.Command) ([]string, error) {
	switch {
	case len(c.Argv) > 0 && c.Shell != "":
		return nil, fmt.Errorf("%w: give argv or shell, not both", ErrBadRequest)
	case c.Shell != "":
		return []string{"/bin/sh", "-c", c.Shell}, nil
	case len(c.Argv) == 0:
		return nil, fmt.Errorf("%w: no command: give argv (a list) or shell (a line)", ErrBadRequest)
	case c.Argv[0] == "":
		return nil, fmt.Errorf("%w: argv[0] is empty", ErrBadRequest)
	}
	return c.Argv, nil
}

// commandEnv validates extra and returns the base environment with extra
// applied on top (later entries win).
func (s *Server) commandEnv(extra []string) ([]string, error) {
	env := make([]string, 0, len(s.baseEnv)+len(extra))
	env = append(env, s.baseEnv...)
	for _, kv := range extra {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsRune(kv, 0) {
			return nil, fmt.Errorf("%w: env entry %q must be KEY=VALUE without NUL", ErrBadRequest, kv)
		}
		env = slicesDeleteKey(env, k)
		env = append(env, kv)
	}
	return env, nil
}

func slicesDeleteKey(env []string, key string) []string {
	out := env[:0]
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != key {
			out = append(out, kv)
		}
	}
	return out
}

func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, _ := strings.Cut(env[i], "="); k == key {
			return v
		}
	}
	return ""
}

// lookPath finds name on the command's own PATH (not the agent's).
func lookPath(name, pathList string) (string, error) {
	if strings.Contains(name, "/") {
		if !path.IsAbs(name) {
			return "", fmt.Errorf("%w: command %q is a relative path; give an absolute one or a bare name", ErrBadRequest, name)
		}
		if err := checkExecutable(name); err != nil {
			return "", fmt.Errorf("%w: command %s: %v", ErrBadRequest, name, err)
		}
		return name, nil
	}
	for _, dir := range filepath.SplitList(pathList) {
		if !path.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		if checkExecutable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: command %q not found on PATH %s", ErrBadRequest, name, pathList)
}

func checkExecutable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return errors.New("is a directory")
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return errors.New("is not executable")
	}
	return nil
}

// argvSize is the bytes argv and env take in the new process.
func argvSize(argv, env []string) int {
	n := 0
	for _, s := range argv {
		n += len(s) + 1
	}
	for _, s := range env {
		n += len(s) + 1
	}
	return n
}

// newProcess prepares c to run in its own process group as the guest user,
// through `confine` when c asks for confinement. With a non-nil ctx the
// command is killed (group and all) when ctx is done.
func (s *Server) newProcess(ctx context.Context, c *api.Command) (*process, error) {
	if c.Git != nil {
		return nil, fmt.Errorf("%w: a git command (field git) runs through exec only", ErrBadRequest)
	}
	env, err := s.commandEnv(c.Env)
	if err != nil {
		return nil, err
	}
	return s.prepareProcess(ctx, c, env)
}

// prepareProcess is newProcess with the environment already made.
func (s *Server) prepareProcess(ctx context.Context, c *api.Command, env []string) (*process, error) {
	argv, err := commandArgv(c)
	if err != nil {
		return nil, err
	}
	if n := argvSize(argv, env); n > api.MaxArgvBytes {
		return nil, fmt.Errorf("%w: argv and env take %d bytes, more than %d", ErrTooLarge, n, api.MaxArgvBytes)
	}
	dir, err := s.commandDir(c.Cwd)
	if err != nil {
		return nil, err
	}
	bin, err := lookPath(argv[0], envValue(env, "PATH"))
	if err != nil {
		return nil, err
	}
	p := &process{confine: c.Confine.Enabled()}
	exe, args := bin, argv
	if p.confine {
		exe = s.cfg.ConfineBinary
		args = append([]string{exe}, api.ConfineArgs(append([]string{bin}, argv[1:]...))...)
		if p.policy, err = json.Marshal(c.Confine); err != nil {
			return nil, err
		}
		if len(p.policy) > api.ConfineMaxPolicyBytes {
			return nil, fmt.Errorf("%w: confinement policy is %d bytes, more than %d", ErrTooLarge, len(p.policy), api.ConfineMaxPolicyBytes)
		}
	}
	if ctx != nil {
		p.cmd = exec.CommandContext(ctx, exe)
	} else {
		p.cmd = exec.Command(exe)
	}
	p.cmd.Args = args
	p.cmd.Env = env
	p.cmd.Dir = dir
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: s.cred}
	if p.confine {
		if err := p.openConfinePipes(); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// commandDir validates the working directory, Home (or /) by default.
// It is a path as the command sees the file system, or one under Root
// with Config.CwdInRoot.
func (s *Server) commandDir(cwd string) (string, error) {
	if cwd == "" {
		if fi, err := os.Stat(s.cfg.Home); err == nil && fi.IsDir() {
			return s.cfg.Home, nil
		}
		return "/", nil
	}
	clean, _, err := checkPath(cwd)
	if err != nil {
		return "", fmt.Errorf("cwd: %w", err)
	}
	dir := clean
	if s.cfg.CwdInRoot {
		dir = filepath.Join(s.cfg.Root, clean)
	}
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%w: cwd %s is not an existing directory", ErrBadRequest, clean)
	}
	return dir, nil
}

// openConfinePipes sets up fd 3 (policy, read by confine) and fd 4
// (report, written by confine).
func (p *process) openConfinePipes() error {
	policyR, policyW, err := os.Pipe()
	if err != nil {
		return err
	}
	reportR, reportW, err := os.Pipe()
	if err != nil {
		policyR.Close()
		policyW.Close()
		return err
	}
	// ExtraFiles[i] becomes fd 3+i.
	p.cmd.ExtraFiles = []*os.File{policyR, reportW}
	p.policyW, p.reportR = policyW, reportR
	p.childEnds = append(p.childEnds, policyR, reportW)
	p.report = make(chan *api.ConfineReport, 1)
	return nil
}

// CommandOOMScoreAdj is the oom_score_adj of every command the agent starts.
const CommandOOMScoreAdj = "500"

// abort releases the pipes of a process that will not be started.
func (p *process) abort() {
	for _, f := range p.childEnds {
		f.Close()
	}
	p.childEnds = nil
	if p.confine {
		p.policyW.Close()
		p.reportR.Close()
	}
}

// start starts the command and, when confined, sends the policy and
// starts reading the report.
func (p *process) start() error {
	if err := p.cmd.Start(); err != nil {
		p.abort()
		return fmt.Errorf("start %s: %w", p.cmd.Path, err)
	}
	for _, f := range p.childEnds {
		f.Close()
	}
	p.childEnds = nil
	// When the sandbox runs out of memory, a command is what the OOM
	// killer picks, not the agent (see sandboxinit.lowerPrivileges).
	if os.Geteuid() == 0 {
		_ = os.WriteFile(fmt.Sprintf("/proc/%d/oom_score_adj", p.cmd.Process.Pid), []byte(CommandOOMScoreAdj), 0)
	}
	if p.confine {
		go func() {
			_, _ = p.policyW.Write(p.policy)
			p.policyW.Close()
		}()
		go func() {
			var rep api.ConfineReport
			err := json.NewDecoder(io.LimitReader(p.reportR, api.ConfineMaxReportBytes)).Decode(&rep)
			p.reportR.Close()
			if err != nil {
				p.report <- nil
				return
			}
			p.report <- &rep
		}()
	}
	return nil
}

// waitReport returns the confine report, nil when confine wrote none
// within d (or the command is not confined).
func (p *process) waitReport(d time.Duration) *api.ConfineReport {
	if !p.confine {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case rep := <-p.report:
		p.report <- rep // keep it for the next caller
		return rep
	case <-t.C:
		return nil
	}
}

// confineFailure explains a confined command that exited without a report.
func confineFailure(code int, stderr []byte) error {
	msg := strings.TrimSpace(string(stderr))
	if len(msg) > 4096 {
		msg = msg[:4096]
	}
	if code == api.ConfineExitRefused {
		return fmt.Errorf("%w: confinement refused to run the command: %s", ErrConflict, msg)
	}
	return fmt.Errorf("confinement helper exited with status %d before running the command: %s", code, msg)
}

// killGroup signals the process group pgid.
func killGroup(pgid int, sig syscall.Signal) error {
	if pgid <= 1 {
		return fmt.Errorf("refusing to signal process group %d", pgid)
	}
	return syscall.Kill(-pgid, sig)
}

// exitStatus returns the exit code and, when killed by a signal, -1 and
// the signal's name.
func exitStatus(ps *os.ProcessState) (int, string) {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -1, signalName(ws.Signal())
	}
	return ps.ExitCode(), ""
}

// signalName is "TERM" for SIGTERM.
func signalName(sig syscall.Signal) string {
	if n := unix.SignalName(sig); n != "" {
		return strings.TrimPrefix(n, "SIG")
	}
	return fmt.Sprintf("%d", int(sig))
}

// parseSignal reads "TERM", "SIGTERM", "term" or a number.
func parseSignal(v string) (syscall.Signal, error) {
	if v == "" {
		return syscall.SIGTERM, nil
	}
	name := strings.ToUpper(v)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if sig := unix.SignalNum(name); sig != 0 {
		return sig, nil
	}
	var n int
	if _, err := fmt.Sscanf(v, "%d", &n); err == nil && n > 0 && n < 65 && fmt.Sprint(n) == v {
		return syscall.Signal(n), nil
	}
	return 0, fmt.Errorf("%w: unknown signal %q; use a name such as TERM, KILL, INT or HUP", ErrBadRequest, v)
}
