package agent_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"paddock.dev/paddock/guest/agent"
	"paddock.dev/paddock/guest/api"
)

// plantedRepo makes a repository whose config, hooks and attributes run a
// program writing a marker under dir on any status, diff or commit, and
// returns the repository and the marker paths.
func plantedRepo(t *testing.T, dir string) (string, []string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs git")
	}
	repo := filepath.Join(dir, "repo")
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	run("init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(repo, "a.txt"), []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run("add", "a.txt")
	run("commit", "-q", "-m", "one")
	m := func(name string) string { return filepath.Join(dir, "pwned-"+name) }
	markers := []string{m("fsmonitor"), m("filter"), m("hook"), m("external")}
	cfg := "[core]\n\tfsmonitor = \"touch " + m("fsmonitor") + "; false\"\n" +
		"[filter \"x\"]\n\tclean = \"touch " + m("filter") + "; cat\"\n" +
		"[diff]\n\texternal = \"touch " + m("external") + "\"\n"
	f, err := os.OpenFile(filepath.Join(repo, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(cfg)
	f.Close()
	os.WriteFile(filepath.Join(repo, ".git", "hooks", "post-index-change"), []byte("#!/bin/sh\ntouch "+m("hook")+"\n"), 0o755)
	os.WriteFile(filepath.Join(repo, ".gitattributes"), []byte("* filter=x\n"), 0o644)
	os.WriteFile(filepath.Join(repo, "a.txt"), []byte("one\ntwo\n"), 0o644)
	return repo, markers
}

func present(paths []string) []string {
	var out []string
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			out = append(out, filepath.Base(p))
		}
	}
	return out
}

// TestGitCommandIgnoresTheRepositoryConfig: git run with api.GitCommand
// reads the host's config, not the repository's, and none of the
// programs the repository names runs; the same git run plainly does run
// them (the plant is live).
func TestGitCommandIgnoresTheRepositoryConfig(t *testing.T) {
	a := startAgent(t, func(c *agent.Config) {
		// The agent's own environment must not reach git either.
		c.Env = []string{"GIT_EXTERNAL_DIFF=touch " + filepath.Join(c.Root, "..", "pwned-env")}
	})
	// Control first, on a repository of its own: plain git runs the
	// plant, so the plant is live.
	ctlDir := filepath.Join(a.dir, "control")
	ctl, ctlMarkers := plantedRepo(t, ctlDir)
	if _, err := a.c.Exec(testCtx(t), api.ExecRequest{Command: api.Command{Shell: "git -C " + ctl + " status; git -C " + ctl + " diff"}}); err != nil {
		t.Fatal(err)
	}
	// (diff.external loses to the agent's GIT_EXTERNAL_DIFF here.)
	if p := present(ctlMarkers[:3]); len(p) != 3 {
		t.Fatalf("plain git ran only %v of the plant: the test's plant is not live", p)
	}
	if len(present([]string{filepath.Join(a.dir, "pwned-env")})) != 1 {
		t.Fatal("plain git did not run the agent's GIT_EXTERNAL_DIFF")
	}
	os.Remove(filepath.Join(a.dir, "pwned-env"))
	repo, markers := plantedRepo(t, a.dir)
	markers = append(markers, filepath.Join(a.dir, "pwned-env"))
	gitDir := filepath.Join(repo, ".git")
	cmd := func(args ...string) api.ExecRequest {
		return api.ExecRequest{Command: api.Command{Git: &api.GitCommand{Args: append([]string{"-C", repo}, args...),
			GitDir: gitDir, CommonDir: gitDir, WorkTree: repo,
			Config: "[core]\n\trepositoryformatversion = 0\n[user]\n\tname = From Host\n"}}}
	}
	for _, args := range [][]string{
		{"status", "--short"},
		{"diff"},
		{"add", "-A"},
		{"config", "user.name"},
	} {
		res, err := a.c.Exec(testCtx(t), cmd(args...))
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		if res.ExitCode != 0 {
			t.Fatalf("git %v: exit %d: %s", args, res.ExitCode, res.Stderr)
		}
		if p := present(markers); len(p) > 0 {
			t.Fatalf("git %v ran what the repository planted: %v", args, p)
		}
		switch args[0] {
		case "status":
			if string(res.Stdout) != " M a.txt\n?? .gitattributes\n" {
				t.Errorf("status: %q", res.Stdout)
			}
		case "diff":
			if !strings.Contains(string(res.Stdout), "+two") {
				t.Errorf("diff: %q", res.Stdout)
			}
		case "config":
			if string(res.Stdout) != "From Host\n" {
				t.Errorf("git read user.name %q, want the host's config", res.Stdout)
			}
		}
	}
	// The private directory is gone after each command.
	if ents, err := os.ReadDir(filepath.Join(a.dir, "paddock-git")); err != nil || len(ents) != 0 {
		t.Errorf("git directories left: %v %v", ents, err)
	}
}

func TestGitCommandRefusals(t *testing.T) {
	a := startAgent(t, nil)
	g := &api.GitCommand{Args: []string{"status"}, GitDir: "/r/.git", CommonDir: "/r/.git", WorkTree: "/r"}
	bad := []api.Command{
		{Git: g, Argv: []string{"git", "status"}},
		{Git: g, Shell: "git status"},
		{Git: &api.GitCommand{GitDir: "/r/.git", CommonDir: "/r/.git", WorkTree: "/r"}},
		{Git: &api.GitCommand{Args: []string{"status"}, GitDir: "r/.git", CommonDir: "/r/.git", WorkTree: "/r"}},
		{Git: &api.GitCommand{Args: []string{"status"}, GitDir: "/r/.git", CommonDir: "/r/../.git", WorkTree: "/r"}},
		{Git: &api.GitCommand{Args: []string{"status"}, GitDir: "/r/.git", CommonDir: "/r/.git", WorkTree: "/r", Config: "a\x00b"}},
	}
	for i, c := range bad {
		_, err := a.c.Exec(testCtx(t), api.ExecRequest{Command: c})
		wantStatus(t, err, 400)
		_ = i
	}
	_, err := a.c.Exec(testCtx(t), api.ExecRequest{Command: api.Command{Git: &api.GitCommand{Args: []string{"status"},
		GitDir: "/r/.git", CommonDir: "/r/.git", WorkTree: "/r", Config: strings.Repeat("#", api.MaxGitConfigBytes+1)}}})
	wantStatus(t, err, 413)
	// A job never runs a git command: the private directory would
	// outlive the request.
	_, err = a.c.StartJob(testCtx(t), api.JobRequest{Command: api.Command{Git: g}})
	wantStatus(t, err, 400)
	_, err = a.c.StartJob(testCtx(t), api.JobRequest{Command: api.Command{Git: g, Argv: []string{"git", "status"}}})
	wantStatus(t, err, 400)
}
