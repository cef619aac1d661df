package api_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/tokens"
	"paddock.dev/paddock/hostd/workspace"
	"paddock.dev/paddock/internal/testutil"
)

// gitAttack is a live session with a git-only session token: the caller
// the attack used.
type gitAttack struct {
	d   *testDaemon
	id  string
	tok string
}

func (g *gitAttack) call(t *testing.T, bearer, method, path string, body, out any) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, g.d.url+"/v1/agents/sessions/"+g.id+path, rd)
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil {
		json.Unmarshal(raw, out)
	}
	return resp.StatusCode, string(raw)
}

// plant writes files through the files API, as the agent would.
func (g *gitAttack) plant(t *testing.T, files map[string]string) {
	t.Helper()
	for p, content := range files {
		mode := "0644"
		if strings.HasSuffix(p, ".sh") || strings.Contains(p, "/hooks/") {
			mode = "0755"
		}
		yes := true
		if code, body := g.call(t, token, "PUT", "/files/content", map[string]any{"path": p, "content_base64": base64.StdEncoding.EncodeToString([]byte(content)),
			"mode": mode, "parents": &yes}, nil); code != 200 {
			t.Fatalf("plant %s: %d %s", p, code, body)
		}
	}
}

// markers lists /tmp/pwned-* in the sandbox.
func (g *gitAttack) markers(t *testing.T) []string {
	t.Helper()
	l, err := g.d.ws.ListFiles(context.Background(), "", g.id, "/tmp")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range l.Entries {
		if strings.HasPrefix(e.Name, "pwned-") {
			out = append(out, e.Name)
		}
	}
	slices.Sort(out)
	return out
}

// sh runs a setup or control command as the admin (an ordinary exec).
func (g *gitAttack) sh(t *testing.T, cmd string) *session.ExecResult {
	t.Helper()
	r, err := g.d.c.Exec(context.Background(), g.id, session.ExecRequest{Command: cmd, TimeoutSeconds: 60})
	if err != nil {
		t.Fatalf("exec %q: %v", cmd, err)
	}
	return r
}

// gitRepoConfig is what git init writes, before the plant is added.
const gitRepoConfig = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n"

// verbs runs every git verb with the git-only token on repo and checks
// each answered as wanted and left no marker. commit is the status the
// commit should get.
func (g *gitAttack) verbs(t *testing.T, repo, branch string, commit int) {
	t.Helper()
	q := "?repo=" + url.QueryEscape(repo)
	steps := []struct {
		name, method, path string
		body               any
		want               int
		check              func(workspace.GitResult) bool
	}{
		{"status", "GET", "/git/status" + q, nil, 200, func(r workspace.GitResult) bool { return strings.Contains(r.Output, "a.txt") }},
		{"diff", "GET", "/git/diff" + q, nil, 200, func(r workspace.GitResult) bool { return strings.Contains(r.Output, "+two") }},
		{"diff --staged", "GET", "/git/diff" + q + "&staged=true", nil, 200, nil},
		{"log", "GET", "/git/log" + q + "&n=5", nil, 200, func(r workspace.GitResult) bool {
			return len(r.Entries) >= 1 && r.Entries[len(r.Entries)-1].Subject == "one"
		}},
		{"commit", "POST", "/git/commit", map[string]any{"repo": repo, "message": "agent work"}, commit, func(r workspace.GitResult) bool { return commit != 200 || len(r.Commit) == 40 }},
		{"branch", "POST", "/git/branch", map[string]any{"repo": repo, "name": branch}, 200, func(r workspace.GitResult) bool { return r.Branch == branch }},
		{"status after", "GET", "/git/status" + q, nil, 200, func(r workspace.GitResult) bool { return strings.HasPrefix(r.Output, "## "+branch) }},
		{"log after", "GET", "/git/log" + q + "&n=5", nil, 200, func(r workspace.GitResult) bool {
			return len(r.Entries) >= 1 && (commit != 200 || r.Entries[0].Subject == "agent work")
		}},
	}
	for _, s := range steps {
		var r workspace.GitResult
		code, body := g.call(t, g.tok, s.method, s.path, s.body, &r)
		if code != s.want || (code == 200 && s.check != nil && !s.check(r)) {
			t.Errorf("git %s: %d %s (want %d)", s.name, code, clipBody(body), s.want)
		}
		if m := g.markers(t); len(m) > 0 {
			t.Fatalf("git %s ran what the workspace planted: %v", s.name, m)
		}
	}
}

func clipBody(s string) string {
	if len(s) > 600 {
		return s[:600] + "…"
	}
	return s
}

