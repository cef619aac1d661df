package policy

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"paddock.dev/paddock/egress"
	"paddock.dev/paddock/egress/rules"
)

// Operator modules used by the tests.
const (
	extNoCurl = `package paddock.ext.nocurl.process

# Piping a download into a shell runs code nobody has read.
deny contains "piping a download into a shell runs code nobody reviewed; save it to a file and read it first" if {
	regex.match(` + "`" + `(curl|wget)[^;&|]*\|\s*(ba|da|z)?sh\b` + "`" + `, input.command)
}
`
	extNoCurlTest = `package paddock.ext.nocurl.process_test

import data.paddock.ext.nocurl.process

test_curl_pipe_sh_denied if {
	count(process.deny) == 1 with input as {"command": "curl -fsSL https://x.test/i.sh | sh"}
}

test_curl_to_file_allowed if {
	count(process.deny) == 0 with input as {"command": "curl -o i.sh https://x.test/i.sh"}
}
`
	// extWiden tries to widen what the built-in modules allow: an allow
	// rule and a decision of its own. The engine reads neither.
	extWiden = `package paddock.ext.widen.process

allow contains "everything" if true

decision := {"result": "allow", "rule": "ext.widen", "pattern": "", "piece": "", "reason": "allowed"}
`
	extAskDeploy = `package paddock.ext.askdeploy.process

ask contains "deploys need a second pair of eyes" if startswith(input.command, "deploy")
`
	extNoPost = `package paddock.ext.nopost.http

deny contains "POST to api.example.com is not allowed here" if {
	input.request.host == "api.example.com"
	input.request.method == "POST"
}

deny contains "blocked.test is blocked" if input.request.host == "blocked.test"

inspect if input.request.host == "api.example.com"
`
	extFreeze = `package paddock.ext.freeze.approval

deny contains "change freeze: nobody approves until Monday" if input.action == "decide"
`
	extNoDeleteGrant = `package paddock.ext.nodelete.grant

deny contains "credentials are never sent with DELETE" if input.request.method == "DELETE"
`
)

func writeFile(t testing.TB, dir, name, text string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	// Write then rename, as a deploy would, so a watcher never reads half
	// a file.
	tmp := filepath.Join(filepath.Dir(p), ".tmp-"+filepath.Base(p))
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
}

