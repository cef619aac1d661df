package api_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"paddock.dev/paddock/client"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/tokens"
	"paddock.dev/paddock/hostd/workspace"
	"paddock.dev/paddock/policy"
)

// ledgerKinds returns the kinds of a session's ledger entries, in order,
// and the entries themselves.
func ledgerOf(t *testing.T, c *client.Client, id string) (kinds []string, data []map[string]any) {
	t.Helper()
	ev, err := c.Events(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ev {
		kinds = append(kinds, e.Kind)
		var m map[string]any
		json.Unmarshal(e.Data, &m)
		data = append(data, m)
	}
	return kinds, data
}

func processSession(t *testing.T, c *client.Client, rules policy.ProcessRules) *session.Session {
	t.Helper()
	s, err := c.CreateSession(context.Background(), session.CreateRequest{Policy: &session.PolicyRequest{Process: &rules}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestProcessPolicy drives the process policy (the Rego process module)
// through the API on a real sandbox: allowed, refused with the rule and
// the piece, not in the allow list, jobs and exec/stream alike, and every
// decision in the ledger.
func TestProcessPolicy(t *testing.T) {
	d := newTestDaemon(t)
	c, ctx := d.c, context.Background()
	s := processSession(t, c, policy.ProcessRules{Allow: []string{"echo *", "cat *", "touch *"}, Deny: []string{"rm *"}})
	if s.Policy.Process == nil || len(s.Policy.Process.Deny) != 1 {
		t.Fatalf("record's policy: %+v", s.Policy)
	}

	r, err := c.Exec(ctx, s.ID, session.ExecRequest{Command: "echo hi && touch /workspace/ok"})
	if err != nil || r.ExitCode != 0 || r.Stdout != "hi\n" {
		t.Fatalf("allowed: %+v %v", r, err)
	}
	// A denied piece refuses the whole line: nothing of it runs.
	_, err = c.Exec(ctx, s.ID, session.ExecRequest{Command: "touch /workspace/first; rm -rf /workspace/ok"})
	var e *client.Error
	if !errors.As(err, &e) || e.Status != 403 {
		t.Fatalf("deny: %v", err)
	}
	var body struct{ Error, Rule, Pattern, Piece string }
	json.Unmarshal(e.Body, &body)
	if body.Rule != "process.deny" || body.Pattern != "rm *" || body.Piece != "rm -rf /workspace/ok" {
		t.Errorf("refusal body: %s", e.Body)
	}
	if r, _ := c.Exec(ctx, s.ID, session.ExecRequest{Command: "cat /workspace/ok && cat /workspace/first || echo missing"}); r == nil || !strings.Contains(r.Stdout, "missing") {
		t.Errorf("a refused line ran in part: %+v", r)
	}
	// Not in the allow list.
	if _, err := c.Exec(ctx, s.ID, session.ExecRequest{Command: "echo a | sed s/a/b/"}); status(err) != 403 || !strings.Contains(err.Error(), "process.not_allowed") {
		t.Errorf("not allowed: %v", err)
	}
	// Jobs and exec/stream are judged the same way.
	var j session.Job
	if err := c.Call(ctx, "POST", s.ID, "/jobs", nil, session.JobStart{Command: "rm -f /workspace/ok"}, &j); status(err) != 403 {
		t.Errorf("job: %v", err)
	}
	var out strings.Builder
	if _, err := c.ExecStream(ctx, s.ID, session.ExecRequest{Command: "rm /workspace/ok"}, &out, &out); status(err) != 403 {
		t.Errorf("exec/stream: %v", err)
	}
	if err := c.Call(ctx, "POST", s.ID, "/jobs", nil, session.JobStart{Command: "echo job"}, &j); err != nil || j.ID == "" {
		t.Errorf("allowed job: %+v %v", j, err)
	}

	kinds, data := ledgerOf(t, c, s.ID)
	var refused, execs int
	for i, k := range kinds {
		switch k {
		case "exec.refused", "job.refused":
			refused++
			if data[i]["rule"] == "" || data[i]["command"] == "" {
				t.Errorf("refusal without its rule: %v", data[i])
			}
		case "exec":
			execs++
			if data[i]["policy"] != "process.allow" {
				t.Errorf("exec ledgered without the deciding rule: %v", data[i])
			}
		}
	}
	if refused != 4 || execs < 2 {
		t.Errorf("ledger: %d refusals, %d execs: %v", refused, execs, kinds)
	}

	// Bad process policies are refused at create, with nothing made.
	for _, bad := range []policy.ProcessRules{
		{Allow: []string{""}},
		{Deny: []string{"rm\n*"}},
		{Allow: []string{"echo *"}, Enforce: "everything"},
		{Deny: []string{"rm *"}, Enforce: "exec"},
		{Allow: []string{"g*t status"}, Enforce: "exec"},
		{Allow: []string{"bin/tool *"}, Enforce: "exec"},
		{Allow: []string{"no-such-program-here *"}, Enforce: "exec"},
	} {
		if _, err := c.CreateSession(ctx, session.CreateRequest{Policy: &session.PolicyRequest{Process: &bad}}); status(err) != 400 {
			t.Errorf("%+v: %v, want 400", bad, err)
		}
	}
	list, _ := c.ListSessions(ctx)
	if len(list) != 1 {
		t.Errorf("refused creates left sessions: %d", len(list))
	}
}

// TestApprovals: an ask rule holds a command (428) until an operator
// decides; asking again finds the same request; an approval runs exactly
// the command it was given for, once; denied, used and mismatched ones are
// 403; two concurrent retries run it once; a held request can wait for
// the decision.
func TestApprovals(t *testing.T) {
	d := newTestDaemon(t)
	c, ctx := d.c, context.Background()
	s := processSession(t, c, policy.ProcessRules{Allow: []string{"echo *", "cat *"}, Ask: []string{"touch *"}})

	line := "touch /workspace/deployed && echo ran >> /workspace/log"
	_, err := c.Exec(ctx, s.ID, session.ExecRequest{Command: line})
	h := client.HoldOf(err)
	if h == nil || status(err) != 428 || h.Matched != "process.ask: touch *" || time.Until(h.ExpiresAt) < 9*time.Minute {
		t.Fatalf("held: %+v %v", h, err)
	}
	if _, err := c.Exec(ctx, s.ID, session.ExecRequest{Command: line}); client.HoldOf(err) == nil || client.HoldOf(err).ApprovalID != h.ApprovalID {
		t.Errorf("asking again: %v (want the same request %s)", err, h.ApprovalID)
	}
	if r, _ := c.Exec(ctx, s.ID, session.ExecRequest{Command: "cat /workspace/log || echo none"}); r == nil || !strings.Contains(r.Stdout, "none") {
		t.Fatalf("a held command ran: %+v", r)
	}
	// Not approved yet: the id cannot run it.
	if _, err := c.Exec(ctx, s.ID, session.ExecRequest{Command: line, ApprovalID: h.ApprovalID}); status(err) != 403 || !strings.Contains(err.Error(), "not approved") && !strings.Contains(err.Error(), "no operator") {
		t.Errorf("before approval: %v", err)
	}
	a, err := c.Approve(ctx, s.ID, h.ApprovalID, "looks fine")
	if err != nil || a.State != "approved" || a.Decider != "admin" || a.Note != "looks fine" {
		t.Fatalf("approve: %+v %v", a, err)
	}
	if _, err := c.Deny(ctx, s.ID, h.ApprovalID, ""); status(err) != 409 {
		t.Errorf("deciding twice: %v", err)
	}
	// Another command, or other parameters, cannot spend it.
	if _, err := c.Exec(ctx, s.ID, session.ExecRequest{Command: "touch /workspace/other", ApprovalID: h.ApprovalID}); status(err) != 403 || !strings.Contains(err.Error(), "another command") {
		t.Errorf("another command: %v", err)
	}
	if _, err := c.Exec(ctx, s.ID, session.ExecRequest{Command: line, TimeoutSeconds: 7, ApprovalID: h.ApprovalID}); status(err) != 403 {
		t.Errorf("other parameters: %v", err)
	}
	// Two retries at once: exactly one runs.
	var wg sync.WaitGroup
	results := make([]error, 2)
	for i := range results {
		wg.Go(func() {
			_, results[i] = c.Exec(ctx, s.ID, session.ExecRequest{Command: line, ApprovalID: h.ApprovalID})
		})
	}
	wg.Wait()
	if (results[0] == nil) == (results[1] == nil) || status(errors.Join(results...)) != 403 {
		t.Fatalf("concurrent retries: %v / %v", results[0], results[1])
	}
	if r, _ := c.Exec(ctx, s.ID, session.ExecRequest{Command: "cat /workspace/log"}); r == nil || r.Stdout != "ran\n" {
		t.Fatalf("the approved command ran %q times", r.Stdout)
	}
	if _, err := c.Exec(ctx, s.ID, session.ExecRequest{Command: line, ApprovalID: h.ApprovalID}); status(err) != 403 || !strings.Contains(err.Error(), "used already") {
		t.Errorf("used again: %v", err)
	}

	// Denied sticks.
	_, err = c.Exec(ctx, s.ID, session.ExecRequest{Command: "touch /workspace/x"})
	h2 := client.HoldOf(err)
	if h2 == nil || h2.ApprovalID == h.ApprovalID {
		t.Fatalf("second request: %v", err)
	}
	if _, err := c.Deny(ctx, s.ID, h2.ApprovalID, "not today"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, s.ID, session.ExecRequest{Command: "touch /workspace/x", ApprovalID: h2.ApprovalID}); status(err) != 403 || !strings.Contains(err.Error(), "denied (not today)") {
		t.Errorf("denied: %v", err)
	}

	// A request held open wakes when an operator approves, and runs.
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, s.ID, session.ExecRequest{Command: "touch /workspace/waited", ApprovalWaitSeconds: 60})
		done <- err
	}()
	var pending string
	for deadline := time.Now().Add(10 * time.Second); pending == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		as, _ := c.Approvals(ctx, s.ID)
		for _, a := range as {
			if a.State == "pending" && a.Command == "touch /workspace/waited" {
				pending = a.ID
			}
		}
	}
	if pending == "" {
		t.Fatal("the waiting request never showed up")
	}
	// The held request does not hold the session: a checkpoint goes
	// through meanwhile (and changes the revision, so the waiting
	// request's approval no longer matches: it is refused, not run).
	if _, err := c.Exec(ctx, s.ID, session.ExecRequest{Command: "echo meanwhile"}); err != nil {
		t.Errorf("exec while a request waits: %v", err)
	}
	if _, err := c.Approve(ctx, s.ID, pending, ""); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the waiting request: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting request did not wake")
	}
	if r, _ := c.Exec(ctx, s.ID, session.ExecRequest{Command: "cat /workspace/waited && echo there"}); r == nil || r.Stdout != "there\n" {
		t.Errorf("the waited command did not run: %+v", r)
	}
	// A wait that runs out is a 428 like any other.
	if _, err := c.Exec(ctx, s.ID, session.ExecRequest{Command: "touch /workspace/late", ApprovalWaitSeconds: 1}); client.HoldOf(err) == nil {
		t.Errorf("wait ran out: %v", err)
	}

	// A checkpoint (a new revision) voids an approval given before it.
	_, err = c.Exec(ctx, s.ID, session.ExecRequest{Command: "touch /workspace/y"})
	h3 := client.HoldOf(err)
	if _, err := c.Approve(ctx, s.ID, h3.ApprovalID, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Checkpoint(ctx, s.ID, -1, session.CheckpointRequest{Tag: "c1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, s.ID, session.ExecRequest{Command: "touch /workspace/y", ApprovalID: h3.ApprovalID}); status(err) != 403 {
		t.Errorf("approval from before a checkpoint: %v", err)
	}

	// An agent with a session token asks; it cannot approve its own
	// command (the route is not a session token's), and the request
	// names it as the requester.
	tok, err := c.MintToken(ctx, s.ID, tokens.TokenRequest{Ops: []string{"exec", "read"}})
	if err != nil {
		t.Fatal(err)
	}
	agent := client.New(d.url, tok.Token)
	_, err = agent.Exec(ctx, s.ID, session.ExecRequest{Command: "touch /workspace/agent"})
	h4 := client.HoldOf(err)
	if h4 == nil {
		t.Fatalf("agent's held command: %v", err)
	}
	if _, err := agent.Approve(ctx, s.ID, h4.ApprovalID, ""); status(err) != 403 {
		t.Errorf("an agent approved its own command: %v", err)
	}
	if as, err := agent.Approvals(ctx, s.ID); err != nil || as[len(as)-1].Requester != "session-token:"+tok.ID {
		t.Errorf("requester: %+v %v", as, err)
	}

	// The engine's state is the admin's to see.
	var st policy.Status
	if code := call(t, d.url, "GET", "/v1/admin/policy", nil, &st); code != 200 || st.Revision < 1 || len(st.Builtin) < 3 || st.LastError != "" {
		t.Errorf("policy status: %d %+v", code, st)
	}
	req, _ := http.NewRequest("GET", d.url+"/v1/admin/policy", nil)
	req.Header.Set("Authorization", "Bearer "+tok.Token)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 403 {
		t.Errorf("a session token read the policy status: %v %v", resp.Status, err)
	} else {
		resp.Body.Close()
	}

	// Bad approval fields.
	for _, req := range []session.ExecRequest{
		{Command: "touch /workspace/z", ApprovalID: "nope"},
		{Command: "touch /workspace/z", ApprovalWaitSeconds: 121},
		{Command: "touch /workspace/z", ApprovalWaitSeconds: 5, ApprovalID: h.ApprovalID},
		{Command: "echo allowed", ApprovalID: h.ApprovalID},
	} {
		if _, err := c.Exec(ctx, s.ID, req); status(err) != 400 {
			t.Errorf("%+v: %v, want 400", req, err)
		}
	}
	if _, err := c.Approve(ctx, s.ID, "apr-0000000000000000", ""); status(err) != 404 {
		t.Errorf("unknown approval: %v", err)
	}
	if _, err := c.Approve(ctx, s.ID, h3.ApprovalID, strings.Repeat("n", 600)); status(err) != 400 {
		t.Errorf("long note: %v", err)
	}

	as, err := c.Approvals(ctx, s.ID)
	if err != nil || len(as) < 5 {
		t.Fatalf("list: %d %v", len(as), err)
	}
	states := map[string]int{}
	for _, a := range as {
		states[a.State]++
	}
	if states["consumed"] != 2 || states["denied"] != 1 {
		t.Errorf("states: %v", states)
	}
	kinds, _ := ledgerOf(t, c, s.ID)
	joined := strings.Join(kinds, " ")
	for _, k := range []string{"approval.requested", "approval.approved", "approval.denied", "approval.consumed", "approval.refused"} {
		if !strings.Contains(joined, k) {
			t.Errorf("ledger lacks %s: %s", k, joined)
		}
	}
}

// TestEnforcedExecList: process.enforce "exec" makes the programs the
// allow patterns name the only ones the guest kernel starts; a command the
// string rules let through (sh -c …) still cannot start another program.
func TestEnforcedExecList(t *testing.T) {
	d := newTestDaemon(t)
	c, ctx := d.c, context.Background()
	s := processSession(t, c, policy.ProcessRules{Allow: []string{"sh *", "cat *", "echo *"}, Enforce: "exec"})
	if !s.Capabilities.ExecAllowlist || len(s.Policy.ExecPrograms) != 3 {
		t.Fatalf("record: caps %+v, programs %v", s.Capabilities, s.Policy.ExecPrograms)
	}
	r, err := c.Exec(ctx, s.ID, session.ExecRequest{Command: "sh -c 'cat /etc/passwd >/dev/null && echo ok'"})
	if err != nil || r.ExitCode != 0 || r.Stdout != "ok\n" {
		t.Fatalf("allowed programs: %+v %v", r, err)
	}
	// The string rule allows "sh *"; the kernel refuses id, which the
	// list does not name.
	r, err = c.Exec(ctx, s.ID, session.ExecRequest{Command: "sh -c 'id'"})
	if err != nil || r.ExitCode == 0 || !strings.Contains(r.Stderr, "ermission denied") {
		t.Fatalf("a program outside the list started: %+v %v", r, err)
	}
	// A copy of an allowed program, or a script the agent wrote, does
	// not start either (both written executable through the files API).
	var rd workspace.FileRead
	if err := c.Call(ctx, "GET", s.ID, "/files/content?path=/bin/cat", nil, nil, &rd); err != nil {
		t.Fatal(err)
	}
	script := base64.StdEncoding.EncodeToString([]byte("#!/bin/sh\necho script ran\n"))
	for path, content := range map[string]string{"/tmp/mycat": rd.ContentBase64, "/workspace/s.sh": script} {
		if err := c.Call(ctx, "PUT", s.ID, "/files/content", nil, workspace.FileWrite{Path: path, ContentBase64: content, Mode: "0755"}, nil); err != nil {
			t.Fatal(err)
		}
		r, err = c.Exec(ctx, s.ID, session.ExecRequest{Command: "sh -c '" + path + " /etc/passwd'"})
		if err != nil || r.ExitCode == 0 || strings.Contains(r.Stdout, "script ran") || strings.Contains(r.Stdout, "root:") {
			t.Errorf("%s ran: %+v %v", path, r, err)
		}
	}
	// Through an allowed interpreter a script still runs: the interpreter
	// is the boundary, as the docs say.
	r, err = c.Exec(ctx, s.ID, session.ExecRequest{Command: "sh /workspace/s.sh"})
	if err != nil || r.Stdout != "script ran\n" {
		t.Errorf("sh script: %+v %v", r, err)
	}
}
