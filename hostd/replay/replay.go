// Package replay runs the exec commands a session's ledger recorded, in
// order, in another session (POST /v1/agents/sessions/{id}/replay). It is
// a sibling of the session core (hostd/session): it reads the source's
// ledger through the core's tenant-scoped read, and runs every command
// through the target's own exec (Manager.Exec, the walk the exec route
// takes), so the target's process policy, approvals, budget, confinement
// and ledger apply to each one as if its caller had sent it. A replay can
// do nothing the caller could not do with exec on the target.
//
// What the ledger records of a file write, upload, delete, job, git verb
// or promotion is what was done, not the content, so those cannot be
// redone: the answer lists them under skipped with the reason.
package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/errdefs"
	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/session"
)

// The public wire types (package api), kept under these names here.
type (
	Request = apiv1.ReplayRequest
	Result  = apiv1.ReplayResult
	Step    = apiv1.ReplayStep
	Skipped = apiv1.ReplaySkipped
	Stop    = apiv1.ReplayStop
)

// Limits (api/replay.go says what each bounds).
const (
	MaxCommands    = apiv1.MaxReplayCommands
	MaxSkipped     = apiv1.MaxReplaySkipped
	MaxScan        = apiv1.MaxReplayScan
	MaxDuration    = apiv1.MaxReplaySeconds * time.Second
	MaxOutputBytes = apiv1.MaxReplayOutputBytes
)

// pageSize is how many ledger entries one read of the source takes.
const pageSize = 1000

// Service replays sessions' commands on one session manager.
type Service struct {
	m *session.Manager
}

// New returns the replay service of m. It does no I/O.
func New(m *session.Manager) *Service { return &Service{m: m} }

// Outcome is a replay's answer and, when a step stopped it without
// running, the error the target's exec returned: the API renders it as
// the exec route would have (Result.Stopped.Body).
type Outcome struct {
	Result  *Result
	StopErr error
}

// check validates a request on its own (400 before anything is read).
func check(src string, req *Request) error {
	if req.Target == "" && !req.DryRun {
		return session.BadRequest("target is required unless dry_run is true")
	}
	if req.Target != "" && req.Target == src {
		return session.BadRequest("target must be another session than the one replayed")
	}
	if len(req.Target) > 128 {
		return session.BadRequest("target is not a session id")
	}
	if req.Since < 0 || req.Until < 0 {
		return session.BadRequest("since and until must not be negative")
	}
	if req.Until != 0 && req.Until < req.Since {
		return session.BadRequest("until %d is before since %d", req.Until, req.Since)
	}
	// 0 stays 0: exec then takes its default, and the command is judged
	// (and an approval matched) exactly as a plain exec without a timeout.
	if req.TimeoutSeconds < 0 || req.TimeoutSeconds > apiv1.MaxExecTimeout {
		return session.BadRequest("timeout_seconds %d must be from 1 to %d (0 or absent: exec's default, %d)", req.TimeoutSeconds, apiv1.MaxExecTimeout, apiv1.DefaultExecTimeout)
	}
	if req.ApprovalID != "" && req.DryRun {
		return session.BadRequest("approval_id spends an approval, and a dry run runs nothing")
	}
	return nil
}

// Replay replays session src's exec commands as the caller in ctx, who
// sees sessions as tenant does ("": the admin). The caller needs read on
// src (the route checks it) and exec on the target (checked here: a
// session token works on its own session only, and the target is never
// the source).
func (s *Service) Replay(ctx context.Context, tenant, src string, req Request) (*Outcome, error) {
	if err := check(src, &req); err != nil {
		return nil, err
	}
	if _, err := s.m.LoadSession(ctx, tenant, src); err != nil {
		return nil, err
	}
	if req.Target != "" {
		id, ok := auth.FromContext(ctx)
		if !ok {
			return nil, fmt.Errorf("%w: this call carries no verified caller", session.ErrForbidden)
		}
		if err := id.Permit(auth.OpExec, req.Target); err != nil {
			return nil, fmt.Errorf("%w: replaying into %s needs exec on it: %v", session.ErrForbidden, req.Target, err)
		}
		if _, err := s.m.LoadSession(ctx, tenant, req.Target); err != nil {
			return nil, err
		}
		if !req.DryRun {
			// A target that is not running refuses here (409), before
			// anything is read or ledgered.
			if _, _, err := s.m.Running(ctx, tenant, req.Target); err != nil {
				return nil, err
			}
		}
	}
	plan, err := s.plan(ctx, tenant, src, req)
	if err != nil {
		return nil, err
	}
	res := &Result{Source: src, Target: req.Target, DryRun: req.DryRun, Since: req.Since, Until: req.Until,
		Skipped: plan.skipped, SkippedOmitted: plan.skippedOmitted}
	if req.DryRun {
		for _, c := range plan.cmds {
			res.Steps = append(res.Steps, Step{Seq: c.seq, Command: c.command, RecordedExitCode: c.exit, Status: apiv1.ReplayPlanned})
		}
		plan.stopAtLimit(res)
		return &Outcome{Result: res}, nil
	}
	out := s.run(ctx, tenant, req, plan, res)
	s.m.LedgerAppend(context.WithoutCancel(ctx), req.Target, "replay", ledgerEntry(res, len(plan.cmds)))
	return out, nil
}

