package speculate_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/daemon/daemontest"
	"paddock.dev/paddock/policy"
)

// TestSpeculateSandboxLive is the same round on a sandbox through
// /v1/sandboxes: speculate shows the change without making it, approve
// and apply make it, a conflict writes nothing, reject then apply is 409;
// a relative path is refused, and a session's routes do not reach it.
func TestSpeculateSandboxLive(t *testing.T) {
	d := daemontest.New(t)
	ctx := context.Background()
	var sb apiv1.Sandbox
	if st, _ := call(t, d, d.Token, "POST", "/v1/sandboxes", apiv1.SandboxRequest{}, &sb); st != 201 && st != 200 {
		t.Fatalf("create a sandbox: %d", st)
	}
	base := "/v1/sandboxes/" + sb.ID
	run := func(line string) string {
		t.Helper()
		var res apiv1.ProcessResult
		if st, _ := call(t, d, d.Token, "POST", base+"/process", apiv1.ProcessRequest{Command: line}, &res); st != 200 || res.ExitCode != 0 {
			t.Fatalf("process %q: %d %+v", line, st, res)
		}
		return res.Stdout
	}
	run("mkdir -p /workspace/app && echo v1 > /workspace/app/conf && echo old > /workspace/app/old")

	if st, _ := call(t, d, d.Token, "POST", base+"/speculate", apiv1.SpeculateRequest{Command: "true", Paths: []string{"workspace/app"}}, nil); st != 400 {
		t.Errorf("a relative path on a sandbox: %d, want 400", st)
	}
	var cs apiv1.Changeset
	if st, _ := call(t, d, d.Token, "POST", base+"/speculate", apiv1.SpeculateRequest{
		Command: "echo v2 > /workspace/app/conf && rm /workspace/app/old && echo n > /workspace/app/new", Paths: []string{"/workspace/app"}}, &cs); st != 201 {
		t.Fatalf("speculate: %d", st)
	}
	if got := ops(&cs); got != "modified:/workspace/app/conf,added:/workspace/app/new,deleted:/workspace/app/old" || cs.TargetKind != "sandbox" || !cs.Complete {
		t.Errorf("changeset %s %+v", got, cs)
	}
	if cs.SideEffects.Network {
		t.Errorf("an offline sandbox's copy could reach the network? %+v", cs.SideEffects)
	}
	if out := run("cat /workspace/app/conf /workspace/app/old; ls /workspace/app"); out != "v1\nold\nconf\nold\n" {
		t.Errorf("the sandbox after a speculation: %q", out)
	}
	// A session route does not serve a sandbox's id.
	if st, _ := call(t, d, d.Token, "GET", "/v1/agents/sessions/"+sb.ID+"/changesets", nil, nil); st != 404 {
		t.Errorf("a sandbox's changesets through the sessions' routes: %d, want 404", st)
	}
	var cs2 apiv1.Changeset
	call(t, d, d.Token, "POST", base+"/speculate", apiv1.SpeculateRequest{Command: "echo v3 > /workspace/app/conf && echo y > /workspace/app/y", Paths: []string{"/workspace/app"}}, &cs2)

	call(t, d, d.Token, "POST", base+"/changesets/"+cs.ID+"/decide", apiv1.ChangesetDecision{Decision: "approve"}, nil)
	var ar apiv1.ApplyResult
	if st, _ := call(t, d, d.Token, "POST", base+"/changesets/"+cs.ID+"/apply", nil, &ar); st != 200 || len(ar.Applied) != 3 {
		t.Fatalf("apply: %d %+v", st, ar)
	}
	if out := run("cat /workspace/app/conf /workspace/app/new; test ! -e /workspace/app/old && echo noold"); out != "v2\nn\nnoold\n" {
		t.Errorf("the sandbox after apply: %q", out)
	}
	// cs2 started from v1: conf changed since, so nothing of it is written.
	call(t, d, d.Token, "POST", base+"/changesets/"+cs2.ID+"/decide", apiv1.ChangesetDecision{Decision: "approve"}, nil)
	if st, code := call(t, d, d.Token, "POST", base+"/changesets/"+cs2.ID+"/apply", nil, nil); st != 409 || code != "changeset_conflict" {
		t.Errorf("apply over a changed file: %d %s", st, code)
	}
	if out := run("cat /workspace/app/conf; test ! -e /workspace/app/y && echo noy"); out != "v2\nnoy\n" {
		t.Errorf("a refused apply wrote: %q", out)
	}
	var cs3 apiv1.Changeset
	call(t, d, d.Token, "POST", base+"/speculate", apiv1.SpeculateRequest{Command: "echo z > /workspace/app/z", Paths: []string{"/workspace/app"}}, &cs3)
	call(t, d, d.Token, "POST", base+"/changesets/"+cs3.ID+"/decide", apiv1.ChangesetDecision{Decision: "reject", Reason: "no"}, nil)
	if st, code := call(t, d, d.Token, "POST", base+"/changesets/"+cs3.ID+"/apply", nil, nil); st != 409 || code != "changeset_not_approved" {
		t.Errorf("apply of a rejected changeset: %d %s", st, code)
	}
	// The sandbox goes, and its changesets with it.
	if st, _ := call(t, d, d.Token, "DELETE", base, nil, nil); st/100 != 2 {
		t.Fatalf("delete the sandbox: %d", st)
	}
	if rows, err := d.Store().ListChangesets(ctx, sb.ID); err != nil || len(rows) != 0 {
		t.Errorf("changesets after the sandbox's delete: %d %v", len(rows), err)
	}
}

