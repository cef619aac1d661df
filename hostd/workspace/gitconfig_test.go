package workspace

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestKeepGitKey(t *testing.T) {
	for k, want := range map[string]bool{
		"core.repositoryformatversion": true,
		"user.email":                   true,
		"extensions.objectformat":      true,
		"branch.Feature/X.merge":       true,
		"remote.origin.fetch":          true,
		"remote.origin.url":            false,
		"extensions.worktreeconfig":    false,
		"extensions.partialclone":      false,
		"core.fsmonitor":               false,
		"core.hookspath":               false,
		"core.pager":                   false,
		"core.editor":                  false,
		"core.sshcommand":              false,
		"core.askpass":                 false,
		"core.gitproxy":                false,
		"core.alternaterefscommand":    false,
		"core.attributesfile":          false,
		"core.excludesfile":            false,
		"core.worktree":                false,
		"diff.external":                false,
		"diff.x.command":               false,
		"diff.x.textconv":              false,
		"filter.lfs.clean":             false,
		"filter.lfs.process":           false,
		"merge.x.driver":               false,
		"pager.status":                 false,
		"credential.helper":            false,
		"credential.https://h.helper":  false,
		"alias.st":                     false,
		"include.path":                 false,
		"includeif.gitdir:/w/.path":    false,
		"gpg.program":                  false,
		"gpg.ssh.program":              false,
		"commit.gpgsign":               false,
		"log.showsignature":            false,
		"sequence.editor":              false,
		"uploadpack.packobjectshook":   false,
		"receive.procreceiverefs":      false,
		"protocol.ext.allow":           false,
		"hook.x.command":               false,
		"submodule.x.update":           false,
		"status.submodulesummary":      false,
		"trace2.eventtarget":           false,
		"branch.main.description":      false,
		"nosection":                    false,
	} {
		got, err := keepGitKey(k)
		if err != nil || got != want {
			t.Errorf("keepGitKey(%q) = %v, %v; want %v", k, got, err, want)
		}
	}
	if _, err := keepGitKey("extensions.somethingnew"); !errors.Is(err, ErrConflict) {
		t.Errorf("unknown extension: %v, want a conflict", err)
	}
}

// TestSafeGitConfigRoundTrip: what safeGitConfig writes, git reads back
// as the same keys and values (quoting of ", \, newlines and tabs), and
// nothing it dropped.
func TestSafeGitConfigRoundTrip(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs git")
	}
	list := "local\x00core.repositoryformatversion\n0\x00" +
		"local\x00user.name\nA \"quoted\" \\ name\twith tab\x00" +
		"local\x00user.email\nx@y\x00" +
		"worktree\x00core.sparsecheckout\x00" + // implicit true
		"local\x00branch.we\"ird\\.merge\nrefs/heads/we\"ird\x00" +
		"local\x00remote.origin.fetch\n+refs/heads/*:refs/remotes/origin/*\x00" +
		"local\x00remote.origin.fetch\n+refs/tags/*:refs/tags/*\x00" +
		"local\x00core.fsmonitor\ntouch /tmp/x\x00" +
		"local\x00filter.lfs.clean\ngit-lfs clean -- %f\x00" +
		"local\x00filter.lfs.process\ngit-lfs filter-process\x00" +
		"command\x00user.name\nfrom -c\x00" +
		"local\x00i18n.commitencoding\nmulti\nline\x00"
	es, err := parseGitConfigList([]byte(list))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := safeGitConfig(es)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.hasEmail || !cfg.hasName {
		t.Errorf("identity: %+v", cfg)
	}
	if !slices.Equal(cfg.dropped, []string{"core.fsmonitor", "filter.lfs.clean", "filter.lfs.process"}) || !slices.Equal(cfg.filters, []string{"filter.lfs.clean", "filter.lfs.process"}) {
		t.Errorf("dropped %v filters %v", cfg.dropped, cfg.filters)
	}
	f := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(f, []byte(cfg.text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "config", "-f", f, "--list", "-z").CombinedOutput()
	if err != nil {
		t.Fatalf("git reads the config: %v\n%s\n%s", err, out, cfg.text)
	}
	want := "core.repositoryformatversion\n0\x00user.name\nA \"quoted\" \\ name\twith tab\x00user.email\nx@y\x00core.sparsecheckout\x00" +
		"branch.we\"ird\\.merge\nrefs/heads/we\"ird\x00remote.origin.fetch\n+refs/heads/*:refs/remotes/origin/*\x00" +
		"remote.origin.fetch\n+refs/tags/*:refs/tags/*\x00i18n.commitencoding\nmulti\nline\x00"
	if string(out) != want {
		t.Errorf("git read back\n%q\nwant\n%q\nfrom\n%s", out, want, cfg.text)
	}
	if strings.Contains(cfg.text, "fsmonitor") || strings.Contains(cfg.text, "lfs") {
		t.Errorf("a dropped key reached the config:\n%s", cfg.text)
	}
}

func TestCleanMessage(t *testing.T) {
	for in, want := range map[string]string{
		"subject":                           "subject\n",
		"\n\n  subject  \n\n\n\nbody\t\n\n": "  subject\n\nbody\n",
		"a\r\nb":                            "a\nb\n",
		" \n\t\n":                           "",
		"# not a comment":                   "# not a comment\n",
	} {
		if got := cleanMessage(in); got != want {
			t.Errorf("cleanMessage(%q) = %q, want %q", in, got, want)
		}
	}
}