// command is one exec entry of the source.
type command struct {
	seq     int64
	command string
	exit    *int // nil when the source recorded none
}

// plan is what a replay's range holds.
type plan struct {
	cmds           []command
	skipped        []Skipped
	skippedOmitted int
	// more is the seq of the first command past MaxCommands (0: none),
	// or of the first entry not read past MaxScan.
	more int64
}

// stopAtLimit marks res stopped at a limit when the range holds more
// than one replay takes.
func (p *plan) stopAtLimit(res *Result) {
	if p.more != 0 {
		res.Stopped = &Stop{Reason: apiv1.ReplayStopLimit, Error: fmt.Sprintf(
			"one replay takes at most %d commands and reads at most %d ledger entries; go on with since %d", MaxCommands, MaxScan, p.more)}
		res.NextSince = p.more
	}
}

// plan reads the source's ledger from since to until (by seq): its exec
// entries are the commands, and the entries replay cannot redo are
// skipped with the reason.
func (s *Service) plan(ctx context.Context, tenant, src string, req Request) (*plan, error) {
	p := &plan{}
	after := max(req.Since-1, 0)
	read := 0
	for {
		es, err := s.m.EventsAfter(ctx, tenant, src, after)
		if err != nil {
			return nil, err
		}
		if len(es) == 0 {
			return p, nil
		}
		for _, e := range es {
			if req.Until != 0 && e.Seq > req.Until {
				return p, nil
			}
			if read == MaxScan {
				p.more = e.Seq
				return p, nil
			}
			read++
			after = e.Seq
			if e.Kind == "exec" {
				if len(p.cmds) == MaxCommands {
					p.more = e.Seq
					return p, nil
				}
				c, ok := execOf(e.Data)
				if !ok {
					p.skip(Skipped{Seq: e.Seq, Kind: e.Kind, Reason: "the entry holds no command"})
					continue
				}
				c.seq = e.Seq
				p.cmds = append(p.cmds, c)
				continue
			}
			if why := skipReason(e.Kind, e.Data); why != "" {
				p.skip(Skipped{Seq: e.Seq, Kind: e.Kind, Reason: why})
			}
		}
		if len(es) < pageSize {
			return p, nil
		}
	}
}

func (p *plan) skip(sk Skipped) {
	if len(p.skipped) == MaxSkipped {
		p.skippedOmitted++
		return
	}
	p.skipped = append(p.skipped, sk)
}

// execOf reads an exec entry: the command, and the exit code unless the
// call was cut off (interrupted) before one came back.
func execOf(data json.RawMessage) (command, bool) {
	var d struct {
		Command     string `json:"command"`
		ExitCode    *int   `json:"exit_code"`
		Interrupted bool   `json:"interrupted"`
	}
	if json.Unmarshal(data, &d) != nil || strings.TrimSpace(d.Command) == "" {
		return command{}, false
	}
	if d.Interrupted {
		d.ExitCode = nil
	}
	return command{command: d.Command, exit: d.ExitCode}, true
}

// skipReason says why an entry of kind is an action replay cannot redo,
// or "" for an entry that did nothing to redo (a checkpoint, a refusal,
// a token minted, ...).
func skipReason(kind string, data json.RawMessage) string {
	switch {
	case kind == "file.write":
		return "a file write: the ledger records its path and size, not its content"
	case kind == "file.upload":
		return "an upload: the ledger records its path and size, not its content"
	case kind == "file.delete":
		return "a file delete through the files route is not a command; run it again by hand if the target needs it"
	case kind == "job.start":
		var d struct {
			Streamed bool `json:"streamed"`
		}
		if json.Unmarshal(data, &d) == nil && d.Streamed {
			return "the start of a streamed exec: its exec entry, written when it exited, is the step that replays it"
		}
		return "a background job: its input and when it ended are not a command replay can run in order"
	case kind == "job.stdin", kind == "job.kill":
		return "input to or a signal for a background job, which replay does not start"
	case strings.HasPrefix(kind, "git."):
		return "a git step: the ledger records the verb, not the tree it worked on"
	case strings.HasPrefix(kind, "promote"):
		return "a promotion: it moved a fork child's files, which the ledger does not hold"
	case kind == "restore", kind == "rewind.undo":
		return "a restore of the source's own checkpoint, which the target does not have"
	}
	return ""
}

