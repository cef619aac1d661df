package workspace

// The git verbs (status, diff, log, commit, branch) run git in the
// session's sandbox, under its confinement, with a config the daemon
// writes instead of the repository's own (gitconfig.go says why and
// what is kept). Commit and branch use plumbing (add, write-tree,
// commit-tree, update-ref, symbolic-ref), which has no hooks to run, and
// no verb starts a git in a submodule, whose own config would be read
// there. Every verb is ledgered (git.status, git.diff, git.log,
// git.commit, git.branch); a commit is also one exec of the session's
// budget.

import (
	"context"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
	"paddock.dev/paddock/hostd/session"
)

// Git limits.
const (
	MaxGitDiffBytes = apiv1.MaxGitDiffBytes
	MaxGitLog       = apiv1.MaxGitLog
	MaxCommitMsg    = apiv1.MaxCommitMsg
	// maxGitConfigList bounds what git config --list may print for one
	// repository (its config with includes).
	maxGitConfigList = 1 << 20
	// maxGitlinks bounds the submodules a commit leaves out of git add.
	maxGitlinks = 1000
	// gitTimeout is each git command's timeout (a budget can lower it).
	gitTimeout = 120
)

// The public wire types (package api), kept under these names here.
type (
	GitRequest = apiv1.GitRequest
	GitResult  = apiv1.GitResult
	GitCommit  = apiv1.GitCommit
)

var branchRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$`)

// gitTarget is where a git verb runs: the sandbox's agent, the
// repository, its git directories and safe config, and the session's
// confinement (nil when there is none).
type gitTarget struct {
	c       *client.Client
	repo    string
	confine *api.Confinement
	timeout int

	gitDir, commonDir, workTree string
	cfg                         *gitSafeConfig
	// ms is the guest's run time of the verb's git commands so far; ran
	// says one ran.
	ms  int64
	ran bool
}

// gitExec runs one git command and maps the agent's refusals.
func gitExec(ctx context.Context, t *gitTarget, cmd api.Command, stdin []byte, maxOut int64) (*api.ExecResult, error) {
	cmd.TimeoutSeconds, cmd.MaxOutputBytes, cmd.Confine = t.timeout, maxOut, t.confine
	res, err := t.c.Exec(ctx, api.ExecRequest{Command: cmd, Stdin: stdin})
	if err != nil && strings.Contains(err.Error(), "not found on PATH") {
		err, res = nil, &api.ExecResult{ExitCode: 127}
	}
	if err != nil {
		if cmd.Git != nil && client.IsStatus(err, 400) && strings.Contains(err.Error(), "no command") {
			// An agent older than api.GitCommand: it refused, and git did
			// not run with the repository's config.
			return nil, fmt.Errorf("%w: this sandbox's guest agent is too old to run the git verbs with a safe config; recreate the session", ErrConflict)
		}
		return nil, guestErr(err)
	}
	t.ms += res.DurationMillis
	t.ran = true
	if res.ExitCode == 127 {
		return nil, fmt.Errorf("%w: git is not installed in this sandbox's image (use an image with git, such as debian)", ErrConflict)
	}
	return res, nil
}

// gitPlain runs git with the repository's own config: only for rev-parse
// and config --list, which start no program whatever the config says.
func gitPlain(ctx context.Context, t *gitTarget, maxOut int64, args ...string) (*api.ExecResult, error) {
	argv := append(append([]string{"git", "-C", t.repo}, gitSafetyArgs...), args...)
	return gitExec(ctx, t, api.Command{Argv: argv, Env: []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_ATTR_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0", "GIT_PAGER=cat"}}, nil, maxOut)
}

// git runs git with argv (never a shell line) in the session's sandbox,
// under the session's confinement, with the daemon's config in place of
// the repository's (api.GitCommand).
func git(ctx context.Context, t *gitTarget, stdin []byte, args ...string) (*api.ExecResult, error) {
	return gitExec(ctx, t, api.Command{Git: &api.GitCommand{
		Args:   append(append([]string{"-C", t.repo}, gitSafetyArgs...), args...),
		GitDir: t.gitDir, CommonDir: t.commonDir, WorkTree: t.workTree, Config: t.cfg.text,
	}}, stdin, MaxGitDiffBytes+1)
}

// gitLoad is the load step of a git verb: the session, running
// (Pipe.LoadRunning), and the repository, whose path is checked and which
// must exist; write says the verb changes the repository, which a
// read-only workspace refuses. It fills t.
func (w *Service) gitLoad(t *gitTarget, repo string, write bool) session.PipeStep {
	return session.NewStep(session.StepLoad, func(ctx context.Context, p Pipe) error {
		if err := p.LoadRunning(ctx); err != nil {
			return err
		}
		s := p.Session()
		if repo == "" {
			repo = s.Workspace.Path
		}
		if !strings.HasPrefix(repo, "/") || strings.Contains(repo, "..") || strings.ContainsAny(repo, "\x00\n") || len(repo) > 1024 {
			return bad("repo %q must be an absolute path without ..", repo)
		}
		if write && s.Workspace.Mode == session.ModeReadOnly && pathWithin(path.Clean(repo), s.Workspace.Path) {
			return fmt.Errorf("%w: the workspace %s of session %s is read-only, so git cannot change the repository %s", ErrForbidden, s.Workspace.Path, s.ID, repo)
		}
		c := p.Guest()
		if _, err := c.Stat(ctx, repo); err != nil {
			return guestErr(err)
		}
		*t = gitTarget{c: c, repo: repo, confine: p.Command().Confine, timeout: gitTimeout}
		return nil
	})
}

// gate is the gate step of a git verb that changes the repository: the
// session's work slot, held to the walk's end, so a restore or fork
// does not replace the machine under it.
func (w *Service) gate() session.PipeStep {
	return session.NewStep(session.StepGate, func(_ context.Context, p Pipe) error {
		done, err := w.m.WorkSlot(p.Command().Session)
		if err != nil {
			return err
		}
		p.AtEnd(done)
		return nil
	})
}

// gitRecord is the record step of a git verb: git.<verb>, once git ran
// (gitLedger).
func (w *Service) gitRecord(t *gitTarget, fields map[string]any) session.PipeStep {
	return session.NewStep(session.StepRecord, func(ctx context.Context, p Pipe) error {
		w.gitLedger(ctx, p.Command().Session, p.Command().Verb, t, p.WithNotes(fields), p.Err())
		return nil
	})
}

// gitOpen finds the repository's directories and reads its config into
// the safe config the verb's git commands get.
func gitOpen(ctx context.Context, t *gitTarget) error {
	res, err := gitPlain(ctx, t, 64<<10, "rev-parse", "--path-format=absolute", "--absolute-git-dir", "--git-common-dir", "--show-toplevel")
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return gitFailed("rev-parse", res)
	}
	lines := strings.Split(strings.TrimSuffix(string(res.Stdout), "\n"), "\n")
	if len(lines) != 3 {
		return fmt.Errorf("%w: git rev-parse did not name the repository's directories (git 2.31 or later is needed): %q", ErrConflict, clipText(string(res.Stdout), 300))
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "/") || strings.Contains(l, "/../") {
			return fmt.Errorf("%w: git rev-parse named %q, not an absolute path (git 2.31 or later is needed)", ErrConflict, clipText(l, 300))
		}
	}
	t.gitDir, t.commonDir, t.workTree = lines[0], lines[1], lines[2]
	res, err = gitPlain(ctx, t, maxGitConfigList, "config", "--list", "-z", "--includes", "--show-scope")
	if err != nil {
		return err
	}
	if res.ExitCode != 0 && len(res.Stdout) > 0 || res.ExitCode > 1 {
		return gitFailed("config", res) // exit 1 with no output: no config at all
	}
	if res.StdoutTruncated {
		return fmt.Errorf("%w: the repository's config (with its includes) is over %d bytes; use exec for this repository", ErrConflict, maxGitConfigList)
	}
	es, err := parseGitConfigList(res.Stdout)
	if err != nil {
		return err
	}
	t.cfg, err = safeGitConfig(es)
	return err
}

func gitFailed(verb string, res *api.ExecResult) error {
	msg := strings.TrimSpace(string(res.Stderr) + string(res.Stdout))
	if strings.Contains(msg, "not a git repository") {
		return fmt.Errorf("%w: %s", ErrNotFound, msg)
	}
	return fmt.Errorf("%w: git %s failed: %s", ErrConflict, verb, clipText(msg, 2000))
}

// gitLedger records a git verb: fields, the repository, the guest time
// its commands took, the config keys git was not given, and the error
// when it failed after git ran.
func (w *Service) gitLedger(ctx context.Context, id, verb string, t *gitTarget, fields map[string]any, err error) {
	if t == nil || !t.ran {
		return // refused before git ran
	}
	if fields == nil {
		fields = map[string]any{}
	}
	fields["repo"] = t.repo
	fields["duration_ms"] = t.ms
	if t.cfg != nil && len(t.cfg.dropped) > 0 {
		fields["ignored_config"] = t.cfg.dropped
	}
	if err != nil {
		fields["error"] = clipText(err.Error(), 300)
	}
	w.m.LedgerAppend(context.WithoutCancel(ctx), id, "git."+verb, fields)
}

// GitStatus is `git status --short --branch`.
func (w *Service) GitStatus(ctx context.Context, tenant, id, repo string) (out *GitResult, err error) {
	t := &gitTarget{} //done //done //done //done
	fields := map[string]any{}
	err = w.m.WalkVerb(ctx, session.CommandGit, tenant, id, "status", "git status",
		w.gitLoad(t, repo, false),
		session.HooksStep("git"),
		session.NewStep(session.StepRun, func(ctx context.Context, p Pipe) error {
			p.RunBegan()
			if err := gitOpen(ctx, t); err != nil {
				return err
			}
			res, err := git(ctx, t, nil, "status", "--short", "--branch", "--ignore-submodules=dirty")
			if err != nil {
				return err
			}
			if res.ExitCode != 0 {
				return gitFailed("status", res)
			}
			out = &GitResult{Repo: t.repo, Output: string(res.Stdout)}
			return nil
		}),
		w.gitRecord(t, fields),
	)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GitDiff is `git diff [--cached] [-- path]`, cut at 256 KiB, with no
// external diff or textconv program.
func (w *Service) GitDiff(ctx context.Context, tenant, id, repo, path string, staged bool) (out *GitResult, err error) {
	t := &gitTarget{}
	fields := map[string]any{"staged": staged}
	if path != "" {
		fields["path"] = path
	}
	err = w.m.WalkVerb(ctx, session.CommandGit, tenant, id, "diff", "git diff",
		session.NewStep(session.StepValidate, func(context.Context, Pipe) error {
			if path != "" && (strings.HasPrefix(path, "-") || strings.Contains(path, "..") || strings.HasPrefix(path, "/") || strings.ContainsAny(path, "\x00\n")) {
				return bad("path %q must be relative to the repository, without .. and not starting with -", path)
			}
			return nil
		}),
		w.gitLoad(t, repo, false),
		session.HooksStep("git"),
		session.NewStep(session.StepRun, func(ctx context.Context, p Pipe) error {
			p.RunBegan()
			if err := gitOpen(ctx, t); err != nil {
				return err
			}
			args := []string{"diff", "--no-ext-diff", "--no-textconv", "--ignore-submodules=dirty"}
			if staged {
				args = append(args, "--cached")
			}
			if path != "" {
				args = append(args, "--", path)
			}
			res, err := git(ctx, t, nil, args...)
			if err != nil {
				return err
			}
			if res.ExitCode != 0 {
				return gitFailed("diff", res)
			}
			out = &GitResult{Repo: t.repo, Output: string(res.Stdout)}
			if len(res.Stdout) > MaxGitDiffBytes || res.StdoutTruncated {
				out.Output, out.Truncated = string(res.Stdout[:min(len(res.Stdout), MaxGitDiffBytes)]), true
			}
			fields["bytes"], fields["truncated"] = len(out.Output), out.Truncated
			return nil
		}),
		w.gitRecord(t, fields),
	)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GitLog is the last n commits.
func (w *Service) GitLog(ctx context.Context, tenant, id, repo string, n int) (out *GitResult, err error) {
	t := &gitTarget{}
	fields := map[string]any{"n": n}
	err = w.m.WalkVerb(ctx, session.CommandGit, tenant, id, "log", "git log",
		session.NewStep(session.StepValidate, func(context.Context, Pipe) error {
			if n < 1 || n > MaxGitLog {
				return bad("n %d must be from 1 to %d", n, MaxGitLog)
			}
			return nil
		}),
		w.gitLoad(t, repo, false),
		session.HooksStep("git"),
		session.NewStep(session.StepRun, func(ctx context.Context, p Pipe) error {
			p.RunBegan()
			if err := gitOpen(ctx, t); err != nil {
				return err
			}
			res, err := git(ctx, t, nil, "log", "-n", strconv.Itoa(n), "--no-show-signature", "--no-notes", "--format=%H%x1f%an%x1f%ae%x1f%at%x1f%s")
			if err != nil {
				return err
			}
			if res.ExitCode != 0 {
				if strings.Contains(string(res.Stderr), "does not have any commits") {
					fields["entries"] = 0
					out = &GitResult{Repo: t.repo, Entries: []GitCommit{}}
					return nil
				}
				return gitFailed("log", res)
			}
			out = &GitResult{Repo: t.repo, Output: string(res.Stdout), Entries: []GitCommit{}}
			for _, l := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
				f := strings.Split(l, "\x1f")
				if len(f) != 5 {
					continue
				}
				sec, _ := strconv.ParseInt(f[3], 10, 64)
				out.Entries = append(out.Entries, GitCommit{ID: f[0], Author: f[1], Email: f[2], Time: time.Unix(sec, 0).UTC(), Subject: f[4]})
			}
			fields["entries"] = len(out.Entries)
			return nil
		}),
		w.gitRecord(t, fields),
	)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// gitRefs resolves names with cat-file --batch-check: the object id of
// each, "" for one that does not exist.
func gitRefs(ctx context.Context, t *gitTarget, names ...string) ([]string, error) {
	res, err := git(ctx, t, []byte(strings.Join(names, "\n")+"\n"), "cat-file", "--batch-check=%(objectname)")
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return nil, gitFailed("cat-file", res)
	}
	lines := strings.Split(strings.TrimSuffix(string(res.Stdout), "\n"), "\n")
	if len(lines) != len(names) {
		return nil, fmt.Errorf("%w: git cat-file answered %d lines for %d names", ErrConflict, len(lines), len(names))
	}
	out := make([]string, len(names))
	for i, l := range lines {
		if !strings.HasSuffix(l, " missing") && !strings.HasSuffix(l, " ambiguous") {
			out[i] = l
		}
	}
	return out, nil
}

// Empty trees, by object format: what write-tree gives for an empty
// index.
var emptyTrees = map[string]bool{
	"4b825dc642cb6eb9a060e54bf8d69288fbee4904":                         true,
	"6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321": true,
}

// gitAddAll is `git add -A` over the whole work tree except the
// submodules in the index: git add starts a git in each of those to see
// whether it changed, and that git would read the submodule's own config.
func gitAddAll(ctx context.Context, t *gitTarget) error {
	res, err := git(ctx, t, nil, "ls-files", "--stage", "-z", "--full-name", "--", ":/")
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return gitFailed("ls-files", res)
	}
	if res.StdoutTruncated {
		return fmt.Errorf("%w: the index of %s is too large for git/commit to stage it; stage with exec and commit with staged_only", ErrConflict, t.repo)
	}
	spec := []string{":/"}
	for _, e := range strings.Split(string(res.Stdout), "\x00") {
		if mode, rest, ok := strings.Cut(e, " "); ok && mode == "160000" {
			if _, p, ok := strings.Cut(rest, "\t"); ok {
				spec = append(spec, ":(exclude,top,literal)"+p)
			}
		}
	}
	if len(spec)-1 > maxGitlinks {
		return fmt.Errorf("%w: %s has %d submodules, more than %d; stage with exec and commit with staged_only", ErrConflict, t.repo, len(spec)-1, maxGitlinks)
	}
	res, err = git(ctx, t, []byte(strings.Join(spec, "\x00")), "add", "-A", "--pathspec-from-file=-", "--pathspec-file-nul")
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return gitFailed("add", res)
	}
	return nil
}

// cleanMessage is git commit's "whitespace" cleanup of a -m message:
// trailing spaces off every line, no leading or trailing empty lines, at
// most one empty line in a row, a final newline.
func cleanMessage(msg string) string {
	var out []string
	blank := false
	for _, l := range strings.Split(strings.ReplaceAll(msg, "\r\n", "\n"), "\n") {
		l = strings.TrimRight(l, " \t\r\v\f")
		if l == "" {
			blank = len(out) > 0
			continue
		}
		if blank {
			out = append(out, "")
		}
		blank = false
		out = append(out, l)
	}
	if len(out) == 0 {
		return ""
	}
	return strings.Join(out, "\n") + "\n"
}

// GitCommit stages everything (unless staged_only) and commits, as the
// repository's configured user or "Paddock Agent", never signed, running
// no hook. It is one exec of the session's budget.
func (w *Service) GitCommit(ctx context.Context, tenant, id string, req GitRequest) (out *GitResult, err error) {
	t := &gitTarget{}
	msg := cleanMessage(req.Message)
	fields := map[string]any{"message": req.Message, "staged_only": req.StagedOnly}
	err = w.m.WalkVerb(ctx, session.CommandGit, tenant, id, "commit", "git commit",
		session.NewStep(session.StepValidate, func(context.Context, Pipe) error {
			if msg == "" || len(req.Message) > MaxCommitMsg || strings.ContainsRune(req.Message, 0) {
				return bad("message must be 1 to %d bytes without NUL", MaxCommitMsg)
			}
			return nil
		}),
		w.gitLoad(t, req.Repo, true),
		// In flight like a command: a restore or fork must not replace
		// the machine under it.
		w.gate(),
		// A commit is an exec for the budget: max_execs, and its time
		// counts as exec time. The unit goes back when the commit stops
		// before it stages anything.
		session.NewStep(session.StepAdmit, func(ctx context.Context, p Pipe) error {
			if err := p.Admit(ctx, session.StartExec, gitTimeout); err != nil {
				var be *BudgetError
				if errors.As(err, &be) {
					be.What = "git commit"
				}
				return err
			}
			t.timeout = p.Admission().Timeout
			return nil
		}),
		session.HooksStep("git"),
		session.NewStep(session.StepRun, func(ctx context.Context, p Pipe) error {
			p.RunBegan()
			if err := gitOpen(ctx, t); err != nil {
				return err
			}
			if len(t.cfg.filters) > 0 {
				return fmt.Errorf("%w: the repository's config sets %s, a program the git verbs do not run, so git/commit would store files unfiltered; commit with exec, where the session's process rules apply", ErrConflict, t.cfg.filters[0])
			}
			p.Keep() // the unit is spent from here, with the guest time
			if !t.cfg.hasEmail {
				t.cfg.text += "[user]\n\temail = \"agent@paddock.local\"\n"
			}
			if !t.cfg.hasName {
				t.cfg.text += "[user]\n\tname = \"Paddock Agent\"\n"
			}
			if !req.StagedOnly {
				if err := gitAddAll(ctx, t); err != nil {
					return err
				}
			}
			refs, err := gitRefs(ctx, t, "HEAD^{commit}", "HEAD^{tree}", "MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD")
			if err != nil {
				return err
			}
			for i, name := range []string{"a merge", "a cherry-pick", "a revert"} {
				if refs[2+i] != "" {
					return fmt.Errorf("%w: %s is in progress in %s; conclude it with exec", ErrConflict, name, t.repo)
				}
			}
			res, err := git(ctx, t, nil, "write-tree")
			if err != nil {
				return err
			}
			if res.ExitCode != 0 {
				return gitFailed("write-tree", res)
			}
			tree := strings.TrimSpace(string(res.Stdout))
			parent := refs[0]
			if (parent != "" && tree == refs[1]) || (parent == "" && emptyTrees[tree]) {
				return fmt.Errorf("%w: nothing to commit in %s", ErrConflict, t.repo)
			}
			args := []string{"commit-tree", tree, "--no-gpg-sign", "-F", "-"}
			if parent != "" {
				args = append(args, "-p", parent)
			}
			res, err = git(ctx, t, []byte(msg), args...)
			if err != nil {
				return err
			}
			if res.ExitCode != 0 {
				return gitFailed("commit-tree", res)
			}
			commit := strings.TrimSpace(string(res.Stdout))
			subject, _, _ := strings.Cut(msg, "\n")
			reflog := "commit: " + subject
			if parent == "" {
				reflog = "commit (initial): " + subject
			}
			// The old value makes the update fail if HEAD moved meanwhile ("" is
			// "must not exist yet" for a first commit).
			res, err = git(ctx, t, nil, "update-ref", "-m", reflog, "HEAD", commit, parent)
			if err != nil {
				return err
			}
			if res.ExitCode != 0 {
				return gitFailed("update-ref", res)
			}
			fields["commit"] = commit
			out = &GitResult{Repo: t.repo, Commit: commit}
			return nil
		}),
		w.gitRecord(t, fields),
		session.NewStep(session.StepUsage, func(_ context.Context, p Pipe) error {
			if p.Kept() {
				p.CountExec(t.ms)
			}
			return nil
		}),
	)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GitBranch creates a branch at HEAD and switches to it (git switch -c,
// done with update-ref and symbolic-ref: no hook, no checkout).
func (w *Service) GitBranch(ctx context.Context, tenant, id string, req GitRequest) (out *GitResult, err error) {
	t := &gitTarget{}
	fields := map[string]any{"branch": req.Name}
	err = w.m.WalkVerb(ctx, session.CommandGit, tenant, id, "branch", "git branch",
		session.NewStep(session.StepValidate, func(context.Context, Pipe) error {
			if !branchRE.MatchString(req.Name) || strings.Contains(req.Name, "..") || strings.HasSuffix(req.Name, ".lock") || strings.HasSuffix(req.Name, "/") {
				return bad("branch name %q: letters, digits, '.', '_', '-' and '/', not starting with - and without ..", req.Name)
			}
			return nil
		}),
		w.gitLoad(t, req.Repo, true),
		// In flight like a command: a restore or fork must not replace
		// the machine under it.
		w.gate(),
		session.HooksStep("git"),
		session.NewStep(session.StepRun, func(ctx context.Context, p Pipe) error {
			p.RunBegan()
			if err := gitOpen(ctx, t); err != nil {
				return err
			}
			ref := "refs/heads/" + req.Name
			res, err := git(ctx, t, nil, "check-ref-format", ref)
			if err != nil {
				return err
			}
			if res.ExitCode != 0 {
				return bad("branch name %q is not a valid git branch name (git check-ref-format)", req.Name)
			}
			refs, err := gitRefs(ctx, t, "HEAD^{commit}", ref)
			if err != nil {
				return err
			}
			if refs[1] != "" {
				return fmt.Errorf("%w: branch %s already exists", ErrConflict, req.Name)
			}
			from := "HEAD"
			res, err = git(ctx, t, nil, "symbolic-ref", "-q", "--short", "HEAD")
			if err != nil {
				return err
			}
			if res.ExitCode == 0 {
				from = strings.TrimSpace(string(res.Stdout))
			} else if refs[0] != "" {
				from = refs[0]
			}
			if refs[0] != "" {
				res, err = git(ctx, t, nil, "update-ref", "-m", "branch: Created from HEAD", ref, refs[0], "")
				if err != nil {
					return err
				}
				if res.ExitCode != 0 {
					if strings.Contains(string(res.Stderr), "already exists") {
						return fmt.Errorf("%w: branch %s already exists", ErrConflict, req.Name)
					}
					return gitFailed("update-ref", res)
				}
			}
			res, err = git(ctx, t, nil, "symbolic-ref", "-m", "checkout: moving from "+from+" to "+req.Name, "HEAD", ref)
			if err != nil {
				return err
			}
			if res.ExitCode != 0 {
				return gitFailed("symbolic-ref", res)
			}
			out = &GitResult{Repo: t.repo, Branch: req.Name}
			return nil
		}),
		w.gitRecord(t, fields),
	)
	if err != nil {
		return nil, err
	}
	return out, nil
}
