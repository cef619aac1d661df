package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"paddock.dev/paddock/guest/api"
)

// gitShadowBase is the directory the per-command git directories are made
// in (api.GitCommand): beside the spool directory, /var/lib/paddock-git
// in a sandbox. Root-owned and mode 0711 when the agent is root, so a
// guest user who is not root can neither list nor change it.
func (s *Server) gitShadowBase() string {
	return filepath.Join(filepath.Dir(s.cfg.SpoolDir), "paddock-git")
}

// gitEnvDropped are the agent's variables a git command does not get,
// besides every GIT_*: they name programs (PAGER, EDITOR, VISUAL,
// SSH_ASKPASS) or where git finds its global files (HOME,
// XDG_CONFIG_HOME).
var gitEnvDropped = []string{"HOME", "XDG_CONFIG_HOME", "PAGER", "EDITOR", "VISUAL", "SSH_ASKPASS", "EMAIL"}

// gitCommand turns an exec with Git into the command to run: git with
// c.Git.Args, the environment, and a private common directory holding the
// host's config (api.GitCommand). cleanup removes that directory; call it
// once the command has ended.
func (s *Server) gitCommand(c *api.Command) (*api.Command, []string, func(), error) {
	g := c.Git
	switch {
	case len(c.Argv) > 0 || c.Shell != "":
		return nil, nil, nil, fmt.Errorf("%w: a git command gives its arguments in git.args, not in argv or shell", ErrBadRequest)
	case len(g.Args) == 0:
		return nil, nil, nil, fmt.Errorf("%w: git.args is empty", ErrBadRequest)
	case len(g.Config) > api.MaxGitConfigBytes:
		return nil, nil, nil, fmt.Errorf("%w: git.config is %d bytes, more than %d", ErrTooLarge, len(g.Config), api.MaxGitConfigBytes)
	case strings.ContainsRune(g.Config, 0):
		return nil, nil, nil, fmt.Errorf("%w: git.config contains a NUL byte", ErrBadRequest)
	}
	dirs := map[string]*string{"git_dir": &g.GitDir, "common_dir": &g.CommonDir, "work_tree": &g.WorkTree}
	for _, name := range []string{"git_dir", "common_dir", "work_tree"} {
		clean, _, err := checkPath(*dirs[name])
		if err != nil {
			return nil, nil, nil, fmt.Errorf("git.%s: %w", name, err)
		}
		*dirs[name] = clean
	}
	for _, a := range g.Args {
		if strings.ContainsRune(a, 0) {
			return nil, nil, nil, fmt.Errorf("%w: git.args has an argument with a NUL byte", ErrBadRequest)
		}
	}
	dir, err := s.gitShadow(g)
	if err != nil {
		return nil, nil, nil, err
	}
	cleanup := func() {
		if err := os.RemoveAll(dir); err != nil {
			s.log.Warn("remove a git command's directory", "dir", dir, "err", err)
		}
	}
	env := make([]string, 0, len(s.baseEnv)+len(c.Env)+16)
	for _, kv := range s.baseEnv {
		k, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(k, "GIT_") && !slices.Contains(gitEnvDropped, k) {
			env = append(env, kv)
		}
	}
	for _, kv := range c.Env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsRune(kv, 0) {
			cleanup()
			return nil, nil, nil, fmt.Errorf("%w: env entry %q must be KEY=VALUE without NUL", ErrBadRequest, kv)
		}
		env = append(slicesDeleteKey(env, k), kv)
	}
	for _, kv := range []string{
		"GIT_DIR=" + g.GitDir,
		"GIT_COMMON_DIR=" + dir,
		"GIT_WORK_TREE=" + g.WorkTree,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_ATTR_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_PAGER=cat",
		"GIT_EDITOR=true",
		"HOME=" + dir,
		"XDG_CONFIG_HOME=" + dir,
	} {
		k, _, _ := strings.Cut(kv, "=")
		env = append(slicesDeleteKey(env, k), kv)
	}
	out := *c
	out.Git = nil
	out.Argv = append([]string{"git"}, g.Args...)
	if c.Confine.Enabled() {
		cf := *c.Confine
		cf.ReadOnly = append(slices.Clone(cf.ReadOnly), dir)
		out.Confine = &cf
	}
	return &out, env, cleanup, nil
}

// gitShadow makes the common directory one git command gets: the host's
// config, no hooks, and links to the repository's shared parts.
func (s *Server) gitShadow(g *api.GitCommand) (string, error) {
	base := s.gitShadowBase()
	if err := os.MkdirAll(base, 0o711); err != nil {
		return "", fmt.Errorf("git directory %s: %w", base, err)
	}
	fi, err := os.Lstat(base)
	if err != nil {
		return "", fmt.Errorf("git directory %s: %w", base, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o022 != 0 {
		return "", fmt.Errorf("git directory %s must be a directory of the agent's user that nobody else can write (mode %v)", base, fi.Mode())
	}
	if fi.Mode().Perm() != 0o711 {
		if err := os.Chmod(base, 0o711); err != nil {
			return "", err
		}
	}
	dir, err := os.MkdirTemp(base, "g-")
	if err != nil {
		return "", err
	}
	fail := func(err error) (string, error) {
		os.RemoveAll(dir)
		return "", err
	}
	// Readable by the guest user git runs as, writable only by the agent.
	if err := os.Chmod(dir, 0o755); err != nil {
		return fail(err)
	}
	for _, name := range api.GitShadowLinks {
		if err := os.Symlink(filepath.Join(g.CommonDir, name), filepath.Join(dir, name)); err != nil {
			return fail(err)
		}
	}
	f, err := os.OpenFile(filepath.Join(dir, "config"), os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return fail(err)
	}
	if _, err := f.WriteString(g.Config); err != nil {
		f.Close()
		return fail(err)
	}
	if err := f.Close(); err != nil {
		return fail(err)
	}
	return dir, nil
}
