package session

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"path"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
	"paddock.dev/paddock/hypervisor/image"
)

// Workspace modes.
const (
	// ModeWritable is the default: the agent reads and writes the
	// workspace.
	ModeWritable = apiv1.ModeWritable
	// ModeReadOnly lets the agent read the workspace and nothing it runs
	// write to it (Landlock in the guest), and the files routes refuse
	// writes there.
	ModeReadOnly = apiv1.ModeReadOnly
	// ModeOverlay shows Lower, a directory of the image, at the
	// workspace path copy-on-write: the agent writes freely, Lower stays
	// as it was, and the baseline (taken after the mount) makes
	// artifacts show only the agent's changes.
	ModeOverlay = apiv1.ModeOverlay
	// modeClone is accepted for writable: a workspace cloned from git.
	modeClone = apiv1.ModeClone
)

// Workspace limits.
const (
	MaxWorkspacePath    = apiv1.MaxWorkspacePath
	MaxGitURL           = apiv1.MaxGitURL
	CloneTimeoutSeconds = 300
	// maxNoteStderr bounds how much of git's stderr a note keeps.
	maxNoteStderr = 1000
)

// WorkspaceRequest is the public wire type api.WorkspaceRequest, kept under this name here.
type WorkspaceRequest = apiv1.WorkspaceRequest

// checkWorkspace validates the workspace part of a create and returns its
// path, its mode and the parsed git source (nil when there is none).
func checkWorkspace(w WorkspaceRequest) (ws, mode string, src *gitSource, err error) {
	ws = w.Path
	if ws == "" {
		ws = "/workspace"
	}
	if !strings.HasPrefix(ws, "/") || strings.Contains(ws, "..") || strings.ContainsAny(ws, "\x00\n") || len(ws) > MaxWorkspacePath || ws == "/" {
		return "", "", nil, bad("workspace.path %q must be an absolute directory below /, without ..", ws)
	}
	ws = path.Clean(ws)
	if w.Lower != "" && w.Mode != ModeOverlay {
		return "", "", nil, bad("workspace.lower is for workspace.mode %q", ModeOverlay)
	}
	switch w.Mode {
	case "", ModeWritable, modeClone:
		mode = ModeWritable
	case ModeReadOnly:
		mode = ModeReadOnly
		for _, sys := range []string{"/dev", "/proc", "/sys"} {
			if pathWithin(ws, sys) {
				return "", "", nil, bad("a read-only workspace cannot be under %s", sys)
			}
		}
	case ModeOverlay:
		mode = ModeOverlay
		if w.Git != "" {
			return "", "", nil, bad("workspace.git cannot be combined with workspace.mode %q: the overlay shows workspace.lower", ModeOverlay)
		}
		lower := w.Lower
		if lower == "" {
			return "", "", nil, bad("workspace.mode %q needs workspace.lower, a directory of the image", ModeOverlay)
		}
		if !strings.HasPrefix(lower, "/") || path.Clean(lower) != lower || len(lower) > MaxWorkspacePath || lower == "/" || strings.ContainsAny(lower, "\x00\n:,") {
			return "", "", nil, bad("workspace.lower %q must be a clean absolute directory below /, without ':' or ','", lower)
		}
		if pathWithin(lower, ws) || pathWithin(ws, lower) {
			return "", "", nil, bad("workspace.lower %q and workspace.path %q must not contain each other", lower, ws)
		}
	default:
		return "", "", nil, bad("workspace.mode %q is unknown; use %q (the default), %q or %q", w.Mode, ModeWritable, ModeReadOnly, ModeOverlay)
	}
	if d := underSystemDir(ws); d != "" {
		return "", "", nil, bad("workspace.path %q is under %s, one of the image's system directories, which the files API never writes; pick a path such as /workspace, /srv/app or %s/app", ws, d, image.GuestHome)
	}
	if w.Git != "" {
		if src, err = parseGitURL(w.Git); err != nil {
			return "", "", nil, err
		}
	}
	return ws, mode, src, nil
}

// pathWithin reports whether p is dir or lies under it (both clean and
// absolute).
func pathWithin(p, dir string) bool {
	return dir == "/" || p == dir || strings.HasPrefix(p, dir+"/")
}