// control runs plain git on the planted repository as an ordinary exec and
// checks the plant does run there: the attack is live, so the verbs'
// silence above means something. It then clears the markers.
func (g *gitAttack) control(t *testing.T, repo, cmd string, want ...string) {
	t.Helper()
	g.sh(t, "cd "+repo+" && echo more >> a.txt && echo more >> c.txt; "+cmd+" >/dev/null 2>&1 </dev/null; true")
	got := g.markers(t)
	for _, w := range want {
		if !slices.Contains(got, "pwned-"+w) {
			t.Errorf("plain git (%s) did not run the plant %s (markers %v): the test's plant is not live", cmd, w, got)
		}
	}
	g.sh(t, "rm -f /tmp/pwned-*")
}

const gitIdent = "-c user.name=t -c user.email=t@t"

// TestAttackGitPlantedConfig: a workspace's repository, global config,
// attributes and hooks name programs; the git verbs, called with a
// git-only token, run none of them, and still work. Each class is
// checked live on a debian sandbox, and each plant is shown to run under
// plain git (control) so the test can fail.
func TestAttackGitPlantedConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the debian image (built from the network once per machine)")
	}
	testutil.DebianImages(t)
	d := newTestDaemon(t)
	ctx := context.Background()
	s, err := d.c.CreateSession(ctx, session.CreateRequest{Runtime: session.Runtime{Image: testutil.DebianImageName}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.c.DeleteSession(ctx, s.ID)
	tk, err := d.c.MintToken(ctx, s.ID, tokens.TokenRequest{Ops: []string{"git"}, TTLSeconds: 3600})
	if err != nil {
		t.Fatal(err)
	}
	g := &gitAttack{d: d, id: s.ID, tok: tk.Token}
	// setup makes /workspace/<name>: a.txt and c.txt committed, then
	// both changed, b.txt new.
	setup := func(t *testing.T, name string) string {
		// Each class starts clean, whatever the one before left.
		g.sh(t, "rm -f /tmp/pwned-*")
		repo := "/workspace/" + name
		g.sh(t, "set -e; mkdir -p "+repo+"; cd "+repo+"; git init -q -b main .; printf 'one\\n' > a.txt; printf 'cee\\n' > c.txt; git add a.txt c.txt; git "+gitIdent+" commit -qm one; printf 'two\\n' >> a.txt; printf 'cee2\\n' > c.txt; printf 'new\\n' > b.txt")
		return repo
	}
	hooks := []string{"pre-commit", "prepare-commit-msg", "commit-msg", "post-commit", "post-checkout", "reference-transaction",
		"post-index-change", "pre-auto-gc", "post-rewrite", "pre-push", "pre-merge-commit", "post-merge", "fsmonitor-watchman"}
	hookFiles := func(dir string) map[string]string {
		out := map[string]string{}
		for _, h := range hooks {
			out[dir+"/hooks/"+h] = "#!/bin/sh\ntouch /tmp/pwned-hook-" + h + "\nexit 0\n"
		}
		return out
	}
	script := func(marker string) string { return "#!/bin/sh\ntouch /tmp/pwned-" + marker + "\nexit 0\n" }

	classes := []struct {
		name   string
		plant  func(repo string) map[string]string
		commit int
		// control is plain git run in the repository, and the markers it
		// must leave.
		control string
		want    []string
	}{
		{"fsmonitor", func(r string) map[string]string {
			return map[string]string{r + "/.git/config": gitRepoConfig + "\tfsmonitor = \"touch /tmp/pwned-fsmonitor; false\"\n"}
		}, 200, "git status", []string{"fsmonitor"}},
		{"hooks", func(r string) map[string]string {
			f := hookFiles(r + "/.git")
			f[r+"/.git/config"] = gitRepoConfig + "[gc]\n\tauto = 1\n"
			return f
		}, 200, "git " + gitIdent + " commit -qam x; git checkout -q -b other", []string{"hook-pre-commit", "hook-commit-msg", "hook-post-commit", "hook-reference-transaction", "hook-post-checkout"}},
		{"hookspath", func(r string) map[string]string {
			f := hookFiles(r + "-hooks")
			f[r+"/.git/config"] = gitRepoConfig + "\thooksPath = " + r + "-hooks/hooks\n"
			return f
		}, 200, "git " + gitIdent + " commit -qam x", []string{"hook-pre-commit", "hook-post-commit"}},
		{"diff-external", func(r string) map[string]string {
			return map[string]string{r + "/.git/config": gitRepoConfig + "[diff]\n\texternal = " + r + "-bin/ext.sh\n", r + "-bin/ext.sh": script("diff-external")}
		}, 200, "git diff", []string{"diff-external"}},
		{"diff-drivers", func(r string) map[string]string {
			return map[string]string{
				r + "/.git/config": gitRepoConfig + "[diff \"cmd\"]\n\tcommand = \"touch /tmp/pwned-diff-command; true\"\n" +
					"[diff \"tc\"]\n\ttextconv = \"touch /tmp/pwned-diff-textconv; cat\"\n",
				r + "/.gitattributes": "a.txt diff=tc\nc.txt diff=cmd\n",
			}
		}, 200, "git diff", []string{"diff-command", "diff-textconv"}},
		{"filters", func(r string) map[string]string {
			return map[string]string{
				r + "/.git/config": gitRepoConfig + "[filter \"evil\"]\n\tclean = \"touch /tmp/pwned-filter-clean; cat\"\n\tsmudge = \"touch /tmp/pwned-filter-smudge; cat\"\n\trequired = true\n" +
					"[filter \"proc\"]\n\tprocess = \"touch /tmp/pwned-filter-process\"\n",
				// info/attributes wins over .gitattributes, and its later
				// line over its earlier one.
				r + "/.git/info/attributes": "* filter=evil\nc.txt filter=proc\n",
				r + "/.gitattributes":       "b.txt filter=evil\n",
			}
		}, 409, "git add a.txt; git add c.txt", []string{"filter-clean", "filter-process"}},
		{"include", func(r string) map[string]string {
			return map[string]string{
				r + "/.git/config":   gitRepoConfig + "[include]\n\tpath = " + r + "-inc/evil.inc\n[includeIf \"gitdir:/workspace/\"]\n\tpath = " + r + "-inc/evil2.inc\n",
				r + "-inc/evil.inc":  "[core]\n\tfsmonitor = \"touch /tmp/pwned-include; false\"\n",
				r + "-inc/evil2.inc": "[diff]\n\texternal = " + r + "-inc/ext.sh\n",
				r + "-inc/ext.sh":    script("includeif"),
			}
		}, 200, "git status; git diff", []string{"include", "includeif"}},
		{"worktree-config", func(r string) map[string]string {
			return map[string]string{
				r + "/.git/config":          "[core]\n\trepositoryformatversion = 1\n\tfilemode = true\n\tbare = false\n[extensions]\n\tworktreeConfig = true\n",
				r + "/.git/config.worktree": "[core]\n\tfsmonitor = \"touch /tmp/pwned-worktree-config; false\"\n",
			}
		}, 200, "git status", []string{"worktree-config"}},
		{"signing", func(r string) map[string]string {
			return map[string]string{
				r + "/.git/config": gitRepoConfig + "[commit]\n\tgpgSign = true\n[tag]\n\tgpgSign = true\n[log]\n\tshowSignature = true\n[gpg]\n\tprogram = " + r + "-bin/gpg.sh\n[gpg \"ssh\"]\n\tprogram = " + r + "-bin/gpg.sh\n",
				r + "-bin/gpg.sh":  script("gpg"),
			}
		}, 200, "git log -1 HEAD~1; git " + gitIdent + " commit -qam x", []string{"gpg"}},
		{"helpers-and-aliases", func(r string) map[string]string {
			b := r + "-bin/"
			return map[string]string{
				r + "/.git/config": gitRepoConfig +
					"\tpager = \"touch /tmp/pwned-pager; cat\"\n\teditor = \"touch /tmp/pwned-editor; true\"\n\tsshCommand = \"touch /tmp/pwned-ssh; false\"\n" +
					"\taskPass = " + b + "askpass.sh\n\tgitProxy = " + b + "proxy.sh\n\talternateRefsCommand = " + b + "altrefs.sh\n" +
					"[pager]\n\tstatus = \"touch /tmp/pwned-pager-status; cat\"\n\tdiff = \"touch /tmp/pwned-pager-diff; cat\"\n\tlog = \"touch /tmp/pwned-pager-log; cat\"\n" +
					"[sequence]\n\teditor = \"touch /tmp/pwned-sequence-editor; true\"\n" +
					"[credential]\n\thelper = \"!touch /tmp/pwned-credential; true\"\n" +
					"[alias]\n\tpwn = \"!touch /tmp/pwned-alias\"\n\tstatus = \"!touch /tmp/pwned-alias-status\"\n\tst = \"!touch /tmp/pwned-alias-st\"\n" +
					"[remote \"origin\"]\n\turl = ext::" + b + "ext.sh\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n[protocol \"ext\"]\n\tallow = always\n" +
					"[uploadpack]\n\tpackObjectsHook = " + b + "packhook.sh\n" +
					"[merge \"evil\"]\n\tdriver = \"touch /tmp/pwned-merge-driver; false\"\n" +
					"[diff]\n\ttool = evil\n[difftool \"evil\"]\n\tcmd = \"touch /tmp/pwned-difftool\"\n" +
					"[hook \"evil\"]\n\tcommand = \"touch /tmp/pwned-config-hook\"\n\tevent = pre-commit\n\tevent = post-commit\n" +
					"[status]\n\tsubmoduleSummary = true\n",
				r + "/.gitattributes": "* merge=evil\n",
				b + "askpass.sh":      script("askpass"),
				b + "proxy.sh":        script("gitproxy"),
				b + "altrefs.sh":      script("altrefs"),
				b + "ext.sh":          script("ext-transport"),
				b + "packhook.sh":     script("packhook"),
			}
		}, 200, "git pwn; printf 'protocol=https\\nhost=example.com\\n\\n' | git credential fill; git " + gitIdent + " commit -a; git ls-remote origin",
			[]string{"alias", "credential", "editor", "ext-transport"}},
	}
	for _, c := range classes {
		t.Run(c.name, func(t *testing.T) {
			repo := setup(t, c.name)
			if c.name == "signing" {
				// A signed commit on top, so git log with
				// log.showSignature would call gpg.program to verify it.
				g.sh(t, "set -e; cd "+repo+"; t=$(git write-tree); p=$(git rev-parse HEAD); "+
					"c=$(printf 'tree %s\nparent %s\nauthor t <t@t> 1700000000 +0000\ncommitter t <t@t> 1700000000 +0000\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n -----END PGP SIGNATURE-----\n\nsigned\n' $t $p | git hash-object -t commit -w --stdin); "+
					"git update-ref HEAD $c")
			}
			g.plant(t, c.plant(repo))
			g.verbs(t, repo, "agent/"+c.name, c.commit)
			g.control(t, repo, c.control, c.want...)
		})
	}

	// A submodule carries its own config: no verb may start a git in it.
	t.Run("submodule", func(t *testing.T) {
		repo := setup(t, "submodule")
		g.sh(t, "set -e; cd "+repo+"; git init -q -b main sub; cd sub; printf 'x\\n' > f; git add f; git "+gitIdent+" commit -qm s; cd ..; "+
			"printf '[submodule \"sub\"]\\n\\tpath = sub\\n\\turl = ./sub\\n\\tignore = none\\n' > .gitmodules; git add sub .gitmodules 2>/dev/null; git "+gitIdent+" commit -qm sub")
		g.plant(t, map[string]string{
			repo + "/.git/config":        gitRepoConfig + "[status]\n\tsubmoduleSummary = true\n[diff]\n\tsubmodule = log\n[submodule]\n\trecurse = true\n",
			repo + "/sub/.git/config":    gitRepoConfig + "[filter \"e\"]\n\tclean = \"touch /tmp/pwned-submodule-filter; cat\"\n",
			repo + "/sub/.gitattributes": "f filter=e\n",
			repo + "/sub/f":              "y\n", // same size, new content: git must hash it, through the filter
		})
		g.verbs(t, repo, "agent/submodule", 200)
		g.control(t, repo, "git add -A", "submodule-filter")
	})

	// Last: the guest user's global config and attributes, which every
	// plain git after this would read.
	t.Run("global-config", func(t *testing.T) {
		repo := setup(t, "global")
		home := "/home/agent"
		g.plant(t, map[string]string{
			home + "/.gitconfig":             "[core]\n\tfsmonitor = \"touch /tmp/pwned-global; false\"\n[filter \"g\"]\n\tclean = \"touch /tmp/pwned-global-filter; cat\"\n",
			home + "/.config/git/config":     "[diff]\n\texternal = " + home + "/ext.sh\n",
			home + "/ext.sh":                 script("xdg-config"),
			home + "/.config/git/attributes": "* filter=g\n",
		})
		g.verbs(t, repo, "agent/global", 200)
		g.control(t, repo, "git status; git diff; git add -A", "global", "global-filter", "xdg-config")
	})

	// Every verb is in the ledger under its name, with the keys git was
	// not given.
	es, err := d.c.Events(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	ignored := false
	for _, e := range es {
		count[e.Kind]++
		if e.Kind == "git.status" && strings.Contains(string(mustJSON(e.Data)), "core.fsmonitor") {
			ignored = true
		}
	}
	for _, k := range []string{"git.status", "git.diff", "git.log", "git.commit", "git.branch"} {
		if count[k] < len(classes) {
			t.Errorf("ledger has %d %s entries, want one per verb call (%d+)", count[k], k, len(classes))
		}
	}
	if !ignored {
		t.Error("no git.status entry names core.fsmonitor among the ignored config keys")
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// TestAttackGitVerbsCountAndLedger is the attack as it was: the
// repository is planted with file writes only (no exec), the session's
// budget allows one exec, and a git-only token calls the verbs. Nothing
// planted runs; the commit is the one exec and a second is refused;
// every verb is in the ledger.
func TestAttackGitVerbsCountAndLedger(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the debian image (built from the network once per machine)")
	}
	testutil.DebianImages(t)
	d := newTestDaemon(t)
	ctx := context.Background()
	one := int64(1)
	s, err := d.c.CreateSession(ctx, session.CreateRequest{Runtime: session.Runtime{Image: testutil.DebianImageName}, Budget: &session.Budget{MaxExecs: &one}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.c.DeleteSession(ctx, s.ID)
	tk, err := d.c.MintToken(ctx, s.ID, tokens.TokenRequest{Ops: []string{"git"}, TTLSeconds: 3600})
	if err != nil {
		t.Fatal(err)
	}
	g := &gitAttack{d: d, id: s.ID, tok: tk.Token}
	r := "/workspace/planted"
	g.plant(t, map[string]string{
		r + "/.git/HEAD":                        "ref: refs/heads/main\n",
		r + "/.git/config":                      gitRepoConfig + "\tfsmonitor = \"touch /tmp/pwned-fsmonitor; false\"\n\thooksPath = " + r + "/.git/hooks\n",
		r + "/.git/objects/.keep":               "",
		r + "/.git/refs/heads/.keep":            "",
		r + "/.git/hooks/post-index-change":     script0("post-index-change"),
		r + "/.git/hooks/reference-transaction": script0("reference-transaction"),
		r + "/.git/hooks/pre-commit":            script0("pre-commit"),
		r + "/a.txt":                            "one\n",
	})
	q := "?repo=" + url.QueryEscape(r)
	var st workspace.GitResult
	if code, body := g.call(t, g.tok, "GET", "/git/status"+q, nil, &st); code != 200 || !strings.Contains(st.Output, "?? a.txt") {
		t.Errorf("status: %d %s", code, body)
	}
	if code, body := g.call(t, g.tok, "GET", "/git/log"+q, nil, nil); code != 200 {
		t.Errorf("log of an empty repository: %d %s", code, body)
	}
	var cm workspace.GitResult
	if code, body := g.call(t, g.tok, "POST", "/git/commit", map[string]any{"repo": r, "message": "first"}, &cm); code != 200 || len(cm.Commit) != 40 {
		t.Errorf("commit: %d %s", code, body)
	}
	if m := g.markers(t); len(m) > 0 {
		t.Fatalf("the git verbs ran what the files API planted: %v", m)
	}
	g.plant(t, map[string]string{r + "/a.txt": "two\n"})
	var be struct {
		Error  string `json:"error"`
		Budget string `json:"budget"`
	}
	if code, body := g.call(t, g.tok, "POST", "/git/commit", map[string]any{"repo": r, "message": "second"}, &be); code != 403 || be.Budget != "max_execs" || !strings.Contains(be.Error, "git commit") {
		t.Errorf("a second commit past max_execs 1: %d %s", code, body)
	}
	got, err := d.c.GetSession(ctx, s.ID)
	if err != nil || got.Usage.Execs != 1 {
		t.Errorf("usage after one commit: %+v %v", got.Usage, err)
	}
	es, _ := d.c.Events(ctx, s.ID)
	var kinds []string
	for _, e := range es {
		if strings.HasPrefix(e.Kind, "git.") {
			kinds = append(kinds, e.Kind)
		}
	}
	if strings.Join(kinds, ",") != "git.status,git.log,git.commit" {
		t.Errorf("git ledger entries %v, want status, log and commit (a refused commit ran no git)", kinds)
	}
	if m := g.markers(t); len(m) > 0 {
		t.Fatalf("the git verbs ran what the files API planted: %v", m)
	}
}

func script0(marker string) string { return "#!/bin/sh\ntouch /tmp/pwned-" + marker + "\nexit 0\n" }
