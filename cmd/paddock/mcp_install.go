package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// defaultStateDir is the CLI's --state-dir when neither the flag nor
// PADDOCK_STATE_DIR says otherwise (main.go).
const defaultStateDir = "/var/lib/paddock"

// sessionIDShape is what --session may be: ids are "ses-" and hex.
var sessionIDShape = regexp.MustCompile(`^ses-[0-9a-f]{1,64}$`)

// mcpInstallOpts is what `paddock mcp install` was asked for.
type mcpInstallOpts struct {
	url, tokenFile, session string
	project, config         string
	allowWrite, dryRun      bool
}

// defaultTokenFile is where the MCP server's token is looked for unless
// --token-file says otherwise: ~/.config/paddock/token (the path docs/mcp.md
// uses).
func defaultTokenFile() string {
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(configHome(home), "paddock", "token")
}

// checkTokenFile refuses a token file that is missing, not a plain file, or
// that anyone but its owner could read or change.
func checkTokenFile(p string) error {
	st, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return usageError{fmt.Errorf("token file %s does not exist: put the daemon token there, readable by you alone, e.g. (umask 077; mkdir -p %s; printf '%%s\\n' \"$PADDOCK_TOKEN\" > %s)", p, filepath.Dir(p), p)}
	}
	if err != nil {
		return usageError{fmt.Errorf("token file: %w", err)}
	}
	if !st.Mode().IsRegular() {
		return usageError{fmt.Errorf("token file %s is not a regular file", p)}
	}
	if runtime.GOOS != "windows" && st.Mode().Perm()&0o077 != 0 {
		return usageError{fmt.Errorf("token file %s can be read or changed by others (mode %04o): run chmod 600 %s, then this again", p, st.Mode().Perm(), p)}
	}
	return nil
}

// refusePlainRemote refuses a daemon URL (raw, parsed as u) that is
// plain http:// to a host other than this machine: the MCP server sends
// the token on every call, and over plain HTTP anyone on the path could
// read it. Both `mcp install` and `mcp serve` use it.
func refusePlainRemote(u *url.URL, raw string) error {
	if u.Scheme == "http" && !isLoopbackHost(u.Hostname()) {
		return usageError{fmt.Errorf("--url %q: plain http:// is only for a daemon on this machine (loopback); use https:// so the token is not sent in clear", raw)}
	}
	return nil
}

// mcpLaunchFor is the command a client runs: this binary's absolute path,
// `mcp serve` and the flags that reach the daemon. The token stays in its
// file; the config names only the file.
func mcpLaunchFor(g *globals, o mcpInstallOpts) (mcpLaunch, error) {
	exe, err := os.Executable()
	if err != nil {
		return mcpLaunch{}, fmt.Errorf("finding this binary: %w", err)
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	u, err := url.Parse(o.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return mcpLaunch{}, usageError{fmt.Errorf("--url %q: want https://HOST:PORT", o.url)}
	}
	if u.User != nil {
		return mcpLaunch{}, usageError{errors.New("--url must not carry a user or password: it would be written into the client's config")}
	}
	if err := refusePlainRemote(u, o.url); err != nil {
		return mcpLaunch{}, err
	}
	l := mcpLaunch{Command: exe, Args: []string{"mcp", "serve", "--url", o.url}}
	if g.stateDir != defaultStateDir {
		sd, err := filepath.Abs(g.stateDir)
		if err != nil {
			return mcpLaunch{}, err
		}
		// serve trusts a loopback daemon through its state dir's gateway root.
		l.Args = append([]string{"--state-dir", sd}, l.Args...)
	}
	if o.allowWrite {
		l.Args = append(l.Args, "--allow-write")
	}
	if o.session != "" {
		if !sessionIDShape.MatchString(o.session) {
			return mcpLaunch{}, usageError{fmt.Errorf("--session %q is not a session id (ses-0123456789abcdef)", o.session)}
		}
		l.Args = append(l.Args, "--session", o.session)
	}
	tf := o.tokenFile
	if tf == "" {
		if tf = defaultTokenFile(); tf == "" {
			return mcpLaunch{}, usageError{errors.New("no home directory: give --token-file")}
		}
	}
	if tf, err = filepath.Abs(tf); err != nil {
		return mcpLaunch{}, err
	}
	if err := checkTokenFile(tf); err != nil {
		return mcpLaunch{}, err
	}
	l.Args = append(l.Args, "--token-file", tf)
	if ca := os.Getenv("PADDOCK_CA"); ca != "" {
		abs, err := filepath.Abs(ca)
		if err != nil {
			return mcpLaunch{}, err
		}
		l.Env = map[string]string{"PADDOCK_CA": abs}
	}
	return l, nil
}

// mcpConfigPath is the file to write for client c: --config, else the
// project's file under --project, else the user-level file.
func mcpConfigPath(c mcpClient, o mcpInstallOpts) (path string, project bool, err error) {
	switch {
	case o.config != "" && o.project != "":
		return "", false, usageError{errors.New("give --config or --project, not both")}
	case o.config != "":
		p, err := filepath.Abs(o.config)
		return p, false, err
	case o.project != "":
		d, err := filepath.Abs(o.project)
		if err != nil {
			return "", false, err
		}
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			return "", false, usageError{fmt.Errorf("--project %s is not a directory", o.project)}
		}
		return filepath.Join(d, c.project), true, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", false, usageError{errors.New("no home directory: give --config")}
	}
	return c.user(home), false, nil
}