// gitSource is a workspace.git URL taken apart. URL is what git gets in
// its argv and Redacted what the session records; the credential, when
// the URL had one, reaches git only through the clone's environment.
type gitSource struct {
	URL      string
	Redacted string
	origin   string // scheme://host[:port]/, what the credential is scoped to
	user     string
	password string
	hasUser  bool
	rawUser  string // the userinfo as written in the URL (percent-encoded)
}

// parseGitURL checks a workspace.git URL. Its errors never quote the URL,
// which may hold a password.
func parseGitURL(raw string) (*gitSource, error) {
	if len(raw) > MaxGitURL {
		return nil, bad("workspace.git is longer than %d characters", MaxGitURL)
	}
	for _, r := range raw {
		if r <= ' ' || r == 0x7f || unicode.IsSpace(r) || unicode.IsControl(r) {
			return nil, bad("workspace.git must not contain whitespace or control characters")
		}
	}
	if !strings.HasPrefix(strings.ToLower(raw), "https://") {
		return nil, bad("workspace.git must be an https:// URL")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, bad("workspace.git is not a valid URL")
	}
	switch {
	case u.Host == "" || u.Hostname() == "":
		return nil, bad("workspace.git has no host")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(raw, "#"):
		return nil, bad("workspace.git must not have a query or a fragment")
	}
	g := &gitSource{origin: "https://" + u.Host + "/"}
	if u.User != nil {
		g.user = u.User.Username()
		g.password, _ = u.User.Password()
		g.hasUser = g.user != "" || g.password != ""
		authority, _, _ := strings.Cut(raw[len("https://"):], "/")
		if i := strings.LastIndex(authority, "@"); i >= 0 {
			g.rawUser = authority[:i]
		}
		u.User = nil
	}
	g.URL = u.String()
	g.Redacted = g.URL
	if g.hasUser {
		g.Redacted = "https://***@" + strings.TrimPrefix(g.URL, "https://")
	}
	return g, nil
}

// authHeader is the HTTP header git sends with the credential ("" when
// the URL had none).
func (g *gitSource) authHeader() string {
	if !g.hasUser {
		return ""
	}
	return "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(g.user+":"+g.password))
}

// cloneCommand is `git clone -- URL dest`. The credential goes in as
// configuration through the environment (GIT_CONFIG_COUNT and friends,
// git 2.31 or later), never in argv: an extra header for the URL's
// origin. Git adds extra headers to every request of the clone, including
// those after a redirect to another host, so with a credential redirects
// are not followed at all. Configuration from the environment is not
// written to the clone's .git/config, and credential helpers are switched
// off so none can store it. Git never prompts, and only https is allowed.
func (g *gitSource) cloneCommand(dest string) api.Command {
	env := []string{"GIT_TERMINAL_PROMPT=0", "GIT_ALLOW_PROTOCOL=https"}
	if h := g.authHeader(); h != "" {
		env = append(env,
			"GIT_CONFIG_COUNT=3",
			"GIT_CONFIG_KEY_0=http."+g.origin+".extraHeader",
			"GIT_CONFIG_VALUE_0="+h,
			"GIT_CONFIG_KEY_1=credential.helper",
			"GIT_CONFIG_VALUE_1=",
			"GIT_CONFIG_KEY_2=http.followRedirects",
			"GIT_CONFIG_VALUE_2=false",
		)
	}
	return api.Command{
		Argv:           []string{"git", "clone", "--quiet", "--", g.URL, dest},
		Env:            env,
		TimeoutSeconds: CloneTimeoutSeconds,
		MaxOutputBytes: 64 << 10,
	}
}

