package api_test

import (
	"context"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
	"paddock.dev/paddock/hostd/daemon/daemontest"
	"paddock.dev/paddock/hostd/session"
	_ "paddock.dev/paddock/hypervisor/qemu" // registers qemu for TestReplayLiveQEMU
	"paddock.dev/paddock/internal/testutil"
	"paddock.dev/paddock/policy"
)

// replayLine is a step as "command:status:exit:same".
func replayLine(r *apiv1.ReplayResult) string {
	var out []string
	for _, s := range r.Steps {
		exit, same := "-", "-"
		if s.ExitCode != nil {
			b, _ := json.Marshal(*s.ExitCode)
			exit = string(b)
		}
		if s.SameExitCode != nil {
			same = map[bool]string{true: "same", false: "differs"}[*s.SameExitCode]
		}
		out = append(out, s.Command+":"+s.Status+":"+exit+":"+same)
	}
	return strings.Join(out, " | ")
}

// TestReplayLive is the replay on procbox through the daemon: the source
// ran five commands (one of them fails, one writes a file the next one
// reads) and a file write through the files route; a dry run lists the
// steps and the skipped write; a replay into a target whose process
// policy denies one command stops there, with the target's 403 answer
// (its rule) in the answer and the refusal in the target's ledger; the
// first failure stops a replay by default and stop_on_failure false goes
// on; each step reports its exit code beside the recorded one.
func TestReplayLive(t *testing.T) {
	d := newTestDaemon(t)
	ctx := context.Background()
	c := d.c
	newSession := func(proc *policy.ProcessRules) *session.Session {
		req := session.CreateRequest{TTLSeconds: 600}
		if proc != nil {
			req.Policy = &session.PolicyRequest{Process: proc}
		}
		s, err := c.CreateSession(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.DeleteSession(context.Background(), s.ID) })
		return s
	}
	src := newSession(nil)
	for _, cmd := range []string{"echo built > /workspace/out", "cat /workspace/out", "exit 4", "uname -s", "grep -q built /workspace/out"} {
		if _, err := c.Exec(ctx, src.ID, session.ExecRequest{Command: cmd}); err != nil {
			t.Fatalf("source exec %q: %v", cmd, err)
		}
	}
	if err := c.Call(ctx, "PUT", src.ID, "/files/content", nil, apiv1.FileWrite{Path: "/workspace/note", ContentBase64: "aGk="}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, src.ID, session.ExecRequest{Command: "cat /workspace/note"}); err != nil {
		t.Fatal(err)
	}
	// An exec/stream: a job.start (marked streamed) now, its exec entry
	// at its exit, which the daemon writes once the stream has ended.
	if code, err := c.ExecStream(ctx, src.ID, session.ExecRequest{Command: "echo streamed"}, io.Discard, io.Discard); err != nil || code != 0 {
		t.Fatalf("exec/stream: %d %v", code, err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		es, _ := c.Events(ctx, src.ID)
		if es[len(es)-1].Kind == "exec" || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}

	dry, err := c.Replay(ctx, src.ID, apiv1.ReplayRequest{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(dry.Steps) != 7 || dry.Steps[2].Status != apiv1.ReplayPlanned || *dry.Steps[2].RecordedExitCode != 4 || dry.Steps[6].Command != "echo streamed" ||
		len(dry.Skipped) != 2 || dry.Skipped[0].Kind != "file.write" || dry.Skipped[1].Kind != "job.start" ||
		!strings.Contains(dry.Skipped[1].Reason, "streamed exec") || dry.Ran != 0 {
		t.Errorf("dry run: %s, skipped %+v", replayLine(dry), dry.Skipped)
	}

	// A target that denies uname: stop_on_failure false goes past exit 4
	// and stops at the refusal.
	tgt := newSession(&policy.ProcessRules{Deny: []string{"uname*"}})
	no := false
	r, err := c.Replay(ctx, src.ID, apiv1.ReplayRequest{Target: tgt.ID, StopOnFailure: &no})
	if err != nil {
		t.Fatal(err)
	}
	if got := replayLine(r); got != "echo built > /workspace/out:ok:0:same | cat /workspace/out:ok:0:same | exit 4:failed:4:same | uname -s:not_run:-:-" {
		t.Errorf("replay into the denying target: %s", got)
	}
	var body struct{ Error, Code, Rule, Pattern string }
	if r.Stopped == nil || json.Unmarshal(r.Stopped.Body, &body) != nil {
		t.Fatalf("stopped: %+v", r.Stopped)
	}
	if r.Stopped.Reason != apiv1.ReplayStopRefused || r.Stopped.Status != 403 || body.Rule != "process.deny" || body.Pattern != "uname*" ||
		body.Code == "" || r.NextSince != r.Steps[3].Seq || r.Steps[1].Stdout != "built\n" {
		t.Errorf("the refusal: %+v body %+v", r.Stopped, body)
	}
	// What the target's own exec answers for the same command is the body.
	_, err = c.Exec(ctx, tgt.ID, session.ExecRequest{Command: "uname -s"})
	var ce *client.Error
	var direct, carried map[string]any
	json.Unmarshal(r.Stopped.Body, &carried)
	if asClientError(err, &ce) {
		json.Unmarshal(ce.Body, &direct)
	}
	if ce == nil || ce.Status != 403 || len(direct) < 3 || !reflect.DeepEqual(direct, carried) {
		t.Errorf("the target's exec answer %v\n  the replay's body %s", err, r.Stopped.Body)
	}
	es, err := c.Events(ctx, tgt.ID)
	if err != nil {
		t.Fatal(err)
	}
	var ks []string
	for _, e := range es {
		ks = append(ks, e.Kind)
	}
	if got := strings.Join(ks, ","); got != "session.create,exec,exec,exec,exec.refused,replay,exec.refused" {
		t.Errorf("target ledger: %s", got)
	}

	// By default the failure stops it.
	t2 := newSession(nil)
	r, err = c.Replay(ctx, src.ID, apiv1.ReplayRequest{Target: t2.ID})
	if err != nil {
		t.Fatal(err)
	}
	if got := replayLine(r); got != "echo built > /workspace/out:ok:0:same | cat /workspace/out:ok:0:same | exit 4:failed:4:same" ||
		r.Stopped == nil || r.Stopped.Reason != apiv1.ReplayStopFailure || r.NextSince != r.Steps[2].Seq+1 {
		t.Errorf("stop at the failure: %s %+v", got, r.Stopped)
	}
	// The rest from next_since: the note was a file write, not replayed,
	// so cat differs.
	r, err = c.Replay(ctx, src.ID, apiv1.ReplayRequest{Target: t2.ID, Since: r.NextSince})
	if err != nil {
		t.Fatal(err)
	}
	if got := replayLine(r); got != "uname -s:ok:0:same | grep -q built /workspace/out:ok:0:same | cat /workspace/note:failed:1:differs" {
		t.Errorf("the rest: %s", got)
	}
}

func asClientError(err error, out **client.Error) bool {
	e, ok := err.(*client.Error)
	*out = e
	return ok
}

// TestReplayRouteAccess: through the API, another tenant's source or
// target is 404; a session token with read on the source may dry-run it
// but drives no target (403), and one without read is refused; bad bodies
// are 400.
func TestReplayRouteAccess(t *testing.T) {
	d := fakeDaemon(t)
	toks := withTenants(t, d, "acme", "beta")
	ctx := context.Background()
	acme, beta := client.New(d.url, toks["acme"]), client.New(d.url, toks["beta"])
	src, err := acme.CreateSession(ctx, session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	mine, err := acme.CreateSession(ctx, session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := beta.CreateSession(ctx, session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{src.ID, mine.ID, theirs.ID} {
		defer d.c.DeleteSession(ctx, id)
	}
	if _, err := acme.Exec(ctx, src.ID, session.ExecRequest{Command: "echo hi"}); err != nil {
		t.Fatal(err)
	}
	if _, err := beta.Replay(ctx, src.ID, apiv1.ReplayRequest{DryRun: true}); status(err) != 404 {
		t.Errorf("another tenant's source: %v, want 404", err)
	}
	if _, err := beta.Replay(ctx, theirs.ID, apiv1.ReplayRequest{Target: mine.ID}); status(err) != 404 {
		t.Errorf("another tenant's target: %v, want 404", err)
	}
	if r, err := acme.Replay(ctx, src.ID, apiv1.ReplayRequest{Target: mine.ID}); err != nil || replayLine(r) != "echo hi:ok:0:same" {
		t.Errorf("acme into its own: %v", err)
	}

	_, readTok := mint(t, d.url, toks["acme"], src.ID, map[string]any{"ops": []string{"read", "exec"}})
	_, execTok := mint(t, d.url, toks["acme"], src.ID, map[string]any{"ops": []string{"exec"}})
	rc := client.New(d.url, readTok.Token)
	if r, err := rc.Replay(ctx, src.ID, apiv1.ReplayRequest{DryRun: true}); err != nil || len(r.Steps) != 1 {
		t.Errorf("a read token's dry run: %+v %v", r, err)
	}
	if _, err := rc.Replay(ctx, src.ID, apiv1.ReplayRequest{Target: mine.ID}); status(err) != 403 {
		t.Errorf("a source's token driving another target: %v, want 403", err)
	}
	if _, err := rc.Replay(ctx, src.ID, apiv1.ReplayRequest{DryRun: true, Target: theirs.ID}); status(err) != 403 {
		t.Errorf("a source's token naming another tenant's target: %v, want 403", err)
	}
	if _, err := client.New(d.url, execTok.Token).Replay(ctx, src.ID, apiv1.ReplayRequest{DryRun: true}); status(err) != 403 {
		t.Errorf("a token without read: %v, want 403", err)
	}
	es, _ := d.c.Events(ctx, mine.ID)
	if n := len(es); n != 3 { // create, exec, replay from acme's own run
		t.Errorf("the target's ledger after the refused calls: %d entries", n)
	}
	for _, body := range []string{`{}`, `{"target":"` + src.ID + `"}`, `{"dry_run":true,"since":-1}`, `{"dry_run":true,"timeout_seconds":3601}`, `{"dry_run":true,"extra":1}`, `[`} {
		a := as(t, d.url, toks["acme"], "POST", "/v1/agents/sessions/"+src.ID+"/replay", json.RawMessage(body))
		if a.status != 400 {
			t.Errorf("%s: %d %s, want 400", body, a.status, a.body)
		}
	}
}

// TestAttackReplayDoesNoMoreThanExec: a replay cannot do what the
// caller's exec on the target could not. The target's budget stops it
// (403 with the budget's body); the target's own session token, which
// has exec there, cannot pull another session's commands into it (the
// route needs read on the source); and a caller with an approval for
// one command cannot spend it on another step.
func TestAttackReplayDoesNoMoreThanExec(t *testing.T) {
	d := fakeDaemon(t)
	ctx := context.Background()
	src, err := d.c.CreateSession(ctx, session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	defer d.c.DeleteSession(ctx, src.ID)
	for _, cmd := range []string{"echo one", "echo two", "echo three"} {
		if _, err := d.c.Exec(ctx, src.ID, session.ExecRequest{Command: cmd}); err != nil {
			t.Fatal(err)
		}
	}
	tgt := budgetSession(t, d, `{"max_execs":1}`)
	r, err := d.c.Replay(ctx, src.ID, apiv1.ReplayRequest{Target: tgt.ID})
	if err != nil {
		t.Fatal(err)
	}
	var b budgetBody
	if r.Ran != 1 || r.Stopped == nil || r.Stopped.Reason != apiv1.ReplayStopRefused || r.Stopped.Status != 403 ||
		json.Unmarshal(r.Stopped.Body, &b) != nil || b.Budget != "max_execs" || b.Limit != 1 {
		t.Errorf("past the target's budget: %s %+v", replayLine(r), r.Stopped)
	}

	_, tgtTok := mint(t, d.url, token, tgt.ID, map[string]any{"ops": []string{"read", "exec"}})
	if _, err := client.New(d.url, tgtTok.Token).Replay(ctx, src.ID, apiv1.ReplayRequest{Target: tgt.ID}); status(err) != 403 {
		t.Errorf("the target's token pulling another session's commands: %v, want 403", err)
	}

	// An approval granted for "echo deploy" on a held target cannot run
	// "echo one" in its place.
	held, err := d.c.CreateSession(ctx, session.CreateRequest{TTLSeconds: 600, Policy: &session.PolicyRequest{Process: &policy.ProcessRules{Ask: []string{"echo*"}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.c.DeleteSession(ctx, held.ID)
	_, err = d.c.Exec(ctx, held.ID, session.ExecRequest{Command: "echo deploy"})
	h := client.HoldOf(err)
	if h == nil {
		t.Fatalf("exec of an ask command: %v", err)
	}
	if _, err := d.c.Approve(ctx, held.ID, h.ApprovalID, ""); err != nil {
		t.Fatal(err)
	}
	r, err = d.c.Replay(ctx, src.ID, apiv1.ReplayRequest{Target: held.ID, ApprovalID: h.ApprovalID})
	if err != nil || r.Ran != 0 || r.Stopped == nil || r.Stopped.Status != 403 {
		t.Errorf("another command's approval: %+v %v", r, err)
	}
	if _, err := d.c.Exec(ctx, held.ID, session.ExecRequest{Command: "echo deploy", ApprovalID: h.ApprovalID}); err != nil {
		t.Errorf("the approval, given back unspent, still runs its own command: %v", err)
	}
}

// TestReplayLiveQEMU is the refusal case of TestReplayLive on qemu (TCG
// where there is no KVM): the replay is the same code over any backend's
// exec, so one run shows the walk through a VM's guest.
func TestReplayLiveQEMU(t *testing.T) {
	testutil.RequiresRoot(t)
	images, _ := testutil.DebianImages(t)
	dd := daemontest.New(t, daemontest.WithToken(token), daemontest.WithBackend("qemu"), daemontest.WithImage(testutil.DebianImageName, images))
	c, ctx := dd.Client, context.Background()
	newSession := func(proc *policy.ProcessRules) *session.Session {
		req := session.CreateRequest{TTLSeconds: 600}
		if proc != nil {
			req.Policy = &session.PolicyRequest{Process: proc}
		}
		s, err := c.CreateSession(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.DeleteSession(context.Background(), s.ID) })
		return s
	}
	src := newSession(nil)
	for _, cmd := range []string{"echo one > /workspace/f", "exit 3", "uname -s"} {
		if _, err := c.Exec(ctx, src.ID, session.ExecRequest{Command: cmd}); err != nil {
			t.Fatalf("source exec %q: %v", cmd, err)
		}
	}
	tgt := newSession(&policy.ProcessRules{Deny: []string{"uname*"}})
	no := false
	r, err := c.Replay(ctx, src.ID, apiv1.ReplayRequest{Target: tgt.ID, StopOnFailure: &no})
	if err != nil {
		t.Fatal(err)
	}
	var body struct{ Rule, Pattern string }
	if got := replayLine(r); got != "echo one > /workspace/f:ok:0:same | exit 3:failed:3:same | uname -s:not_run:-:-" ||
		r.Stopped == nil || r.Stopped.Status != 403 || json.Unmarshal(r.Stopped.Body, &body) != nil || body.Rule != "process.deny" {
		t.Errorf("replay on qemu: %s %+v", got, r.Stopped)
	}
	if out, err := c.Exec(ctx, tgt.ID, session.ExecRequest{Command: "cat /workspace/f"}); err != nil || out.Stdout != "one\n" {
		t.Errorf("the replayed write in the target VM: %+v %v", out, err)
	}
}
