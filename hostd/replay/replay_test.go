package replay_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/hostd/approvals"
	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/ledger"
	"paddock.dev/paddock/hostd/replay"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/session/sessiontest"
	"paddock.dev/paddock/policy"
)

// setup is a manager on the fake backend with the approvals service (as
// hostd/daemon wires it), the replay service, and tenant acme's caller.
func setup(t *testing.T) (*session.Manager, *replay.Service, *approvals.Service, context.Context) {
	t.Helper()
	m := sessiontest.New(t)
	a := approvals.New(m)
	m.SetApprovals(a)
	return m, replay.New(m), a, auth.WithIdentity(context.Background(), auth.Identity{Kind: auth.KindTenant, Tenant: "acme"})
}

func create(t *testing.T, m *session.Manager, ctx context.Context, tenant string, proc *policy.ProcessRules) *session.Session {
	t.Helper()
	req := session.CreateRequest{TTLSeconds: 600}
	if proc != nil {
		req.Policy = &session.PolicyRequest{Process: proc}
	}
	s, err := m.Create(ctx, tenant, req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Delete(context.Background(), "", s.ID) })
	return s
}

// run execs each command in s and returns the ledger seq of each exec.
func run(t *testing.T, m *session.Manager, ctx context.Context, s *session.Session, cmds ...string) []int64 {
	t.Helper()
	var seqs []int64
	for _, c := range cmds {
		if _, err := m.Exec(ctx, "acme", s.ID, session.ExecRequest{Command: c}); err != nil {
			t.Fatalf("exec %q: %v", c, err)
		}
		es := entries(t, m, s.ID)
		seqs = append(seqs, es[len(es)-1].Seq)
	}
	return seqs
}