// secrets are the forms the credential could take in git's output,
// longest first. Pieces shorter than four characters are left out: they
// would match ordinary words, and git does not print the credential in
// the first place.
func (g *gitSource) secrets() []string {
	if !g.hasUser {
		return nil
	}
	creds := g.user + ":" + g.password
	rawUser, rawPassword, _ := strings.Cut(g.rawUser, ":")
	forms := []string{
		g.authHeader(),
		base64.StdEncoding.EncodeToString([]byte(creds)),
		g.rawUser, url.UserPassword(g.user, g.password).String(), creds,
		rawPassword, url.QueryEscape(g.password), url.PathEscape(g.password), g.password,
		rawUser, url.QueryEscape(g.user), url.PathEscape(g.user), g.user,
	}
	var out []string
	for _, f := range forms {
		if len(f) >= 4 {
			out = append(out, f)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// redact removes the credential from s.
func (g *gitSource) redact(s string) string {
	for _, sec := range g.secrets() {
		s = strings.ReplaceAll(s, sec, "***")
	}
	return s
}

// cloneResult is how the clone at create went; note is "" on success.
type cloneResult struct {
	note string
	took time.Duration
}

// cloneWorkspace clones src into ws as the guest user. A failure is not
// an error: it comes back as a note (credential removed) for the record.
func (m *Manager) cloneWorkspace(ctx context.Context, c *client.Client, ws string, src *gitSource) *cloneResult {
	ctx, cancel := context.WithTimeout(ctx, (CloneTimeoutSeconds+30)*time.Second)
	defer cancel()
	start := time.Now()
	res, err := c.Exec(ctx, api.ExecRequest{Command: src.cloneCommand(ws)})
	out := &cloneResult{took: time.Since(start)}
	switch {
	case err != nil && strings.Contains(err.Error(), "not found on PATH"):
		out.note = "git is not installed in this sandbox's image, so the workspace was not cloned (use an image with git, such as debian)"
	case err != nil:
		out.note = "the clone did not run: " + err.Error()
	case res.TimedOut:
		out.note = fmt.Sprintf("git clone did not finish within %d s", CloneTimeoutSeconds)
	case res.ExitCode != 0:
		msg := strings.TrimSpace(string(res.Stderr))
		if len(msg) > maxNoteStderr {
			msg = msg[:maxNoteStderr] + "…"
		}
		out.note = fmt.Sprintf("git clone failed (exit %d): %s", res.ExitCode, msg)
	}
	out.note = src.redact(out.note)
	return out
}

// readOnlyConfinement gives the workspace read and execute rights only,
// and keeps the places ordinary programs write to (/tmp, /var/tmp, the
// guest user's home) writable; the standard devices are added by
// `paddock-guest confine` itself. A writable directory that holds the
// workspace is made read-only instead: with write access to the parent,
// the workspace could be renamed away and a writable one put in its place.
func readOnlyConfinement(ws string) *api.Confinement {
	c := &api.Confinement{Enforcement: "strict", ReadOnly: []string{ws}}
	for _, d := range []string{"/tmp", "/var/tmp", image.GuestHome} {
		switch {
		case pathWithin(ws, d):
			c.ReadOnly = append(c.ReadOnly, d)
		case pathWithin(d, ws):
			// Inside the workspace: read-only with it.
		default:
			c.ReadWrite = append(c.ReadWrite, d)
		}
	}
	return c
}

// probeReadOnly runs one command under the read-only policy and fails
// (409) unless the guest really applied a Landlock ruleset.
func probeReadOnly(ctx context.Context, c *client.Client, ws string) error {
	res, err := c.Exec(ctx, api.ExecRequest{Command: api.Command{Shell: ":", Cwd: ws, TimeoutSeconds: 30, Confine: readOnlyConfinement(ws)}})
	if err != nil {
		return fmt.Errorf("%w: this sandbox cannot enforce a read-only workspace: %v", ErrConflict, err)
	}
	return readOnlyVerdict(res)
}

// readOnlyVerdict reads the probe's result: the command ran and the guest
// reports a Landlock ruleset with nothing missing.
func readOnlyVerdict(res *api.ExecResult) error {
	if r := res.Confinement; r == nil || !r.Landlock || len(r.Missing) > 0 || res.ExitCode != 0 {
		return fmt.Errorf("%w: this sandbox cannot enforce a read-only workspace: the guest did not apply the Landlock policy (exit %d, report %+v)", ErrConflict, res.ExitCode, res.Confinement)
	}
	return nil
}

// maxResolveLinks bounds the links followed while resolving one path (the
// guest agent's limit too).
const maxResolveLinks = 40

// resolveInGuest follows symbolic links in p the way the guest agent does
// when it writes or deletes p: through the sandbox's root, absolute
// targets from its "/", components that do not exist kept as they are.
// The last component is followed only when followLast is set (a write or
// delete replaces or removes a link there, never what it points to).
func resolveInGuest(ctx context.Context, c *client.Client, p string, followLast bool) (string, error) {
	todo := strings.Split(strings.Trim(path.Clean(p), "/"), "/")
	var done []string
	links := 0
	for len(todo) > 0 {
		part := todo[0]
		todo = todo[1:]
		switch part {
		case "", ".":
			continue
		case "..":
			if len(done) > 0 {
				done = done[:len(done)-1]
			}
			continue
		}
		if len(todo) == 0 && !followLast {
			done = append(done, part)
			break
		}
		cur := "/" + strings.Join(append(append([]string{}, done...), part), "/")
		fi, err := c.Stat(ctx, cur)
		if client.IsStatus(err, 404) {
			done = append(done, part)
			continue
		}
		if err != nil {
			return "", guestErr(err)
		}
		if fi.Type != api.TypeSymlink {
			done = append(done, part)
			continue
		}
		if links++; links > maxResolveLinks {
			return "", fmt.Errorf("%w: too many symbolic links in %s", ErrBadRequest, p)
		}
		if strings.HasPrefix(fi.Target, "/") {
			done = done[:0]
		}
		todo = append(strings.Split(fi.Target, "/"), todo...)
	}
	return "/" + strings.Join(done, "/"), nil
}

// refuseReadOnly answers ErrForbidden when s has a read-only workspace and
// a write or delete of p would change it: p lies in the workspace or holds
// it, as written or once the links in its directories are followed. It
// is a check before the write, so a link swapped in between the two is
// not caught here: the write itself carries the workspace as Deny
// (denyFor), and the agent checks the directory it writes in by identity.
// The agent's own commands are held by Landlock instead.
func refuseReadOnly(ctx context.Context, c *client.Client, s *Session, p string) error {
	if s.Workspace.Mode != ModeReadOnly || !strings.HasPrefix(p, "/") {
		return nil // a relative path is the guest's to refuse
	}
	ws := s.Workspace.Path
	forbidden := fmt.Errorf("%w: the workspace %s of session %s is read-only, and %s would change it", ErrForbidden, ws, s.ID, p)
	touches := func(q, ws string) bool { return pathWithin(q, ws) || pathWithin(ws, q) }
	clean := path.Clean(p)
	if touches(clean, ws) {
		return forbidden
	}
	real, err := resolveInGuest(ctx, c, clean, false)
	if err != nil {
		return err
	}
	wsReal, err := resolveInGuest(ctx, c, ws, true)
	if err != nil {
		return err
	}
	if touches(real, ws) || touches(real, wsReal) {
		return forbidden
	}
	return nil
}

// denyFor is the Deny list (api.MaxDeny) of every write the files API and
// uploads make in s: its workspace when that is read-only, so the agent
// refuses a write that lands there by whatever links, checking the
// directory it writes in and writing through that same handle.
func denyFor(s *Session) []string {
	if s.Workspace.Mode != ModeReadOnly {
		return nil
	}
	return []string{path.Clean(s.Workspace.Path)}
}

// execFor is the Exec list (api.MaxExecList) of every write, delete and
// upload in s: the programs its execute allow-list lets start, which the
// agent never creates, replaces or removes (nor a link on the way to one
// or a directory holding one), so a file write never becomes a program
// process.enforce "exec" lets run.
func execFor(s *Session) []string {
	return slices.Clone(s.Policy.ExecPrograms)
}

// guarded is what a write or delete of the files routes carries to the
// agent: the Deny and Exec lists of its session.
type guarded struct {
	deny, exec []string
}

func guardFor(s *Session) guarded { return guarded{deny: denyFor(s), exec: execFor(s)} }

// underSystemDir returns the system directory of the image
// (api.SystemDirs) that p lies under or is, or "".
func underSystemDir(p string) string {
	for _, d := range api.SystemDirs {
		if pathWithin(p, d) {
			return d
		}
	}
	return ""
}
