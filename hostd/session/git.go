package session

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
)

// Git limits.
const (
	MaxGitDiffBytes = 256 << 10
	MaxGitLog       = 200
	MaxCommitMsg    = 16 << 10
)

// GitRequest is the body of POST .../git/commit and .../git/branch, and the
// query of the GET verbs.
type GitRequest struct {
	Repo       string `json:"repo,omitempty"`
	Message    string `json:"message,omitempty"`
	Name       string `json:"name,omitempty"`
	StagedOnly bool   `json:"staged_only,omitempty"`
}

// GitResult answers every git verb.
type GitResult struct {
	Repo      string      `json:"repo"`
	Output    string      `json:"output"`
	Truncated bool        `json:"truncated,omitempty"`
	Commit    string      `json:"commit,omitempty"`
	Branch    string      `json:"branch,omitempty"`
	Entries   []GitCommit `json:"entries,omitempty"`
}

// GitCommit is one entry of git log.
type GitCommit struct {
	ID      string    `json:"id"`
	Author  string    `json:"author"`
	Email   string    `json:"email"`
	Time    time.Time `json:"time"`
	Subject string    `json:"subject"`
}

var branchRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$`)

// gitTarget is where a git verb runs: the sandbox's agent, the
// repository and the session's confinement (nil when there is none).
type gitTarget struct {
	c       *client.Client
	repo    string
	confine *api.Confinement
}

// git runs git with argv (never a shell line) in the session's sandbox,
// under the session's confinement.
func (m *Manager) git(ctx context.Context, t *gitTarget, args ...string) (*api.ExecResult, error) {
	argv := append([]string{"git", "-C", t.repo, "-c", "core.pager=cat", "-c", "color.ui=false"}, args...)
	res, err := t.c.Exec(ctx, api.ExecRequest{Command: api.Command{Argv: argv, TimeoutSeconds: 120, MaxOutputBytes: MaxGitDiffBytes + 1, Confine: t.confine}})
	if err != nil && strings.Contains(err.Error(), "not found on PATH") {
		err, res = nil, &api.ExecResult{ExitCode: 127}
	}
	if err != nil {
		return nil, guestErr(err)
	}
	if res.ExitCode == 127 {
		return nil, fmt.Errorf("%w: git is not installed in this sandbox's image (use an image with git, such as debian)", ErrConflict)
	}
	return res, nil
}

// gitRepo checks the repository path and that it exists. write says the
// verb changes the repository, which a read-only workspace refuses.
func (m *Manager) gitRepo(ctx context.Context, tenant, id, repo string, write bool) (*gitTarget, error) {
	s, _, mc, err := m.running(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if repo == "" {
		repo = s.Workspace.Path
	}
	if !strings.HasPrefix(repo, "/") || strings.Contains(repo, "..") || strings.ContainsAny(repo, "\x00\n") || len(repo) > 1024 {
		return nil, bad("repo %q must be an absolute path without ..", repo)
	}
	c := clientFor(mc)
	if write && s.Workspace.Mode == ModeReadOnly && pathWithin(path.Clean(repo), s.Workspace.Path) {
		return nil, fmt.Errorf("%w: the workspace %s of session %s is read-only, so git cannot change the repository %s", ErrForbidden, s.Workspace.Path, id, repo)
	}
	if _, err := c.Stat(ctx, repo); err != nil {
		return nil, guestErr(err)
	}
	return &gitTarget{c: c, repo: repo, confine: confinement(s)}, nil
}

func gitFailed(verb string, res *api.ExecResult) error {
	msg := strings.TrimSpace(string(res.Stderr) + string(res.Stdout))
	if strings.Contains(msg, "not a git repository") {
		return fmt.Errorf("%w: %s", ErrNotFound, msg)
	}
	return fmt.Errorf("%w: git %s failed: %s", ErrConflict, verb, msg)
}

// GitStatus is `git status --short --branch`.
func (m *Manager) GitStatus(ctx context.Context, tenant, id, repo string) (*GitResult, error) {
	t, err := m.gitRepo(ctx, tenant, id, repo, false)
	if err != nil {
		return nil, err
	}
	res, err := m.git(ctx, t, "status", "--short", "--branch")
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return nil, gitFailed("status", res)
	}
	return &GitResult{Repo: t.repo, Output: string(res.Stdout)}, nil
}

// GitDiff is `git diff [--cached] [-- path]`, cut at 256 KiB.
func (m *Manager) GitDiff(ctx context.Context, tenant, id, repo, path string, staged bool) (*GitResult, error) {
	if path != "" && (strings.HasPrefix(path, "-") || strings.Contains(path, "..") || strings.HasPrefix(path, "/") || strings.ContainsAny(path, "\x00\n")) {
		return nil, bad("path %q must be relative to the repository, without .. and not starting with -", path)
	}
	t, err := m.gitRepo(ctx, tenant, id, repo, false)
	if err != nil {
		return nil, err
	}
	args := []string{"diff"}
	if staged {
		args = append(args, "--cached")
	}
	if path != "" {
		args = append(args, "--", path)
	}
	res, err := m.git(ctx, t, args...)
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return nil, gitFailed("diff", res)
	}
	out := &GitResult{Repo: t.repo, Output: string(res.Stdout)}
	if len(res.Stdout) > MaxGitDiffBytes || res.StdoutTruncated {
		out.Output, out.Truncated = string(res.Stdout[:min(len(res.Stdout), MaxGitDiffBytes)]), true
	}
	return out, nil
}

// GitLog is the last n commits.
func (m *Manager) GitLog(ctx context.Context, tenant, id, repo string, n int) (*GitResult, error) {
	if n < 1 || n > MaxGitLog {
		return nil, bad("n %d must be from 1 to %d", n, MaxGitLog)
	}
	t, err := m.gitRepo(ctx, tenant, id, repo, false)
	if err != nil {
		return nil, err
	}
	res, err := m.git(ctx, t, "log", "-n", strconv.Itoa(n), "--format=%H%x1f%an%x1f%ae%x1f%at%x1f%s")
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		if strings.Contains(string(res.Stderr), "does not have any commits") {
			return &GitResult{Repo: t.repo, Entries: []GitCommit{}}, nil
		}
		return nil, gitFailed("log", res)
	}
	out := &GitResult{Repo: t.repo, Output: string(res.Stdout), Entries: []GitCommit{}}
	for _, l := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
		f := strings.Split(l, "\x1f")
		if len(f) != 5 {
			continue
		}
		sec, _ := strconv.ParseInt(f[3], 10, 64)
		out.Entries = append(out.Entries, GitCommit{ID: f[0], Author: f[1], Email: f[2], Time: time.Unix(sec, 0).UTC(), Subject: f[4]})
	}
	return out, nil
}

// GitCommit stages everything (unless staged_only) and commits, as the
// repository's configured user or "Paddock Agent", never signed.
func (m *Manager) GitCommit(ctx context.Context, tenant, id string, req GitRequest) (*GitResult, error) {
	if strings.TrimSpace(req.Message) == "" || len(req.Message) > MaxCommitMsg || strings.ContainsRune(req.Message, 0) {
		return nil, bad("message must be 1 to %d bytes without NUL", MaxCommitMsg)
	}
	t, err := m.gitRepo(ctx, tenant, id, req.Repo, true)
	if err != nil {
		return nil, err
	}
	// In flight like a command: a restore or fork must not replace the
	// machine under it.
	done, err := m.commandStarts(id)
	if err != nil {
		return nil, err
	}
	defer done()
	if !req.StagedOnly {
		res, err := m.git(ctx, t, "add", "-A")
		if err != nil {
			return nil, err
		}
		if res.ExitCode != 0 {
			return nil, gitFailed("add", res)
		}
	}
	ident := []string{}
	if res, err := m.git(ctx, t, "config", "user.email"); err == nil && res.ExitCode != 0 {
		ident = []string{"-c", "user.name=Paddock Agent", "-c", "user.email=agent@paddock.local"}
	}
	args := append(ident, "-c", "commit.gpgsign=false", "commit", "-q", "-m", req.Message)
	res, err := m.git(ctx, t, args...)
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		msg := string(res.Stdout) + string(res.Stderr)
		if strings.Contains(msg, "nothing to commit") || strings.Contains(msg, "nothing added to commit") {
			return nil, fmt.Errorf("%w: nothing to commit in %s", ErrConflict, t.repo)
		}
		return nil, gitFailed("commit", res)
	}
	head, err := m.git(ctx, t, "rev-parse", "HEAD")
	if err != nil {
		return nil, err
	}
	out := &GitResult{Repo: t.repo, Commit: strings.TrimSpace(string(head.Stdout))}
	m.ledgerAppend(ctx, id, "git.commit", map[string]any{"repo": t.repo, "commit": out.Commit, "message": req.Message})
	return out, nil
}

// GitBranch creates a branch and switches to it.
func (m *Manager) GitBranch(ctx context.Context, tenant, id string, req GitRequest) (*GitResult, error) {
	if !branchRE.MatchString(req.Name) || strings.Contains(req.Name, "..") || strings.HasSuffix(req.Name, ".lock") || strings.HasSuffix(req.Name, "/") {
		return nil, bad("branch name %q: letters, digits, '.', '_', '-' and '/', not starting with - and without ..", req.Name)
	}
	t, err := m.gitRepo(ctx, tenant, id, req.Repo, true)
	if err != nil {
		return nil, err
	}
	// In flight like a command: a restore or fork must not replace the
	// machine under it.
	done, err := m.commandStarts(id)
	if err != nil {
		return nil, err
	}
	defer done()
	res, err := m.git(ctx, t, "switch", "-c", req.Name)
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		if strings.Contains(string(res.Stderr), "already exists") {
			return nil, fmt.Errorf("%w: branch %s already exists", ErrConflict, req.Name)
		}
		return nil, gitFailed("switch", res)
	}
	m.ledgerAppend(ctx, id, "git.branch", map[string]any{"repo": t.repo, "branch": req.Name})
	return &GitResult{Repo: t.repo, Branch: req.Name}, nil
}