// TestSpeculateAccess holds who may do what, through a real daemon: the
// other tenant's id is 404 on every route; a session token with exec and
// files.read speculates and reads, with files.write applies, never
// decides (403), and without the ops is 403; the process policy's deny
// is 403 and its ask 428 with nothing made; the limits of a request are
// 400 or 413; paths with '..' are refused; a link the command leaves in
// the copy pointing outside the paths is listed, not followed, and makes
// the changeset incomplete (never applied).
func TestSpeculateAccess(t *testing.T) {
	tenants, toks := daemontest.TenantTokens(t, "a", "b")
	tokA, tokB := toks[0], toks[1]
	d := daemontest.New(t, tenants)
	ctx := context.Background()
	a := client.New(d.URL, tokA)
	rules := policy.ProcessRules{Deny: []string{"rm *"}, Ask: []string{"touch *"}}
	s, err := a.CreateSession(ctx, apiv1.CreateRequest{Policy: &apiv1.PolicyRequest{Process: &rules}})
	if err != nil {
		t.Fatal(err)
	}
	ws := s.Workspace.Path
	base := "/v1/agents/sessions/" + s.ID
	good := apiv1.SpeculateRequest{Command: "echo hi > f.txt", Paths: []string{"."}}
	var cs apiv1.Changeset
	if st, _ := call(t, d, tokA, "POST", base+"/speculate", good, &cs); st != 201 || ops(&cs) != "added:"+ws+"/f.txt" {
		t.Fatalf("speculate as the tenant: %d %s", st, ops(&cs))
	}
	// Another tenant sees nothing.
	for _, r := range []struct{ method, path string }{
		{"POST", base + "/speculate"}, {"GET", base + "/changesets"}, {"GET", base + "/changesets/" + cs.ID},
		{"POST", base + "/changesets/" + cs.ID + "/decide"}, {"POST", base + "/changesets/" + cs.ID + "/apply"},
	} {
		var body any
		if r.method == "POST" {
			body = map[string]any{"command": "true", "paths": []string{"/tmp"}, "decision": "approve"}
			if strings.HasSuffix(r.path, "/speculate") {
				body = good
			} else if strings.HasSuffix(r.path, "/decide") {
				body = apiv1.ChangesetDecision{Decision: "approve"}
			} else {
				body = nil
			}
		}
		if st, _ := call(t, d, tokB, r.method, r.path, body, nil); st != 404 {
			t.Errorf("tenant b: %s %s: %d, want 404", r.method, r.path, st)
		}
	}
	if st, _ := call(t, d, tokA, "GET", base+"/changesets/cs-0000000000000000", nil, nil); st != 404 {
		t.Errorf("an unknown changeset: %d", st)
	}

	// Session tokens.
	mint := func(ops ...string) string {
		tok, err := a.MintToken(ctx, s.ID, apiv1.TokenRequest{Ops: ops})
		if err != nil {
			t.Fatal(err)
		}
		return tok.Token
	}
	execOnly := mint(auth.OpExec)
	if st, _ := call(t, d, execOnly, "POST", base+"/speculate", good, nil); st != 403 {
		t.Errorf("a token with exec only speculates: %d, want 403 (it shows contents: files.read too)", st)
	}
	readOnly := mint(auth.OpRead)
	if st, _ := call(t, d, readOnly, "GET", base+"/changesets", nil, nil); st != 403 {
		t.Errorf("a token with read lists changesets (contents): %d, want 403", st)
	}
	agent := mint(auth.OpExec, auth.OpFilesRead, auth.OpFilesWrite)
	var mine apiv1.Changeset
	if st, _ := call(t, d, agent, "POST", base+"/speculate", good, &mine); st != 201 {
		t.Fatalf("a token with exec and files.read: %d", st)
	}
	if st, _ := call(t, d, agent, "GET", base+"/changesets/"+mine.ID, nil, nil); st != 200 {
		t.Errorf("the token reads its changeset: %d", st)
	}
	if st, _ := call(t, d, agent, "POST", base+"/changesets/"+mine.ID+"/decide", apiv1.ChangesetDecision{Decision: "approve"}, nil); st != 403 {
		t.Errorf("a token approves its own changeset: %d, want 403", st)
	}
	all := mint(auth.GrantableOps()...)
	if st, _ := call(t, d, all, "POST", base+"/changesets/"+mine.ID+"/decide", apiv1.ChangesetDecision{Decision: "approve"}, nil); st != 403 {
		t.Errorf("a token with every op decides: %d, want 403", st)
	}
	call(t, d, tokA, "POST", base+"/changesets/"+mine.ID+"/decide", apiv1.ChangesetDecision{Decision: "approve"}, nil)
	if st, _ := call(t, d, execOnly, "POST", base+"/changesets/"+mine.ID+"/apply", nil, nil); st != 403 {
		t.Errorf("a token without files.write applies: %d, want 403", st)
	}
	if st, _ := call(t, d, agent, "POST", base+"/changesets/"+mine.ID+"/apply", nil, nil); st != 200 {
		t.Errorf("a token with files.write applies an approved changeset: %d", st)
	}

	// The process policy: deny is 403, ask is 428, and neither makes a copy
	// nor a changeset.
	before := countSessions(t, a)
	var list apiv1.ChangesetList
	call(t, d, tokA, "GET", base+"/changesets", nil, &list)
	n := len(list.Changesets)
	if st, _ := call(t, d, tokA, "POST", base+"/speculate", apiv1.SpeculateRequest{Command: "rm -rf " + ws, Paths: []string{"."}}, nil); st != 403 {
		t.Errorf("a denied command: %d, want 403", st)
	}
	if st, code := call(t, d, tokA, "POST", base+"/speculate", apiv1.SpeculateRequest{Command: "touch x", Paths: []string{"."}}, nil); st != 428 || code != "approval_required" {
		t.Errorf("a held command: %d %s, want 428", st, code)
	}
	call(t, d, tokA, "GET", base+"/changesets", nil, &list)
	if after := countSessions(t, a); after != before || len(list.Changesets) != n {
		t.Errorf("a refused speculation made something: sessions %d -> %d, changesets %d -> %d", before, after, n, len(list.Changesets))
	}
	// The held request, once approved, is spent by a speculation naming
	// it; it was asked for a speculation, so it never runs the command
	// for real through exec.
	as, err := a.Approvals(ctx, s.ID)
	if err != nil || len(as) != 1 || as[0].State != "pending" {
		t.Fatalf("approvals: %+v %v", as, err)
	}
	if _, err := d.Client.Approve(ctx, s.ID, as[0].ID, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Exec(ctx, s.ID, apiv1.ExecRequest{Command: "touch x", TimeoutSeconds: apiv1.DefaultSpeculateTimeoutSeconds, ApprovalID: as[0].ID}); status(err) != 403 {
		t.Errorf("exec with a speculation's approval: %v, want 403", err)
	}
	var held apiv1.Changeset
	if st, _ := call(t, d, tokA, "POST", base+"/speculate", apiv1.SpeculateRequest{Command: "touch x", Paths: []string{"."}, ApprovalID: as[0].ID}, &held); st != 201 || ops(&held) != "added:"+ws+"/x" {
		t.Errorf("speculate with its approval: %d %s", st, ops(&held))
	}
	if st, _ := call(t, d, tokA, "POST", base+"/speculate", apiv1.SpeculateRequest{Command: "touch x", Paths: []string{"."}, ApprovalID: as[0].ID}, nil); st != 403 {
		t.Errorf("an approval spent twice: %d, want 403", st)
	}

	// Limits.
	many := make([]string, apiv1.MaxSpeculatePaths+1)
	for i := range many {
		many[i] = "/tmp/p" + strings.Repeat("x", i)
	}
	for name, req := range map[string]apiv1.SpeculateRequest{
		"no command":       {Paths: []string{"."}},
		"no paths":         {Command: "true"},
		"33 paths":         {Command: "true", Paths: many},
		"dot-dot":          {Command: "true", Paths: []string{"../../etc"}},
		"root":             {Command: "true", Paths: []string{"/"}},
		"long path":        {Command: "true", Paths: []string{"/" + strings.Repeat("a", 2000)}},
		"timeout over":     {Command: "true", Paths: []string{"."}, TimeoutSeconds: apiv1.MaxSpeculateTimeoutSeconds + 1},
		"timeout negative": {Command: "true", Paths: []string{"."}, TimeoutSeconds: -1},
		"relative cwd":     {Command: "true", Paths: []string{"."}, Cwd: "tmp"},
	} {
		if st, _ := call(t, d, tokA, "POST", base+"/speculate", req, nil); st != 400 {
			t.Errorf("%s: %d, want 400", name, st)
		}
	}
	if st, _ := call(t, d, tokA, "POST", base+"/speculate", apiv1.SpeculateRequest{Command: strings.Repeat("x", apiv1.MaxSpeculateCommandBytes+1), Paths: []string{"."}}, nil); st != 413 {
		t.Errorf("a command over the limit: %d, want 413", st)
	}
	if st, _ := call(t, d, tokA, "POST", base+"/changesets/"+cs.ID+"/decide", apiv1.ChangesetDecision{Decision: "maybe"}, nil); st != 400 {
		t.Errorf("decision maybe: %d", st)
	}
	if st, _ := call(t, d, tokA, "POST", base+"/changesets/"+cs.ID+"/decide", apiv1.ChangesetDecision{Decision: "approve", Reason: strings.Repeat("r", 1025)}, nil); st != 400 {
		t.Errorf("a reason over the limit: %d", st)
	}

	// A link out of the paths and a file past 1 MiB: listed without
	// content, the changeset incomplete, and apply refuses it.
	var big apiv1.Changeset
	if st, _ := call(t, d, tokA, "POST", base+"/speculate", apiv1.SpeculateRequest{
		Command: "mkdir -p out && ln -s /etc/passwd out/link && head -c 1048577 /dev/zero > out/big && echo s > out/small", Paths: []string{"out"}}, &big); st != 201 {
		t.Fatalf("speculate a link and a big file: %d", st)
	}
	if big.Complete || len(big.Files) != 3 {
		t.Fatalf("changeset %s complete=%v", ops(&big), big.Complete)
	}
	for _, f := range big.Files {
		omitted := strings.HasSuffix(f.Path, "/big") || strings.HasSuffix(f.Path, "/link")
		if f.ContentOmitted != omitted || (omitted && len(f.Content) != 0) {
			t.Errorf("%s: omitted %v, %d bytes", f.Path, f.ContentOmitted, len(f.Content))
		}
	}
	call(t, d, tokA, "POST", base+"/changesets/"+big.ID+"/decide", apiv1.ChangesetDecision{Decision: "approve"}, nil)
	if st, code := call(t, d, tokA, "POST", base+"/changesets/"+big.ID+"/apply", nil, nil); st != 409 || code != "changeset_incomplete" {
		t.Errorf("apply of an incomplete changeset: %d %s", st, code)
	}
	if out := daemontest.Sh(t, a, s.ID, "test ! -e "+ws+"/out && echo none"); out != "none\n" {
		t.Errorf("the refused apply wrote: %q", out)
	}
	// A directory the changeset writes into that the session then turns
	// into a link (to /tmp, a place it may write) is a conflict: apply
	// never writes where the speculation did not look.
	var deep apiv1.Changeset
	if st, _ := call(t, d, tokA, "POST", base+"/speculate", apiv1.SpeculateRequest{
		Command: "mkdir -p sub/in && echo a > sub/a && echo b > sub/in/b", Paths: []string{"sub"}}, &deep); st != 201 || !deep.Complete {
		t.Fatalf("speculate into sub: %d %s", st, ops(&deep))
	}
	daemontest.Sh(t, a, s.ID, "mkdir -p /tmp/elsewhere && ln -s /tmp/elsewhere "+ws+"/sub")
	call(t, d, tokA, "POST", base+"/changesets/"+deep.ID+"/decide", apiv1.ChangesetDecision{Decision: "approve"}, nil)
	if st, code := call(t, d, tokA, "POST", base+"/changesets/"+deep.ID+"/apply", nil, nil); st != 409 || code != "changeset_conflict" {
		t.Errorf("apply through a link: %d %s", st, code)
	}
	if out := daemontest.Sh(t, a, s.ID, "ls -A /tmp/elsewhere | wc -l"); out != "0\n" {
		t.Errorf("apply wrote through the link: %s files", out)
	}
	// A sandbox: the other tenant's 404, a session token 403 (sandboxes
	// take the admin or a tenant token), its owner 201.
	var sb apiv1.Sandbox
	if st, _ := call(t, d, tokA, "POST", "/v1/sandboxes", apiv1.SandboxRequest{}, &sb); st/100 != 2 {
		t.Fatalf("create a sandbox: %d", st)
	}
	sreq := apiv1.SpeculateRequest{Command: "echo s > /workspace/s", Paths: []string{"/workspace"}}
	if st, _ := call(t, d, tokB, "POST", "/v1/sandboxes/"+sb.ID+"/speculate", sreq, nil); st != 404 {
		t.Errorf("tenant b speculates on a's sandbox: %d, want 404", st)
	}
	if st, _ := call(t, d, tokB, "GET", "/v1/sandboxes/"+sb.ID+"/changesets", nil, nil); st != 404 {
		t.Errorf("tenant b lists a's sandbox's changesets: %d, want 404", st)
	}
	if st, _ := call(t, d, all, "POST", "/v1/sandboxes/"+sb.ID+"/speculate", sreq, nil); st != 403 {
		t.Errorf("a session token on a sandbox: %d, want 403", st)
	}
	if st, _ := call(t, d, tokA, "POST", "/v1/sandboxes/"+sb.ID+"/speculate", sreq, nil); st != 201 {
		t.Errorf("the owner on its sandbox: %d, want 201", st)
	}
	// Deleting the session drops its changesets.
	if err := a.DeleteSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if rows, err := d.Store().ListChangesets(ctx, s.ID); err != nil || len(rows) != 0 {
		t.Errorf("changesets after the session's delete: %d %v", len(rows), err)
	}
}

func status(err error) int {
	var ce *client.Error
	if errors.As(err, &ce) {
		return ce.Status
	}
	return 0
}

func countSessions(t *testing.T, c *client.Client) int {
	t.Helper()
	ss, err := c.ListAllSessions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return len(ss)
}