// run runs the plan's commands in the target, in order, through the
// target's exec, until one stops it.
func (s *Service) run(ctx context.Context, tenant string, req Request, p *plan, res *Result) *Outcome {
	keepGoing := req.StopOnFailure != nil && !*req.StopOnFailure
	deadline := s.m.Now().Add(MaxDuration)
	approval := req.ApprovalID
	for i, c := range p.cmds {
		if !s.m.Now().Before(deadline) {
			res.Stopped = &Stop{Reason: apiv1.ReplayStopLimit, Error: fmt.Sprintf("a replay runs for at most %s; go on with since %d", MaxDuration, c.seq)}
			res.NextSince = c.seq
			return &Outcome{Result: res}
		}
		st := Step{Seq: c.seq, Command: c.command, RecordedExitCode: c.exit}
		out, err := s.m.Exec(ctx, tenant, req.Target, session.ExecRequest{Command: c.command, TimeoutSeconds: req.TimeoutSeconds, ApprovalID: approval})
		approval = "" // the first step spends it, or says why it cannot
		if err != nil {
			st.Status = apiv1.ReplayNotRun
			stop := stopFor(c.seq, err)
			if stop.Status >= 500 {
				st.Status = apiv1.ReplayUnsure
			}
			res.Steps = append(res.Steps, st)
			res.Stopped, res.NextSince = stop, c.seq
			return &Outcome{Result: res, StopErr: err}
		}
		res.Ran++
		code := out.ExitCode
		st.ExitCode, st.TimedOut, st.DurationMS, st.Truncated = &code, out.TimedOut, out.DurationMS, out.Truncated
		st.Stdout, st.Stderr = session.ClipText(out.Stdout, MaxOutputBytes), session.ClipText(out.Stderr, MaxOutputBytes)
		st.Truncated = st.Truncated || len(out.Stdout) > MaxOutputBytes || len(out.Stderr) > MaxOutputBytes
		if c.exit != nil {
			same := *c.exit == code
			st.SameExitCode = &same
		}
		st.Status = apiv1.ReplayOK
		if code != 0 || out.TimedOut {
			st.Status = apiv1.ReplayFailed
			res.Failed++
		}
		res.Steps = append(res.Steps, st)
		if st.Status == apiv1.ReplayFailed && !keepGoing {
			res.Stopped = &Stop{Reason: apiv1.ReplayStopFailure, Seq: c.seq, Error: fmt.Sprintf("step %d exited %d", c.seq, code)}
			if i+1 < len(p.cmds) || p.more != 0 {
				res.NextSince = c.seq + 1
			}
			return &Outcome{Result: res}
		}
	}
	p.stopAtLimit(res)
	return &Outcome{Result: res}
}

// stopFor is the stop of a step the target's exec refused or could not
// run: the error's status and code (the body is the API's to render).
func stopFor(seq int64, err error) *Stop {
	st := &Stop{Seq: seq, Status: errdefs.HTTPStatus(err), Code: errdefs.Code(err), Error: err.Error()}
	var hold *session.Hold
	var refused *session.ProcessRefused
	var budget *session.BudgetError
	var hook *session.HookRefused
	switch {
	case errors.As(err, &hold):
		st.Reason, st.ApprovalID = apiv1.ReplayStopApproval, hold.ApprovalID
	case errors.As(err, &refused), errors.As(err, &budget), errors.As(err, &hook), st.Status == 403:
		st.Reason = apiv1.ReplayStopRefused
	default:
		st.Reason = apiv1.ReplayStopError
	}
	return st
}

// ledgerEntry is the target's one replay entry: where the commands came
// from and how it went. The commands themselves are in the target's exec
// entries, each as exec records it; the answer's output is not kept.
func ledgerEntry(res *Result, planned int) map[string]any {
	e := map[string]any{"source": res.Source, "since": res.Since, "planned": planned, "ran": res.Ran, "failed": res.Failed,
		"skipped": len(res.Skipped) + res.SkippedOmitted}
	if res.Until != 0 {
		e["until"] = res.Until
	}
	if len(res.Steps) > 0 {
		e["first_seq"], e["last_seq"] = res.Steps[0].Seq, res.Steps[len(res.Steps)-1].Seq
	}
	if st := res.Stopped; st != nil {
		stop := map[string]any{"reason": st.Reason}
		if st.Seq != 0 {
			stop["seq"] = st.Seq
		}
		if st.Status != 0 {
			stop["status"], stop["code"] = st.Status, st.Code
		}
		if st.ApprovalID != "" {
			stop["approval"] = st.ApprovalID
		}
		e["stopped"] = stop
	}
	if res.NextSince != 0 {
		e["next_since"] = res.NextSince
	}
	return e
}