func entries(t *testing.T, m *session.Manager, id string) []ledger.Entry {
	t.Helper()
	es, err := sessiontest.Ledger(m).List(context.Background(), id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func kinds(es []ledger.Entry) string {
	var ks []string
	for _, e := range es {
		ks = append(ks, e.Kind)
	}
	return strings.Join(ks, ",")
}

// steps is each step as "seq:status:exit:same" for a compact comparison.
func steps(r *replay.Result) string {
	var out []string
	for _, s := range r.Steps {
		exit, same := "-", "-"
		if s.ExitCode != nil {
			exit = itoa(*s.ExitCode)
		}
		if s.SameExitCode != nil {
			same = map[bool]string{true: "same", false: "differs"}[*s.SameExitCode]
		}
		out = append(out, s.Command+":"+s.Status+":"+exit+":"+same)
	}
	return strings.Join(out, " | ")
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestReplaySteps: a dry run lists the exec commands with their recorded
// exit codes and the entries replay cannot redo, and runs nothing; a
// replay runs them in the target, reports each exit code beside the
// recorded one, stops at the first failure by default, goes on with
// stop_on_failure false, and always stops at the target's refusal, whose
// answer it carries. The target's ledger has each command as exec
// records it, the refusal, and one replay entry without any output.
func TestReplaySteps(t *testing.T) {
	m, rp, _, acme := setup(t)
	src := create(t, m, acme, "acme", nil)
	seqs := run(t, m, acme, src, "echo one", "exit 3", "echo two")
	m.LedgerAppend(acme, src.ID, "file.write", map[string]any{"path": "/workspace/a", "size": 3})
	m.LedgerAppend(acme, src.ID, "git.commit", map[string]any{"message": "m"})
	m.LedgerAppend(acme, src.ID, "job.start", map[string]any{"job": "job-1", "command": "sleep 1"})
	m.LedgerAppend(acme, src.ID, "job.start", map[string]any{"job": "job-2", "command": "echo s", "streamed": true})
	m.LedgerAppend(acme, src.ID, "checkpoint", map[string]any{"tag": "t"}) // nothing to redo: not listed
	m.LedgerAppend(acme, src.ID, "grant.create", map[string]any{"grant": "gr-1", "ref": "GH_SECRET_REF", "hosts": []string{"api.example"}})
	seqs = append(seqs, run(t, m, acme, src, "rm -f gone", "echo three")...)

	dry, err := rp.Replay(acme, "acme", src.ID, replay.Request{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	d := dry.Result
	if got := steps(d); got != "echo one:planned:-:- | exit 3:planned:-:- | echo two:planned:-:- | rm -f gone:planned:-:- | echo three:planned:-:-" {
		t.Errorf("dry run steps: %s", got)
	}
	if d.Steps[1].RecordedExitCode == nil || *d.Steps[1].RecordedExitCode != 3 || d.Steps[0].Seq != seqs[0] || d.Ran != 0 || d.Stopped != nil {
		t.Errorf("dry run: %+v", d)
	}
	var sk []string
	for _, s := range d.Skipped {
		sk = append(sk, s.Kind)
		if s.Reason == "" {
			t.Errorf("skipped %+v has no reason", s)
		}
	}
	if strings.Join(sk, ",") != "file.write,git.commit,job.start,job.start" || !strings.Contains(d.Skipped[3].Reason, "streamed") {
		t.Errorf("skipped: %+v", d.Skipped)
	}
	if !strings.Contains(kinds(entries(t, m, src.ID)), "grant.create") {
		t.Fatal("the grant entry was not ledgered")
	}
	// Nothing of the entries that are not commands reaches the answer
	// but their seq, kind and the reason.
	if b, _ := json.Marshal(d); strings.Contains(string(b), "GH_SECRET_REF") || strings.Contains(string(b), "api.example") || strings.Contains(string(b), "/workspace/a") {
		t.Errorf("the dry run carries data of entries it does not replay: %s", b)
	}

	// Into a target whose policy denies rm: stop_on_failure false goes
	// past exit 3, and the refusal stops it anyway.
	tgt := create(t, m, acme, "acme", &policy.ProcessRules{Deny: []string{"rm *"}})
	before := len(entries(t, m, tgt.ID))
	no := false
	out, err := rp.Replay(acme, "acme", src.ID, replay.Request{Target: tgt.ID, StopOnFailure: &no})
	if err != nil {
		t.Fatal(err)
	}
	r := out.Result
	if got := steps(r); got != "echo one:ok:0:same | exit 3:failed:3:same | echo two:ok:0:same | rm -f gone:not_run:-:-" {
		t.Errorf("replay steps: %s", got)
	}
	var refused *session.ProcessRefused
	if r.Stopped == nil || r.Stopped.Reason != apiv1.ReplayStopRefused || r.Stopped.Seq != seqs[3] || r.Stopped.Status != 403 ||
		r.NextSince != seqs[3] || r.Ran != 3 || r.Failed != 1 || !errors.As(out.StopErr, &refused) || refused.Decision.Rule != "process.deny" {
		t.Errorf("stop at the refusal: %+v %+v %v", r, r.Stopped, out.StopErr)
	}
	if r.Steps[0].Stdout != "one\n" {
		t.Errorf("a step's output: %q", r.Steps[0].Stdout)
	}
	tes := entries(t, m, tgt.ID)[before:]
	if got := kinds(tes); got != "exec,exec,exec,exec.refused,replay" {
		t.Errorf("target ledger: %s", got)
	}
	var rec map[string]any
	json.Unmarshal(tes[len(tes)-1].Data, &rec)
	if rec["source"] != src.ID || rec["ran"] != float64(3) || rec["planned"] != float64(5) || rec["next_since"] != float64(seqs[3]) ||
		rec["stopped"].(map[string]any)["reason"] != "refused" {
		t.Errorf("replay entry: %v", rec)
	}
	raw := string(tes[len(tes)-1].Data)
	if strings.Contains(raw, "one") || strings.Contains(raw, "echo") {
		t.Errorf("the replay entry holds commands or output: %s", raw)
	}
	if tes[0].Actor != "tenant:acme" || tes[len(tes)-1].Actor != "tenant:acme" {
		t.Errorf("actors: %s %s", tes[0].Actor, tes[len(tes)-1].Actor)
	}

	// By default the first failure stops it; next_since is the step
	// after it.
	t2 := create(t, m, acme, "acme", nil)
	out, err = rp.Replay(acme, "acme", src.ID, replay.Request{Target: t2.ID})
	if err != nil {
		t.Fatal(err)
	}
	if got := steps(out.Result); got != "echo one:ok:0:same | exit 3:failed:3:same" || out.Result.Stopped.Reason != apiv1.ReplayStopFailure ||
		out.Result.NextSince != seqs[1]+1 || out.StopErr != nil {
		t.Errorf("stop at the failure: %s %+v", got, out.Result.Stopped)
	}
	// Going on from there, up to until: the rest runs (rm is allowed here).
	out, err = rp.Replay(acme, "acme", src.ID, replay.Request{Target: t2.ID, Since: out.Result.NextSince, Until: seqs[3]})
	if err != nil {
		t.Fatal(err)
	}
	if got := steps(out.Result); got != "echo two:ok:0:same | rm -f gone:ok:0:same" || out.Result.Stopped != nil || out.Result.NextSince != 0 {
		t.Errorf("since/until: %s %+v", got, out.Result.Stopped)
	}
}

// TestReplaySameExitCode: a command whose outcome depends on what came
// before exits differently when the range leaves that out, and the step
// says so; an interrupted exec (no recorded exit code) replays with no
// comparison.
func TestReplaySameExitCode(t *testing.T) {
	m, rp, _, acme := setup(t)
	src := create(t, m, acme, "acme", nil)
	seqs := run(t, m, acme, src, "touch here", "test -e here")
	m.LedgerAppend(acme, src.ID, "exec", map[string]any{"command": "echo cut", "interrupted": true, "error": "gone"})
	tgt := create(t, m, acme, "acme", nil)
	no := false
	out, err := rp.Replay(acme, "acme", src.ID, replay.Request{Target: tgt.ID, Since: seqs[1], StopOnFailure: &no})
	if err != nil {
		t.Fatal(err)
	}
	if got := steps(out.Result); got != "test -e here:failed:1:differs | echo cut:ok:0:-" {
		t.Errorf("steps: %s", got)
	}
}

// TestReplayApproval: a step the target holds for an operator stops the
// replay with the approval (428); once approved, the replay goes on from
// next_since with approval_id, and the step runs once.
func TestReplayApproval(t *testing.T) {
	m, rp, a, acme := setup(t)
	src := create(t, m, acme, "acme", nil)
	seqs := run(t, m, acme, src, "echo before", "echo deploy", "echo after")
	tgt := create(t, m, acme, "acme", &policy.ProcessRules{Ask: []string{"echo deploy*"}})
	out, err := rp.Replay(acme, "acme", src.ID, replay.Request{Target: tgt.ID})
	if err != nil {
		t.Fatal(err)
	}
	st := out.Result.Stopped
	if st == nil || st.Reason != apiv1.ReplayStopApproval || st.Status != 428 || !strings.HasPrefix(st.ApprovalID, "apr-") ||
		out.Result.NextSince != seqs[1] || out.Result.Ran != 1 {
		t.Fatalf("held: %+v %+v", out.Result, st)
	}
	if _, err := a.Decide(auth.WithIdentity(context.Background(), auth.Admin()), "", tgt.ID, st.ApprovalID, true, approvals.Decision{}); err != nil {
		t.Fatal(err)
	}
	out, err = rp.Replay(acme, "acme", src.ID, replay.Request{Target: tgt.ID, Since: out.Result.NextSince, ApprovalID: st.ApprovalID})
	if err != nil {
		t.Fatal(err)
	}
	// Only the first step spends it: the next one, which needs none, runs
	// without.
	if got := steps(out.Result); got != "echo deploy:ok:0:same | echo after:ok:0:same" || out.Result.Stopped != nil {
		t.Errorf("after approval: %s %+v", got, out.Result.Stopped)
	}
	// The approval was spent: the same again is refused.
	out, _ = rp.Replay(acme, "acme", src.ID, replay.Request{Target: tgt.ID, Since: seqs[1], Until: seqs[1], ApprovalID: st.ApprovalID})
	if out == nil || out.Result.Stopped == nil || out.Result.Stopped.Status != 403 || out.Result.Ran != 0 {
		t.Errorf("a spent approval: %+v", out)
	}
	// An approval filed by a plain exec of the command serves the replay
	// as well: the replay runs it with the same parameters.
	_, err = m.Exec(acme, "acme", tgt.ID, session.ExecRequest{Command: "echo deploy"})
	var h *session.Hold
	if !errors.As(err, &h) {
		t.Fatalf("a plain exec of the held command: %v", err)
	}
	if _, err := a.Decide(auth.WithIdentity(context.Background(), auth.Admin()), "", tgt.ID, h.ApprovalID, true, approvals.Decision{}); err != nil {
		t.Fatal(err)
	}
	out, err = rp.Replay(acme, "acme", src.ID, replay.Request{Target: tgt.ID, Since: seqs[1], Until: seqs[1], ApprovalID: h.ApprovalID})
	if err != nil || steps(out.Result) != "echo deploy:ok:0:same" {
		t.Errorf("an exec's approval spent by the replay: %+v %v", out.Result.Stopped, err)
	}
}

// TestReplayAccess: another tenant's source or target is 404; a session
// token (even with read and exec on the source) cannot drive another
// session; a call with no verified caller drives none.
func TestReplayAccess(t *testing.T) {
	m, rp, _, acme := setup(t)
	beta := auth.WithIdentity(context.Background(), auth.Identity{Kind: auth.KindTenant, Tenant: "beta"})
	src := create(t, m, acme, "acme", nil)
	run(t, m, acme, src, "echo one")
	mine := create(t, m, acme, "acme", nil)
	theirs := create(t, m, beta, "beta", nil)
	if _, err := rp.Replay(beta, "beta", src.ID, replay.Request{DryRun: true}); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("another tenant's source: %v, want 404", err)
	}
	if _, err := rp.Replay(acme, "acme", src.ID, replay.Request{Target: theirs.ID}); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("another tenant's target: %v, want 404", err)
	}
	tok := auth.WithIdentity(context.Background(), auth.Identity{Kind: auth.KindSession, Tenant: "acme", Session: src.ID, TokenID: "tok-1", Ops: []string{"read", "exec"}})
	if _, err := rp.Replay(tok, "acme", src.ID, replay.Request{Target: mine.ID}); !errors.Is(err, session.ErrForbidden) {
		t.Errorf("a session token of the source driving another target: %v, want 403", err)
	}
	if out, err := rp.Replay(tok, "acme", src.ID, replay.Request{DryRun: true}); err != nil || len(out.Result.Steps) != 1 {
		t.Errorf("a session token's dry run of its own session: %v", err)
	}
	if _, err := rp.Replay(context.Background(), "", src.ID, replay.Request{Target: mine.ID}); !errors.Is(err, session.ErrForbidden) {
		t.Errorf("no caller: %v, want 403", err)
	}
	if n := len(entries(t, m, mine.ID)); n != 1 {
		t.Errorf("the refused replays reached the target: %d entries", n)
	}
	// A target that is not running is 409 before anything is ledgered;
	// a dry run may still name it.
	gone := create(t, m, acme, "acme", nil)
	if err := m.Delete(acme, "acme", gone.ID); err != nil {
		t.Fatal(err)
	}
	n := len(entries(t, m, gone.ID))
	if _, err := rp.Replay(acme, "acme", src.ID, replay.Request{Target: gone.ID}); !errors.Is(err, session.ErrConflict) {
		t.Errorf("a deleted target: %v, want 409", err)
	}
	if _, err := rp.Replay(acme, "acme", src.ID, replay.Request{Target: gone.ID, DryRun: true}); err != nil {
		t.Errorf("a dry run naming a deleted target: %v", err)
	}
	if len(entries(t, m, gone.ID)) != n {
		t.Error("the deleted target's ledger grew")
	}
}

// TestReplayLimits: every field is checked (400); a range with more than
// 500 commands runs (or lists) 500 and says where to go on; more than 500
// skipped entries are listed up to 500 and counted.
func TestReplayLimits(t *testing.T) {
	m, rp, _, acme := setup(t)
	src := create(t, m, acme, "acme", nil)
	for _, tc := range []struct {
		req  replay.Request
		want string
	}{
		{replay.Request{}, "target is required"},
		{replay.Request{Target: src.ID}, "another session"},
		{replay.Request{DryRun: true, Since: -1}, "negative"},
		{replay.Request{DryRun: true, Since: 5, Until: 4}, "before since"},
		{replay.Request{DryRun: true, TimeoutSeconds: 3601}, "timeout_seconds"},
		{replay.Request{DryRun: true, TimeoutSeconds: -1}, "timeout_seconds"},
		{replay.Request{DryRun: true, ApprovalID: "apr-0123456789abcdef"}, "dry run"},
		{replay.Request{Target: strings.Repeat("s", 129)}, "not a session id"},
	} {
		if _, err := rp.Replay(acme, "acme", src.ID, tc.req); !errors.Is(err, session.ErrBadRequest) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want 400 saying %q", tc.req, err, tc.want)
		}
	}
	for i := range replay.MaxCommands + 1 {
		m.LedgerAppend(acme, src.ID, "exec", map[string]any{"command": "echo " + itoa(i), "exit_code": 0})
		m.LedgerAppend(acme, src.ID, "file.write", map[string]any{"path": "/workspace/f", "size": i})
	}
	out, err := rp.Replay(acme, "acme", src.ID, replay.Request{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	r := out.Result
	last := r.Steps[len(r.Steps)-1]
	if len(r.Steps) != replay.MaxCommands || r.Stopped == nil || r.Stopped.Reason != apiv1.ReplayStopLimit || r.NextSince != last.Seq+2 ||
		len(r.Skipped) != replay.MaxSkipped || r.SkippedOmitted != 0 {
		t.Fatalf("at the limit: %d steps, %d skipped (+%d), %+v, next %d (last %d)", len(r.Steps), len(r.Skipped), r.SkippedOmitted, r.Stopped, r.NextSince, last.Seq)
	}
	out, err = rp.Replay(acme, "acme", src.ID, replay.Request{DryRun: true, Since: r.NextSince})
	if err != nil || len(out.Result.Steps) != 1 || out.Result.Steps[0].Command != "echo 500" || out.Result.Stopped != nil {
		t.Errorf("going on: %+v %v", out.Result, err)
	}
	// Skipped past its limit: counted, not listed.
	for range 10 {
		m.LedgerAppend(acme, src.ID, "file.write", map[string]any{"path": "/workspace/f", "size": 1})
	}
	out, err = rp.Replay(acme, "acme", src.ID, replay.Request{DryRun: true, Since: r.Steps[10].Seq})
	if err != nil || len(out.Result.Skipped) != replay.MaxSkipped || out.Result.SkippedOmitted == 0 {
		t.Errorf("skipped past the limit: %d listed, %d omitted, %v", len(out.Result.Skipped), out.Result.SkippedOmitted, err)
	}
}

// TestReplayDeadline: no step starts once the replay has run for
// MaxDuration; it stops at a limit with where to go on.
func TestReplayDeadline(t *testing.T) {
	var clock sessiontest.Clock
	m := sessiontest.New(t, sessiontest.Now(clock.Now))
	rp := replay.New(m)
	acme := auth.WithIdentity(context.Background(), auth.Identity{Kind: auth.KindTenant, Tenant: "acme"})
	src := create(t, m, acme, "acme", nil)
	seqs := run(t, m, acme, src, "echo one", "echo two", "echo three")
	tgt := create(t, m, acme, "acme", nil)
	// The first step takes (as the clock says) longer than a replay may.
	m.AddCommandHook("slow", func(ctx context.Context, c *session.Command) error {
		if c.Session == tgt.ID && c.Text == "echo one" {
			clock.Set(replay.MaxDuration + time.Second)
		}
		return nil
	})
	out, err := rp.Replay(acme, "acme", src.ID, replay.Request{Target: tgt.ID})
	if err != nil {
		t.Fatal(err)
	}
	r := out.Result
	if got := steps(r); got != "echo one:ok:0:same" || r.Stopped == nil || r.Stopped.Reason != apiv1.ReplayStopLimit || r.NextSince != seqs[1] {
		t.Errorf("past the deadline: %s %+v next %d", got, r.Stopped, r.NextSince)
	}
}
