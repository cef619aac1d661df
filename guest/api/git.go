package api

// GitCommand is an exec of git against a repository whose own
// configuration is not trusted (Command.Git). A repository's config can
// name programs git then runs (core.fsmonitor, hooks, filter and diff
// drivers, pagers, helpers, aliases, includes that pull those in), and a
// workspace is written by the agent it belongs to. So the agent runs
//
//	git <Args...>
//
// with GIT_DIR=GitDir, GIT_WORK_TREE=WorkTree and GIT_COMMON_DIR set to a
// directory of its own, made for this one command: it holds Config as the
// repository's config file, no hooks, and symbolic links to the
// repository's shared parts (GitShadowLinks: objects, refs, logs, ...).
// Git never reads CommonDir/config, config.worktree or the hooks. The
// system and global config are off (GIT_CONFIG_NOSYSTEM,
// GIT_CONFIG_GLOBAL=/dev/null), HOME and XDG_CONFIG_HOME point at that
// directory, and the agent's own GIT_* variables, PAGER, EDITOR, VISUAL and
// SSH_ASKPASS are not passed on. The host writes Config from the keys it
// allows (hostd/session/gitconfig.go).
//
// Argv and Shell must be empty: an agent that predates this field sees a
// command with neither and refuses it, rather than running git with the
// repository's config. Exec only; a job with Git is refused.
type GitCommand struct {
	// Args follow "git".
	Args []string `json:"args"`
	// GitDir, CommonDir and WorkTree are absolute (git rev-parse
	// --absolute-git-dir, --git-common-dir and --show-toplevel).
	GitDir    string `json:"git_dir"`
	CommonDir string `json:"common_dir"`
	WorkTree  string `json:"work_tree"`
	// Config is the text of the config file git reads as the
	// repository's (at most MaxGitConfigBytes).
	Config string `json:"config"`
}

// MaxGitConfigBytes bounds GitCommand.Config.
const MaxGitConfigBytes = 64 << 10

// GitShadowLinks are the entries of a repository's common directory the
// agent links into the directory it gives git as GIT_COMMON_DIR: what
// git shares between worktrees, without config and hooks. A link whose
// target does not exist is harmless (git sees no such file).
var GitShadowLinks = []string{"objects", "refs", "packed-refs", "logs", "info", "shallow", "worktrees",
	"reftable", "branches", "remotes", "rr-cache", "modules", "lost-found", "svn"}
