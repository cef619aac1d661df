// Package agent is paddock-guest's server: the HTTP API that runs inside a
// sandbox and gives the host commands, supervised background jobs, files,
// resumable uploads, a terminal, readiness probes and port forwards. It speaks the wire
// types of guest/api over any net.Listener (a unix socket for procbox,
// vsock or virtio-serial for VMs).
//
// Commands run in their own process group so a timeout or a kill reaches
// the whole tree; file operations go through an os.Root so a symlink cannot
// lead them out of Config.Root. RunInit is the small PID 1 that starts the
// server inside a fresh PID namespace.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"paddock.dev/paddock/guest/api"
)

// Defaults used when Config leaves a field empty.
const (
	DefaultSpoolDir = "/var/lib/paddock-jobs"
	// Both live in root-owned /var/lib: a directory under a world-writable
	// one (/tmp, /var/tmp) could be pre-planted as a symlink by the guest
	// user and make the root agent write where it points.
	DefaultUploadDir = "/var/lib/paddock-uploads"
	defaultPATH      = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

// Config is what the agent needs to know about its sandbox.
type Config struct {
	// Root is the directory file operations are confined to: "/" in a
	// sandbox, a temporary directory in tests. Commands are not chrooted.
	Root string
	// GuestUser is "uid:gid". When set and the agent runs as root,
	// commands run as that user with no supplementary groups, and the
	// files routes act with its rights (guestuser.go).
	GuestUser string
	// Home is the guest user's home: HOME, the default working directory
	// and where the probe looks for a Playwright browser cache.
	Home string
	// BaseEnv is the environment every command starts from (KEY=VALUE).
	// Empty means PATH, HOME, LANG and TERM with usual values.
	BaseEnv []string
	// Env is added on top of BaseEnv (replacing entries with the same key).
	Env []string
	// SpoolDir holds job output, one directory per job.
	SpoolDir string
	// UploadDir holds the parts of resumable uploads.
	UploadDir string
	// ConfineBinary is run as `ConfineBinary confine ...` to start a
	// confined command (see api.ConfineArgs); empty means this executable:
	// os.Executable() when that is a file on disk, else /proc/self/exe
	// (an agent run from a sealed memfd has no path).
	ConfineBinary string
	// PTYConfine, when enabled, confines every terminal session.
	PTYConfine *api.Confinement
	// Unprivileged says the agent already runs as the ordinary user its
	// commands should run as, so it never switches users: commands,
	// terminals and the files routes act with the agent's own rights and
	// GuestUser only names who they would be in a sandbox. Only
	// hypervisor/fake sets it, for tests that run without root. New
	// refuses it when the agent runs as root (every command would be
	// root); the real backends run the agent as root and no paddock-guest
	// flag sets it, so they cannot turn it on.
	Unprivileged bool
	// CwdInRoot takes a command's working directory as a path under
	// Root, for an agent that serves a directory and not the file system
	// its commands see (hypervisor/fake): a session's "/workspace" is then
	// Root's workspace. Like Unprivileged, only the fake sets it.
	CwdInRoot bool
	// Logger receives the agent's logs; nil discards them.
	Logger *slog.Logger
}

// Server is the guest agent. Build it with New, serve it with Serve, and
// stop its jobs with Close.
type Server struct {
	cfg     Config
	log     *slog.Logger
	baseEnv []string
	// cred is the guest user's credential, nil when commands run as the
	// agent's own user.
	cred *syscall.Credential
	// owner is who created files are chowned to; chown is false when
	// nothing is to be changed.
	uid, gid int
	chown    bool
	// systemDirs are the directories the files routes never change:
	// api.SystemDirs and the agent's spool and upload directories.
	systemDirs []string

	jobs    *supervisor
	uploads sync.Mutex // serialises upload part bookkeeping
	mux     *http.ServeMux

	// forwards are the open port forwards (forward.go).
	forwards forwardTable
}

// New checks cfg and returns a server. It touches nothing on disk: spool
// and upload directories are created when first used.
func New(cfg Config) (*Server, error) {
	if cfg.Root == "" {
		cfg.Root = "/"
	}
	if !strings.HasPrefix(cfg.Root, "/") {
		return nil, fmt.Errorf("root %q must be an absolute path", cfg.Root)
	}
	if cfg.SpoolDir == "" {
		cfg.SpoolDir = DefaultSpoolDir
	}
	if cfg.UploadDir == "" {
		cfg.UploadDir = DefaultUploadDir
	}
	if cfg.Home == "" {
		cfg.Home = "/"
		if h, err := os.UserHomeDir(); err == nil {
			cfg.Home = h
		}
	}
	if cfg.ConfineBinary == "" {
		cfg.ConfineBinary = "/proc/self/exe"
		if exe, err := os.Executable(); err == nil {
			if fi, err := os.Stat(exe); err == nil && fi.Mode().IsRegular() {
				cfg.ConfineBinary = exe
			}
		}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Unprivileged && os.Geteuid() == 0 {
		return nil, errors.New("the agent runs as root: Unprivileged is only for an agent that already runs as an ordinary user, and as root it would run every command as root")
	}
	if os.Geteuid() == 0 {
		for _, d := range []string{cfg.SpoolDir, cfg.UploadDir} {
			if err := privateDir(d); err != nil {
				return nil, err
			}
		}
	}
	s := &Server{cfg: cfg, log: log, uid: -1, gid: -1}
	s.systemDirs = slices.Clone(api.SystemDirs)
	for _, d := range []string{cfg.SpoolDir, cfg.UploadDir} {
		if d = filepath.Clean(d); filepath.IsAbs(d) && d != "/" {
			s.systemDirs = append(s.systemDirs, d)
		}
	}
	if cfg.GuestUser != "" {
		uid, gid, err := parseUser(cfg.GuestUser)
		if err != nil {
			return nil, err
		}
		if os.Geteuid() == 0 {
			s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
			s.uid, s.gid, s.chown = uid, gid, true
		}
	}
	base := cfg.BaseEnv
	if len(base) == 0 {
		base = []string{"PATH=" + defaultPATH, "HOME=" + cfg.Home, "LANG=C.UTF-8", "TERM=xterm-256color"}
	}
	s.baseEnv = slices.Clone(base)
	env, err := s.commandEnv(cfg.Env)
	if err != nil {
		return nil, fmt.Errorf("config env: %w", err)
	}
	s.baseEnv = env
	s.jobs = newSupervisor(s)
	s.mux = s.routes()
	return s, nil
}

// parseUser reads "uid:gid".
func parseUser(v string) (uid, gid int, err error) {
	u, g, ok := strings.Cut(v, ":")
	if ok {
		uid, err = strconv.Atoi(u)
		if err == nil {
			gid, err = strconv.Atoi(g)
		}
	}
	if !ok || err != nil || uid < 0 || gid < 0 {
		return 0, 0, fmt.Errorf("guest user %q must be numeric uid:gid, e.g. 1000:1000", v)
	}
	return uid, gid, nil
}

// Handler returns the agent's HTTP handler.
func (s *Server) Handler() http.Handler { return s.mux }

// Serve answers requests on ln until ctx is done, then stops accepting,
// gives requests in flight a few seconds and kills every running job.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	s.log.Info("guest agent serving", "addr", ln.Addr().String(), "root", s.cfg.Root)
	select {
	case err := <-errc:
		s.Close()
		return err
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	err := srv.Shutdown(shutCtx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = srv.Close()
	}
	s.Close()
	if err == nil || errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close kills every running job's process group and ends the open port
// forwards. It is safe to call more than once.
func (s *Server) Close() { s.jobs.close(); s.forwards.close() }

// privateDir makes sure dir is a real directory only root can write, under
// a parent only root can write, so nobody else can swap it for a symlink.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("agent directory %s: %w", dir, err)
	}
	for _, p := range []string{filepath.Dir(dir), dir} {
		fi, err := os.Lstat(p)
		if err != nil {
			return fmt.Errorf("agent directory %s: %w", p, err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !fi.IsDir() || !ok || st.Uid != 0 || (fi.Mode().Perm()&0o022 != 0 && fi.Mode()&os.ModeSticky == 0) || (p == dir && fi.Mode().Perm()&0o022 != 0) {
			return fmt.Errorf("agent directory %s must be a root-owned directory that only root can write (mode %v)", p, fi.Mode())
		}
	}
	return nil
}