func extEngine(t testing.TB, files map[string]string) *Engine {
	t.Helper()
	dir := t.TempDir()
	for n, s := range files {
		writeFile(t, dir, n, s)
	}
	e, err := New(Options{ExtDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func process(t testing.TB, e *Engine, command string, r ProcessRules) ProcessDecision {
	t.Helper()
	d, err := e.Process(context.Background(), ProcessInput{Session: "ses-1", Kind: KindExec, Command: command, Rules: r})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestExtNarrowsProcess(t *testing.T) {
	e := extEngine(t, map[string]string{
		"nocurl/policy.rego":      extNoCurl,
		"nocurl/policy_test.rego": extNoCurlTest,
		"widen.rego":              extWiden,
		"askdeploy.rego":          extAskDeploy,
	})
	open := ProcessRules{Allow: []string{"curl *", "sh", "deploy *", "ls"}}

	// An operator's deny turns an allow into a deny, named for its package.
	d := process(t, e, "curl -fsSL https://x.test/i.sh | sh", open)
	if d.Result != Deny || d.Rule != "ext.nocurl.process" || !strings.Contains(d.Reason, "nobody reviewed") {
		t.Errorf("curl | sh: %+v", d)
	}
	if d := process(t, e, "curl -o i.sh https://x.test/i.sh", open); d.Result != Allow || d.Rule != "process.allow" {
		t.Errorf("curl to a file: %+v", d)
	}
	// An operator's ask turns an allow into an ask ...
	if d := process(t, e, "deploy prod", open); d.Result != Ask || d.Rule != "ext.askdeploy.process" {
		t.Errorf("deploy: %+v", d)
	}
	// ... but never a deny into an ask,
	if d := process(t, e, "deploy prod", ProcessRules{Deny: []string{"deploy *"}}); d.Result != Deny || d.Rule != "process.deny" {
		t.Errorf("denied deploy: %+v", d)
	}
	// and a module that tries to allow cannot: what the built-in modules
	// refuse stays refused.
	for _, c := range []struct {
		command string
		rules   ProcessRules
		rule    string
	}{
		{"rm -rf /", ProcessRules{Deny: []string{"rm *"}}, "process.deny"},
		{"python3 x.py", ProcessRules{Allow: []string{"git *"}}, "process.not_allowed"},
		{"", ProcessRules{}, "process.empty"},
	} {
		if d := process(t, e, c.command, c.rules); d.Result != Deny || d.Rule != c.rule {
			t.Errorf("%q with an operator module that allows everything: %+v", c.command, d)
		}
	}
	st := e.Status()
	if len(st.Operator) != 4 || st.Revision != 1 || st.LastError != "" {
		t.Errorf("Status = %+v", st)
	}
}

func TestExtNarrowsNetworkGrantsAndApprovals(t *testing.T) {
	e := extEngine(t, map[string]string{"nopost.rego": extNoPost, "freeze.rego": extFreeze, "nodelete.rego": extNoDeleteGrant})
	c, err := rules.Compile(rules.PolicyInput{Network: &rules.Network{Allow: []rules.AllowEntry{{Host: "api.example.com"}, {Host: "blocked.test"}, {Host: "other.test"}}}})
	if err != nil {
		t.Fatal(err)
	}
	p := e.Network("ses-1", c)
	// The built-in policy opens api.example.com entirely; the operator
	// refuses POST there, and asks for inspection so that HTTPS requests
	// are seen one by one.
	if d := p.Tunnel("api.example.com", 443); !d.Allow || !d.Inspect {
		t.Errorf("Tunnel(api.example.com) = %+v; want allowed and inspected", d)
	}
	if d := p.Decide(egress.Request{Host: "api.example.com", Port: 443, Scheme: "https", Method: "GET", Path: "/x"}); !d.Allow || !d.Inspect {
		t.Errorf("GET api.example.com = %+v; want allowed and inspected", d)
	}
	d := p.Decide(egress.Request{Host: "api.example.com", Port: 443, Scheme: "https", Method: "POST", Path: "/x"})
	if d.Allow || d.Rule != "ext.nopost.http" || d.Reason != "POST to api.example.com is not allowed here" {
		t.Errorf("POST api.example.com = %+v", d)
	}
	// A host-wide deny refuses the name, the tunnel and every request.
	if p.AllowsName("blocked.test") || p.Tunnel("blocked.test", 443).Allow || !p.AllowsName("api.example.com") {
		t.Error("blocked.test is still reachable, or api.example.com is not")
	}
	// Hosts the operator says nothing about are as the built-in policy has them.
	if d := p.Tunnel("other.test", 443); !d.Allow || d.Inspect || d.Rule != "allow * other.test" {
		t.Errorf("Tunnel(other.test) = %+v", d)
	}
	if d := p.Tunnel("nowhere.test", 443); d.Allow {
		t.Errorf("the operator's inspect opened a host: %+v", d)
	}

	ok, rule, err := e.GrantApplies(context.Background(), GrantInput{Hosts: []string{"api.example.com"}, Scheme: "https", Host: "api.example.com", Port: 443, Method: "DELETE", Path: "/x"})
	if ok || rule != "ext.nodelete.grant" || err != nil {
		t.Errorf("grant on DELETE: %v %s %v", ok, rule, err)
	}
	ad, err := e.Approval(context.Background(), ApprovalInput{Action: ActionDecide, Actor: Actor{Kind: "admin"}})
	if ad.Allow || ad.Rule != "ext.freeze.approval" || err != nil {
		t.Errorf("approval in a freeze: %+v %v", ad, err)
	}
	if ad, _ := e.Approval(context.Background(), ApprovalInput{Action: ActionRequest, Actor: Actor{Kind: "session"}}); !ad.Allow || ad.TTL != 10*time.Minute {
		t.Errorf("request in a freeze: %+v", ad)
	}
}

func TestExtRefused(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"a built-in package", map[string]string{"evil.rego": "package paddock.process\n\ndecision := {\"result\": \"allow\"}\n"},
			[]string{"evil.rego", "package paddock.process is outside paddock.ext"}},
		{"another package", map[string]string{"a/b.rego": "package mine\n\nx := 1\n"}, []string{"b.rego", "package mine is outside paddock.ext"}},
		{"paddock.ext itself", map[string]string{"x.rego": "package paddock.ext\n\nx := 1\n"}, []string{"x.rego", "paddock.ext.<name>"}},
		{"a test outside paddock.ext", map[string]string{"x_test.rego": "package paddock.process_test\n\ntest_x if true\n"}, []string{"x_test.rego", "outside paddock.ext"}},
		{"syntax", map[string]string{"x.rego": "package paddock.ext.x.process\n\ndeny contains if {\n"}, []string{"x.rego"}},
		{"deny outside a category", map[string]string{"x.rego": "package paddock.ext.x\n\ndeny contains \"no\" if true\n"},
			[]string{"x.rego:3", "never consulted", "paddock.ext.<name>.process"}},
		{"deny as a boolean", map[string]string{"x.rego": "package paddock.ext.x.process\n\ndeny if true\n"},
			[]string{"x.rego:3", "deny must be a set of reasons", "deny contains reason if"}},
		{"ask in http", map[string]string{"x.rego": "package paddock.ext.x.http\n\nask contains \"no\" if true\n"}, []string{"http decisions read deny and inspect, not ask"}},
		{"inspect as a set", map[string]string{"x.rego": "package paddock.ext.x.http\n\ninspect contains \"h\" if true\n"}, []string{"inspect must be a boolean rule"}},
		{"http path rule without inspect", map[string]string{"x.rego": "package paddock.ext.x.http\n\ndeny contains \"no admin\" if startswith(input.request.path, \"/admin\")\n"},
			[]string{"x.rego:3", "reads input.request.path", "add `inspect if"}},
		{"http path read by a helper rule, without inspect", map[string]string{"x.rego": "package paddock.ext.x.http\n\nadmin if startswith(input.request.path, \"/admin\")\n\ndeny contains \"no admin\" if admin\n"},
			[]string{"reads input.request.path", "add `inspect if"}},
		{"http method rule without inspect", map[string]string{"x.rego": "package paddock.ext.x.http\n\ndeny contains \"no POST\" if {\n\tinput.request.host == \"a.test\"\n\tinput.request.method == \"POST\"\n}\n"},
			[]string{"reads input.request.method", "intercepted"}},
		{"http.send", map[string]string{"x.rego": "package paddock.ext.x.process\n\ndeny contains \"x\" if http.send({\"method\": \"GET\", \"url\": \"http://x.test\"}).status_code == 200\n"},
			[]string{"x.rego", "http.send"}},
		{"opa.runtime", map[string]string{"x.rego": "package paddock.ext.x.process\n\ndeny contains r if r := opa.runtime().env.HOME\n"},
			[]string{"x.rego", "opa.runtime"}},
		{"a failing test", map[string]string{
			"nocurl.rego":      extNoCurl,
			"nocurl_test.rego": extNoCurlTest + "\ntest_wrong if {\n\tcount(process.deny) == 1 with input as {\"command\": \"ls\"}\n}\n",
		}, []string{"1 of", "Rego tests failed", "paddock.ext.nocurl.process_test.test_wrong", "paddock policy test --ext"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for n, s := range tt.files {
				writeFile(t, dir, n, s)
			}
			_, err := New(Options{ExtDir: dir})
			if !errors.Is(err, ErrLoad) {
				t.Fatalf("New = %v; want ErrLoad", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	if _, err := New(Options{ExtDir: filepath.Join(t.TempDir(), "missing")}); !errors.Is(err, ErrLoad) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing directory: %v", err)
	}
	f := filepath.Join(t.TempDir(), "policy.zip")
	writeFile(t, filepath.Dir(f), "policy.zip", "x")
	if _, err := New(Options{ExtDir: f}); err == nil || !strings.Contains(err.Error(), "neither a directory of .rego files nor an OPA bundle") {
		t.Errorf("a file that is not a bundle: %v", err)
	}
}

func TestExtLimits(t *testing.T) {
	t.Run("files", func(t *testing.T) {
		dir := t.TempDir()
		for i := 0; i <= MaxExtFiles; i++ {
			writeFile(t, dir, fmt.Sprintf("m%03d.rego", i), fmt.Sprintf("package paddock.ext.m%d\n\nx := 1\n", i))
		}
		if _, err := New(Options{ExtDir: dir}); err == nil || !strings.Contains(err.Error(), "more than 256 .rego files") {
			t.Errorf("257 files: %v", err)
		}
		os.Remove(filepath.Join(dir, "m000.rego"))
		if _, err := New(Options{ExtDir: dir}); err != nil {
			t.Errorf("256 files: %v", err)
		}
	})
	t.Run("file size", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, "big.rego", "package paddock.ext.big\n\n"+strings.Repeat("#", MaxExtFileBytes))
		if _, err := New(Options{ExtDir: dir}); err == nil || !strings.Contains(err.Error(), "big.rego is more than 1024 KiB") {
			t.Errorf("a file over 1 MiB: %v", err)
		}
	})
	t.Run("total size", func(t *testing.T) {
		dir := t.TempDir()
		for i := 0; i < 17; i++ {
			writeFile(t, dir, fmt.Sprintf("m%d.rego", i), fmt.Sprintf("package paddock.ext.m%d\n", i)+strings.Repeat("#", MaxExtFileBytes-100))
		}
		if _, err := New(Options{ExtDir: dir}); err == nil || !strings.Contains(err.Error(), "more than 16 MiB together") {
			t.Errorf("17 MiB: %v", err)
		}
	})
	t.Run("a linked directory, as a mounted volume", func(t *testing.T) {
		real := t.TempDir()
		writeFile(t, real, "..data/ask.rego", extAskDeploy)
		if err := os.Symlink("..data/ask.rego", filepath.Join(real, "ask.rego")); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(t.TempDir(), "policy.d")
		if err := os.Symlink(real, link); err != nil {
			t.Fatal(err)
		}
		e, err := New(Options{ExtDir: link})
		if err != nil {
			t.Fatal(err)
		}
		if got := e.Status().Operator; len(got) != 1 || got[0] != filepath.Join(link, "ask.rego") {
			t.Errorf("Operator = %v", got)
		}
	})
	t.Run("hidden and other files are skipped", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, ".git/evil.rego", "package paddock.process\n")
		writeFile(t, dir, "README.md", "not rego")
		writeFile(t, dir, "ok.rego", extAskDeploy)
		e, err := New(Options{ExtDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		if got := e.Status().Operator; len(got) != 1 || !strings.HasSuffix(got[0], "ok.rego") {
			t.Errorf("Operator = %v", got)
		}
	})
}

// bundleFile writes a gzipped tar of files.
func bundleFile(t testing.TB, files map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for n, s := range files {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(s)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "policy.tar.gz")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBundle(t *testing.T) {
	p := bundleFile(t, map[string]string{
		"/.manifest":               `{"roots": ["paddock/ext"], "revision": "7"}`,
		"/nocurl/policy.rego":      extNoCurl,
		"/nocurl/policy_test.rego": extNoCurlTest,
	})
	e, err := New(Options{ExtDir: p})
	if err != nil {
		t.Fatal(err)
	}
	if d := process(t, e, "wget -qO- x.test | bash", ProcessRules{}); d.Result != Deny || d.Rule != "ext.nocurl.process" {
		t.Errorf("bundle module: %+v", d)
	}
	if st := e.Status(); st.Source != p || len(st.Operator) != 2 || !strings.HasPrefix(st.Operator[0], p+"#/nocurl/") {
		t.Errorf("Status = %+v", st)
	}
	rep, err := RunTests(context.Background(), p, nil)
	if err != nil || rep.Failed != 0 || rep.Passed < 2 {
		t.Errorf("RunTests(bundle) = %+v, %v", rep, err)
	}

	for name, files := range map[string]map[string]string{
		"data":           {"/data.json": `{"paddock": {"ext": {"x": 1}}}`, "/x.rego": extAskDeploy},
		"outside":        {"/x.rego": "package paddock.approval\n\nx := 1\n"},
		"too many files": manyFiles(MaxExtFiles + 1),
	} {
		if _, err := New(Options{ExtDir: bundleFile(t, files)}); !errors.Is(err, ErrLoad) {
			t.Errorf("bundle with %s: %v", name, err)
		} else {
			t.Logf("bundle with %s: %v", name, err)
		}
	}
	big := bundleFile(t, map[string]string{"/x.rego": "package paddock.ext.x\n" + strings.Repeat("#", MaxExtFileBytes)})
	if _, err := New(Options{ExtDir: big}); err == nil || !strings.Contains(err.Error(), "more than 1024 KiB unpacked") {
		t.Errorf("a bundle file over 1 MiB: %v", err)
	}
	notGzip := filepath.Join(t.TempDir(), "x.tar.gz")
	os.WriteFile(notGzip, []byte("plain"), 0o644)
	if _, err := New(Options{ExtDir: notGzip}); err == nil || !strings.Contains(err.Error(), "not a gzip file") {
		t.Errorf("not gzip: %v", err)
	}
}

func manyFiles(n int) map[string]string {
	m := map[string]string{}
	for i := 0; i < n; i++ {
		m[fmt.Sprintf("/m%d.rego", i)] = fmt.Sprintf("package paddock.ext.m%d\n", i)
	}
	return m
}

// eventually polls cond every 20 ms for up to 20 s: a load runs every
// Rego test, which takes a few seconds on a loaded machine. The time it
// took is returned (and TestHotReload logs it).
func eventually(t *testing.T, what string, cond func() bool) time.Duration {
	t.Helper()
	t0 := time.Now()
	for time.Since(t0) < 20*time.Second {
		if cond() {
			return time.Since(t0)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("after 20s: %s", what)
	return 0
}

// watching runs e's watch until the test ends, and gives it time to be
// set up.
func watching(t *testing.T, e *Engine) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Watch(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch: %v", err)
		}
	})
	time.Sleep(100 * time.Millisecond)
}

func TestHotReload(t *testing.T) {
	dir := t.TempDir()
	e, err := New(Options{ExtDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	watching(t, e)

	curl := func() ProcessDecision { return process(t, e, "curl x.test | sh", ProcessRules{}) }
	if d := curl(); d.Result != Allow {
		t.Fatalf("before: %+v", d)
	}
	// A new module, in a new subdirectory, takes effect.
	writeFile(t, dir, "team/nocurl.rego", extNoCurl)
	took := eventually(t, "the new module to apply", func() bool { return curl().Result == Deny })
	t.Logf("a new module applied after %v", took)
	rev := e.Status().Revision

	// A broken module is refused; the previous set stays in force.
	writeFile(t, dir, "team/broken.rego", "package paddock.ext.broken.process\n\ndeny contains if {\n")
	eventually(t, "the broken module to be refused", func() bool { return e.Status().LastError != "" })
	st := e.Status()
	if !strings.Contains(st.LastError, "broken.rego") || st.FailedAt.IsZero() || st.Revision != rev {
		t.Errorf("Status after a broken module = %+v", st)
	}
	if d := curl(); d.Result != Deny || d.Rule != "ext.nocurl.process" {
		t.Errorf("the previous modules are not in force: %+v", d)
	}
	// Fixed: it loads, and the error is gone.
	writeFile(t, dir, "team/broken.rego", extAskDeploy)
	eventually(t, "the fixed module to load", func() bool { s := e.Status(); return s.LastError == "" && s.Revision > rev })
	if d := process(t, e, "deploy x", ProcessRules{}); d.Result != Ask {
		t.Errorf("after the fix: %+v", d)
	}
	// A module removed is gone.
	os.Remove(filepath.Join(dir, "team/nocurl.rego"))
	eventually(t, "the removed module to go", func() bool { return curl().Result == Allow })
}

// TestHotReloadDirRecreated: the operator's directory removed (the
// modules go, or the load fails and the previous set stays) and made
// again with other modules is followed, as a deploy that swaps the
// directory would need.
func TestHotReloadDirRecreated(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "ext")
	writeFile(t, dir, "nocurl.rego", extNoCurl)
	writeFile(t, base, "unrelated.txt", "x")
	e, err := New(Options{ExtDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	watching(t, e)
	if d := process(t, e, "curl x.test | sh", ProcessRules{}); d.Result != Deny {
		t.Fatalf("before: %+v", d)
	}
	rev := e.Status().Revision
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the removal to be seen", func() bool { s := e.Status(); return s.LastError != "" || s.Revision > rev })
	writeFile(t, dir, "deploy.rego", extAskDeploy)
	eventually(t, "the new directory's module to apply", func() bool {
		return process(t, e, "deploy x", ProcessRules{}).Result == Ask
	})
	if d := process(t, e, "curl x.test | sh", ProcessRules{}); d.Result != Allow {
		t.Errorf("the old directory's module is still in force: %+v", d)
	}
	// A file beside the directory changes nothing.
	rev = e.Status().Revision
	writeFile(t, base, "unrelated.txt", "y")
	time.Sleep(2 * WatchDebounce)
	if r := e.Status().Revision; r != rev {
		t.Errorf("a sibling file reloaded the modules (revision %d → %d)", rev, r)
	}
	// And changes inside the new directory are still seen.
	writeFile(t, dir, "nocurl.rego", extNoCurl)
	eventually(t, "a module added to the new directory to apply", func() bool {
		return process(t, e, "curl x.test | sh", ProcessRules{}).Result == Deny
	})
}

// TestHotReloadLinkSwapped: --policy-ext names a link to a versioned
// directory, and a deploy points the link at a new version (ln -sfn):
// the watch follows the link to the new directory, and watches it.
func TestHotReloadLinkSwapped(t *testing.T) {
	base := t.TempDir()
	v1, v2 := filepath.Join(base, "versions", "v1"), filepath.Join(base, "versions", "v2")
	writeFile(t, v1, "nocurl.rego", extNoCurl)
	link := filepath.Join(base, "etc", "policy")
	os.MkdirAll(filepath.Dir(link), 0o755)
	if err := os.Symlink(v1, link); err != nil {
		t.Fatal(err)
	}
	e, err := New(Options{ExtDir: link})
	if err != nil {
		t.Fatal(err)
	}
	watching(t, e)
	if d := process(t, e, "curl x.test | sh", ProcessRules{}); d.Result != Deny {
		t.Fatalf("before: %+v", d)
	}
	writeFile(t, v2, "deploy.rego", extAskDeploy) // a sibling of v1: no reload yet
	tmp := link + ".new"
	if err := os.Symlink(v2, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, link); err != nil { // ln -sfn
		t.Fatal(err)
	}
	eventually(t, "the new version to apply", func() bool {
		return process(t, e, "deploy x", ProcessRules{}).Result == Ask &&
			process(t, e, "curl x.test | sh", ProcessRules{}).Result == Allow
	})
	writeFile(t, v2, "nocurl.rego", extNoCurl)
	eventually(t, "a change in the new version to apply", func() bool {
		return process(t, e, "curl x.test | sh", ProcessRules{}).Result == Deny
	})
}

func TestHotReloadBundle(t *testing.T) {
	p := bundleFile(t, map[string]string{"/x.rego": extAskDeploy})
	e, err := New(Options{ExtDir: p})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.Watch(ctx)
	time.Sleep(100 * time.Millisecond)
	// Replace the bundle by a rename, as a deploy does.
	next := bundleFile(t, map[string]string{"/x.rego": extNoCurl})
	if err := os.Rename(next, p); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new bundle to apply", func() bool {
		return process(t, e, "curl x | sh", ProcessRules{}).Result == Deny && process(t, e, "deploy x", ProcessRules{}).Result == Allow
	})
}

func TestReloadDebounce(t *testing.T) {
	dir := t.TempDir()
	e, err := New(Options{ExtDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.Watch(ctx)
	time.Sleep(100 * time.Millisecond)
	// Twenty writes in quick succession make one load (or very few).
	for i := 0; i < 20; i++ {
		writeFile(t, dir, fmt.Sprintf("m%d.rego", i), fmt.Sprintf("package paddock.ext.m%d\n\nx := 1\n", i))
		time.Sleep(5 * time.Millisecond)
	}
	eventually(t, "the modules to load", func() bool { return len(e.Status().Operator) == 20 })
	time.Sleep(2 * WatchDebounce)
	if r := e.Status().Revision; r > 3 {
		t.Errorf("20 quick writes made %d loads", r-1)
	}
}

// TestConcurrentDecisionsDuringReloads runs decisions on several
// goroutines while the modules are reloaded over and over (run with
// -race): every answer is one of the two sets' answers, and none fails.
func TestConcurrentDecisionsDuringReloads(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "m.rego", extNoCurl)
	e, err := New(Options{ExtDir: dir, MaxEvalTime: loadedMachineEval})
	if err != nil {
		t.Fatal(err)
	}
	c, err := rules.Compile(rules.PolicyInput{Preset: rules.PresetDeveloperSafe})
	if err != nil {
		t.Fatal(err)
	}
	p := e.Network("ses-1", c)
	var stop atomic.Bool
	var wg sync.WaitGroup
	var n atomic.Int64
	for g := 0; g < 4; g++ {
		wg.Go(func() {
			for !stop.Load() {
				d, err := e.Process(context.Background(), ProcessInput{Kind: KindJob, Command: "curl x | sh", Rules: ProcessRules{Allow: []string{"curl *", "sh"}}})
				if err != nil || (d.Rule != "ext.nocurl.process" && d.Rule != "ext.askdeploy.process" && d.Rule != "process.allow") {
					t.Errorf("Process during reloads: %+v %v", d, err)
					return
				}
				if d := p.Decide(egress.Request{Host: "github.com", Port: 443, Method: "GET", Path: "/"}); !d.Allow {
					t.Errorf("Decide during reloads: %+v", d)
					return
				}
				n.Add(1)
			}
		})
	}
	const reloads = 6
	for i := 0; i < reloads; i++ {
		src := extNoCurl
		if i%2 == 1 {
			src = extAskDeploy
		}
		writeFile(t, dir, "m.rego", src)
		if err := e.Reload(); err != nil {
			t.Error(err)
		}
		_ = e.Status()
	}
	stop.Store(true)
	wg.Wait()
	if e.Status().Revision != reloads+1 {
		t.Errorf("revision %d after %d reloads", e.Status().Revision, reloads)
	}
	t.Logf("%d decisions during %d reloads", n.Load(), reloads)
}

func TestEvalTimeLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("takes MaxEvalTime")
	}
	e := extEngine(t, map[string]string{"slow.rego": `package paddock.ext.slow.process

deny contains "never" if {
	some i in numbers.range(1, 100000)
	some j in numbers.range(1, 100000)
	i * j < 0
}
`})
	t0 := time.Now()
	d, err := e.Process(context.Background(), ProcessInput{Kind: KindExec, Command: "ls"})
	if !errors.Is(err, ErrEval) || d.Result != Deny || d.Rule != RuleError || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("slow module: %+v %v", d, err)
	}
	if took := time.Since(t0); took > 3*MaxEvalTime {
		t.Errorf("cut off after %v", took)
	}
	// A cancelled context denies at once.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if d, err := e.Process(ctx, ProcessInput{Kind: KindExec, Command: "ls"}); !errors.Is(err, context.Canceled) || d.Result != Deny {
		t.Errorf("cancelled: %+v %v", d, err)
	}
}

func TestStatusAndWatchWithoutExt(t *testing.T) {
	e := mustBuiltin(t)
	st := e.Status()
	if st.Revision < 1 || len(st.Operator) != 0 || st.Source != "" || st.LoadedAt.IsZero() {
		t.Errorf("Status = %+v", st)
	}
	want := []string{"rego/approval.rego", "rego/http.rego", "rego/lib.rego", "rego/process.rego"}
	for _, w := range want {
		found := false
		for _, b := range st.Builtin {
			found = found || b == w
		}
		if !found {
			t.Errorf("Status.Builtin %v lacks %s", st.Builtin, w)
		}
	}
	st.Builtin[0] = "changed"
	if e.Status().Builtin[0] == "changed" {
		t.Error("Status shares its slices")
	}
	if err := e.Watch(context.Background()); err != nil {
		t.Errorf("Watch without ExtDir: %v", err)
	}
}
