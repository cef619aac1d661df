package workspace

// The git verbs read a repository's config as untrusted. The workspace is
// the agent's: a file write or any command can plant a .git/config whose
// keys make git run programs (core.fsmonitor, core.hooksPath, filter and
// diff drivers, pagers, editors, credential helpers, sshCommand,
// gpg.program, aliases with "!", include.path and includeIf pulling any of
// those in, and whatever a later git adds). So the verbs never let git read
// it: the daemon reads the repository's config once (git config --list
// --includes, which runs nothing), keeps the keys on gitKeysKept and
// nothing else, and the guest agent runs each git command with that text
// as the repository's config (api.GitCommand: a private GIT_COMMON_DIR
// with no hooks, system and global config off, no GIT_* from the agent's
// environment). An allow-list, not a deny-list: a key this file does not
// know is dropped.

import (
	"fmt"
	"strings"

	"paddock.dev/paddock/guest/api"
)

// gitKeysKept are the repository config keys the git verbs keep: what
// status, diff, log, add, commit-tree and update-ref read for their
// results, none of which names a program or a file to read.
var gitKeysKept = map[string]bool{
	"core.repositoryformatversion": true,
	"core.filemode":                true,
	"core.symlinks":                true,
	"core.ignorecase":              true,
	"core.precomposeunicode":       true,
	"core.protecthfs":              true,
	"core.protectntfs":             true,
	"core.logallrefupdates":        true,
	"core.autocrlf":                true,
	"core.eol":                     true,
	"core.safecrlf":                true,
	"core.checkstat":               true,
	"core.trustctime":              true,
	"core.quotepath":               true,
	"core.abbrev":                  true,
	"core.warnambiguousrefs":       true,
	"core.sparsecheckout":          true,
	"core.sparsecheckoutcone":      true,
	"core.splitindex":              true,
	"core.compression":             true,
	"core.loosecompression":        true,
	"core.bigfilethreshold":        true,
	"core.multipackindex":          true,
	"core.commitgraph":             true,
	"index.version":                true,
	"index.sparse":                 true,
	"user.name":                    true,
	"user.email":                   true,
	"author.name":                  true,
	"author.email":                 true,
	"committer.name":               true,
	"committer.email":              true,
	"i18n.commitencoding":          true,
	"i18n.logoutputencoding":       true,
	"status.showuntrackedfiles":    true,
	"status.relativepaths":         true,
	"status.renames":               true,
	"status.renamelimit":           true,
	"status.aheadbehind":           true,
	"diff.renames":                 true,
	"diff.renamelimit":             true,
	"diff.algorithm":               true,
	"diff.indentheuristic":         true,
	"diff.context":                 true,
	"diff.interhunkcontext":        true,
	"diff.mnemonicprefix":          true,
	"diff.noprefix":                true,
	"diff.suppressblankempty":      true,
}

// Repository extensions (extensions.*): kept ones change how the
// repository is stored and must reach git; dropped ones are either already
// applied (worktreeconfig: --includes folded config.worktree into the list)
// or would make git fetch missing objects over the network (partialclone).
// Any other extension is refused: git itself would refuse a repository
// with one it does not know, and one it knows may be one this list does not.
var (
	gitExtensionsKept    = map[string]bool{"objectformat": true, "compatobjectformat": true, "refstorage": true, "preciousobjects": true, "noop": true, "noop-v1": true}
	gitExtensionsDropped = map[string]bool{"worktreeconfig": true, "partialclone": true}
)

// gitConfigEntry is one key of a repository's config, in git config
// --list's form: section and name lower-cased, the subsection as written.
type gitConfigEntry struct {
	key   string
	value string
	set   bool // false: the key has no "=" (boolean true)
}

// parseGitConfigList reads `git config --list -z --show-scope`: records
// "scope\0key\nvalue\0" or "scope\0key\0". Only the repository's own
// scopes (local, worktree) are kept; the daemon's -c overrides are
// "command".
func parseGitConfigList(out []byte) ([]gitConfigEntry, error) {
	parts := strings.Split(string(out), "\x00")
	if len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	if len(parts)%2 != 0 {
		return nil, fmt.Errorf("%w: git config --list gave an odd number of fields", ErrConflict)
	}
	var es []gitConfigEntry
	for i := 0; i < len(parts); i += 2 {
		scope, kv := parts[i], parts[i+1]
		if scope != "local" && scope != "worktree" {
			continue
		}
		k, v, set := strings.Cut(kv, "\n")
		es = append(es, gitConfigEntry{key: k, value: v, set: set})
	}
	return es, nil
}