// resolveExisting is p with symlinks resolved in its longest existing
// prefix; the rest (not there yet) is joined on as written.
func resolveExisting(p string) (string, error) {
	rest := ""
	for cur := p; ; {
		r, err := filepath.EvalSymlinks(cur)
		if err == nil {
			return filepath.Join(r, rest), nil
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return "", err
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

// insideProject refuses a project config path that, through a symlink
// (the file or a directory on the way), lands outside the project: the
// install would otherwise write a user-wide or someone else's file.
func insideProject(projectDir, path string) (string, error) {
	abs, err := filepath.Abs(projectDir)
	if err != nil {
		return "", err
	}
	root, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	r, err := resolveExisting(path)
	if err != nil {
		return "", err
	}
	if rel, err := filepath.Rel(root, r); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", usageError{fmt.Errorf("%s leads outside the project (to %s) through a symlink: refusing to write it", path, r)}
	}
	return r, nil
}

// ourBackup matches the names writeConfigFile gives backups.
var ourBackup = regexp.MustCompile(`^\.bak-[0-9]{8}T[0-9]{6}Z(\.[0-9]+)?$`)

// removeOldBackups deletes the backups of p we made before, keeping keep.
func removeOldBackups(p, keep string) {
	ents, err := os.ReadDir(filepath.Dir(p))
	if err != nil {
		return
	}
	base := filepath.Base(p)
	for _, e := range ents {
		n := e.Name()
		if !e.Type().IsRegular() || !strings.HasPrefix(n, base) || !ourBackup.MatchString(n[len(base):]) {
			continue
		}
		if full := filepath.Join(filepath.Dir(p), n); full != keep {
			os.Remove(full)
		}
	}
}

// readConfigFile reads a config file (bounded); a missing file is empty.
func readConfigFile(p string) (data []byte, mode fs.FileMode, exists bool, err error) {
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, false, nil
	}
	if err != nil {
		return nil, 0, false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, false, err
	}
	if !st.Mode().IsRegular() {
		return nil, 0, false, fmt.Errorf("%s is not a regular file", p)
	}
	data, err = io.ReadAll(io.LimitReader(f, maxConfigFile+1))
	if err != nil {
		return nil, 0, false, err
	}
	if len(data) > maxConfigFile {
		return nil, 0, false, fmt.Errorf("%s is over %d MiB: not touching it", p, maxConfigFile>>20)
	}
	return data, st.Mode().Perm(), true, nil
}

// writeConfigFile puts data at p through a temporary file and a rename,
// with mode; a file that was there is first copied to p.bak-<time>
// (returned). Once the new file is in place, older backups of p made here
// are removed: only the newest is kept.
func writeConfigFile(p string, data, old []byte, mode fs.FileMode, existed bool, now time.Time) (backup string, err error) {
	dir := filepath.Dir(p)
	// A missing directory is private unless the file is meant to be read
	// by others (a project's file).
	dirMode := fs.FileMode(0o700)
	if mode&0o044 != 0 {
		dirMode = 0o755
	}
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return "", err
	}
	if existed {
		backup = p + ".bak-" + now.UTC().Format("20060102T150405Z")
		f, err := os.OpenFile(backup, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
		if errors.Is(err, fs.ErrExist) {
			backup = fmt.Sprintf("%s.%d", backup, now.UnixNano())
			f, err = os.OpenFile(backup, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
		}
		if err != nil {
			return "", fmt.Errorf("backing up %s: %w", p, err)
		}
		_, err = f.Write(old)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(backup)
			return "", fmt.Errorf("backing up %s: %w", p, err)
		}
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(p)+".tmp-*")
	if err != nil {
		return backup, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return backup, err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return backup, err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return backup, err
	}
	if err := tmp.Close(); err != nil {
		return backup, err
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return backup, err
	}
	if backup != "" {
		removeOldBackups(p, backup)
	}
	return backup, nil
}

func newMCPInstallCmd(g *globals) *cobra.Command {
	var o mcpInstallOpts
	cmd := &cobra.Command{
		Use:   "install CLIENT",
		Short: "Add Paddock's MCP server to an agent's own config: " + mcpClientList(),
		Long: `Write the "paddock" MCP server into CLIENT's configuration file, in that
client's own format, so the agent starts "paddock mcp serve" itself. Every other
key and server in the file is kept. The file is backed up next to itself
(NAME.bak-TIME) before it changes; a run that would change nothing writes
nothing. Only the newest backup is kept: older NAME.bak-TIME files made by
this command are removed when a new one is written. A file that does not
parse is refused and left alone. With --project, a config path that leads
outside the project through a symlink is refused.

--url must be https://, or http:// only for a daemon on this machine
(loopback): the server sends the token on every call.

The config names a token file (--token-file, default ~/.config/paddock/token),
never the token: the file must be readable by you alone. --dry-run prints the
file that would be written.`,
		Example: `  paddock mcp install claude-code --allow-write
  paddock mcp install vscode --project . --dry-run
  paddock mcp install codex --token-file ~/.config/paddock/session-token --session ses-0123456789abcdef`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: mcpClientNames(),
		RunE: func(c *cobra.Command, args []string) error {
			cl, ok := mcpClients[args[0]]
			if !ok {
				return usageError{fmt.Errorf("unknown client %q: want %s", args[0], mcpClientList())}
			}
			path, project, err := mcpConfigPath(cl, o)
			if err != nil {
				return err
			}
			l, err := mcpLaunchFor(g, o)
			if err != nil {
				return err
			}
			// Write through a symlink (a dotfiles checkout) rather than over it,
			// but never out of a project through one.
			if project {
				if path, err = insideProject(o.project, path); err != nil {
					return err
				}
			} else if r, err := filepath.EvalSymlinks(path); err == nil {
				path = r
			}
			old, mode, existed, err := readConfigFile(path)
			if err != nil {
				return err
			}
			out, changed, err := mergeConfig(cl, old, l)
			if err != nil {
				return usageError{fmt.Errorf("%s: %w; it was left as it was", path, err)}
			}
			w := c.OutOrStdout()
			if o.dryRun {
				if changed {
					fmt.Fprintf(c.ErrOrStderr(), "paddock: would write %s (dry run: nothing written)\n", path)
				} else {
					fmt.Fprintf(c.ErrOrStderr(), "paddock: %s already holds this (dry run: nothing written)\n", path)
				}
				_, err := w.Write(out)
				return err
			}
			if !changed {
				fmt.Fprintf(w, "%s: %s already has this paddock entry; nothing changed\n", cl.name, path)
				return nil
			}
			if !existed {
				// The file holds no secret; a project's file is meant to be shared.
				mode = 0o600
				if project {
					mode = 0o644
				}
			}
			backup, err := writeConfigFile(path, out, old, mode, existed, time.Now())
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "%s: wrote the paddock entry to %s\n", cl.name, path)
			if backup != "" {
				fmt.Fprintf(w, "%s: the previous file is in %s\n", cl.name, backup)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.url, "url", envOr("PADDOCK_URL", "https://127.0.0.1:7788"), "daemon URL the server calls; env PADDOCK_URL")
	f.StringVar(&o.tokenFile, "token-file", "", "file holding the token the server uses, readable by you alone (default ~/.config/paddock/token)")
	f.StringVar(&o.session, "session", "", "the session the tools work on when a call names none")
	f.BoolVar(&o.allowWrite, "allow-write", false, "let the agent use the tools that change things")
	f.StringVar(&o.project, "project", "", "write the project's file under this directory (.mcp.json, .vscode/mcp.json, opencode.json, ...) instead of the user's")
	f.StringVar(&o.config, "config", "", "write this file instead of the client's usual one")
	f.BoolVar(&o.dryRun, "dry-run", false, "print the file that would be written and write nothing")
	return cmd
}