// splitGitKey splits "section.sub.section.name" into its three parts
// (sub is "" for a two-part key).
func splitGitKey(k string) (section, sub, name string, ok bool) {
	section, rest, ok := strings.Cut(k, ".")
	if !ok {
		return "", "", "", false
	}
	i := strings.LastIndexByte(rest, '.')
	if i < 0 {
		return section, "", rest, rest != ""
	}
	return section, rest[:i], rest[i+1:], rest[i+1:] != ""
}

// keepGitKey says whether the verbs pass k on to git: a key of
// gitKeysKept, a kept extension, or the branch and remote keys `status
// --branch` needs for ahead/behind (branch.<b>.remote and .merge,
// remote.<r>.fetch). It refuses an extension it does not know.
func keepGitKey(k string) (bool, error) {
	if gitKeysKept[k] {
		return true, nil
	}
	section, sub, name, ok := splitGitKey(k)
	if !ok {
		return false, nil
	}
	switch {
	case section == "extensions" && sub == "":
		if gitExtensionsKept[name] {
			return true, nil
		}
		if gitExtensionsDropped[name] {
			return false, nil
		}
		return false, fmt.Errorf("%w: the repository's config sets extensions.%s, which the git verbs do not know; use exec for this repository", ErrConflict, name)
	case section == "branch" && sub != "" && (name == "remote" || name == "merge"):
		return true, nil
	case section == "remote" && sub != "" && name == "fetch":
		return true, nil
	}
	return false, nil
}

// gitSafeConfig is the config the verbs give git in place of the
// repository's, and the identity a commit uses.
type gitSafeConfig struct {
	text    string
	dropped []string // keys the repository set that git does not get, first 20
	// filters are the filter.<driver>.clean and .process keys the
	// repository set (dropped like the rest).
	filters []string
	// hasEmail and hasName: the repository sets user.email / user.name.
	hasEmail, hasName bool
}

// safeGitConfig keeps what keepGitKey allows of es, as a config file.
func safeGitConfig(es []gitConfigEntry) (*gitSafeConfig, error) {
	var b strings.Builder
	out := &gitSafeConfig{}
	seen := map[string]bool{}
	for _, e := range es {
		keep, err := keepGitKey(e.key)
		if err != nil {
			return nil, err
		}
		section, sub, name, _ := splitGitKey(e.key)
		if keep && strings.ContainsAny(sub, "\n\x00") {
			keep = false // git never writes one; nothing to pass on
		}
		if !keep {
			if section == "filter" && (name == "clean" || name == "process") && !seen[e.key] {
				out.filters = append(out.filters, e.key)
			}
			if !seen[e.key] && len(out.dropped) < 20 {
				out.dropped = append(out.dropped, e.key)
			}
			seen[e.key] = true
			continue
		}
		switch e.key {
		case "user.email":
			out.hasEmail = true
		case "user.name":
			out.hasName = true
		}
		b.WriteString("[" + section)
		if sub != "" {
			b.WriteString(` "` + gitQuote(sub, false) + `"`)
		}
		b.WriteString("]\n\t" + name)
		if e.set {
			b.WriteString(` = "` + gitQuote(e.value, true) + `"`)
		}
		b.WriteString("\n")
	}
	out.text = b.String()
	if len(out.text) > api.MaxGitConfigBytes-512 {
		return nil, fmt.Errorf("%w: the repository's config keeps %d bytes for the git verbs, more than %d; use exec for this repository", ErrConflict, len(out.text), api.MaxGitConfigBytes-512)
	}
	return out, nil
}

// gitQuote escapes s for a double-quoted config value (value true) or
// subsection name.
func gitQuote(s string, value bool) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\\' || r == '"':
			b.WriteByte('\\')
			b.WriteRune(r)
		case value && r == '\n':
			b.WriteString(`\n`)
		case value && r == '\t':
			b.WriteString(`\t`)
		case value && r == '\b':
			b.WriteString(`\b`)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// gitSafetyArgs come before every git verb's arguments: a second line
// behind the config the agent gives git, each naming a program git could
// run or a child git it could start. Empty values switch a key off
// (core.fsmonitor= is off in every git version; "false" is a hook path
// before 2.36).
var gitSafetyArgs = []string{
	"-c", "core.fsmonitor=",
	"-c", "core.hooksPath=/dev/null",
	"-c", "core.pager=cat",
	"-c", "core.editor=true",
	"-c", "sequence.editor=true",
	"-c", "credential.helper=",
	"-c", "protocol.allow=never",
	"-c", "color.ui=false",
	"-c", "commit.gpgSign=false",
	"-c", "tag.gpgSign=false",
	"-c", "log.showSignature=false",
	"-c", "gc.auto=0",
	"-c", "maintenance.auto=false",
	"-c", "status.submoduleSummary=false",
	"-c", "diff.ignoreSubmodules=dirty",
	"-c", "submodule.recurse=false",
	"-c", "core.attributesFile=/dev/null",
	"-c", "core.excludesFile=/dev/null",
}
