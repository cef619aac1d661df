package session

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/errdefs"
	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
	"paddock.dev/paddock/hostd/store"
)

// More sentinel errors for what the guest refuses (errdefs' kinds too).
var (
	ErrForbidden = errdefs.ErrForbidden // 403
	ErrTooLarge  = errdefs.ErrTooLarge  // 413
)

// guestErr passes a guest agent's refusal on with its kind and its
// message, which says what to fix, without the "guest agent: 403
// forbidden:" of client.Error's text. The message starts with the kind's
// word ("forbidden: ..."), said once.
//
// The agent runs inside the sandbox, so its answer is the sandbox's word:
// the kind comes from the status, and only the statuses an agent answers
// (400, 403, 404, 409, 413) pass on; the code the agent names never picks
// the kind (an agent's "unauthenticated" or "approval_required" would
// have the daemon answer 401 or 428 for it). Only the files routes'
// finer codes (system_path and the like) go on, on a 403. Any other 4xx
// is the agent misbehaving (502), and an agent's own failure (5xx) is a
// 500 that names the agent, whatever code it sent.
func guestErr(err error) error {
	var ge *client.Error
	if !errors.As(err, &ge) {
		return fmt.Errorf("%w: the sandbox's agent did not answer: %v", ErrBadGateway, err)
	}
	if ge.Status >= 500 {
		return fmt.Errorf("%w: %v", errdefs.ErrInternal, err)
	}
	kind, ok := guestKinds[ge.Status]
	if !ok {
		return fmt.Errorf("%w: the sandbox's agent answered %d, which it never should: %s", ErrBadGateway, ge.Status, clipText(ge.Message, 300))
	}
	out := fmt.Errorf("%w: %s", kind, strings.TrimPrefix(ge.Message, kind.Error()+": "))
	if ge.Status == 403 {
		switch ge.Code {
		case CodeSystemPath, CodeExecProgram, CodePermissionDenied, CodeAgentProcess:
			return errdefs.WithCode(ge.Code, out)
		}
	}
	return out
}

// guestKinds are the statuses a guest agent refuses with, and their kinds.
var guestKinds = map[int]error{
	400: errdefs.ErrInvalidArgument,
	403: errdefs.ErrForbidden,
	404: errdefs.ErrNotFound,
	409: errdefs.ErrConflict,
	413: errdefs.ErrTooLarge,
}

// Codes of the files routes' refusals (403), passed on from the agent
// (guest/api): the path is under a system directory of the image, it
// would change a program of the session's execute list, or the guest user,
// whose rights the files routes act with, may not do it.
const (
	CodeSystemPath       = api.CodeSystemPath
	CodeExecProgram      = api.CodeExecProgram
	CodePermissionDenied = api.CodePermission
	// CodeAgentProcess: the path is the guest agent's own /proc entry
	// (/proc/self and the like), which would show its descriptors.
	CodeAgentProcess = api.CodeAgentProcess
)

// machineFor returns a running session's guest client.
func (m *Manager) machineFor(ctx context.Context, tenant, id string) (*client.Client, error) {
	_, _, mc, err := m.running(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	return clientFor(mc), nil
}

// The public wire types (package api), kept under these names here.
type (
	JobStart = apiv1.JobStart
	Job      = apiv1.Job
	JobRead  = apiv1.JobRead
	JobStdin = apiv1.JobStdin
)

// refusedBeforeStart reports whether a guest error means the command was
// never started: the agent answered with a refusal (a status), as opposed
// to a call cut off on the way (the caller left, the agent went away),
// after which the command may well have run.
func refusedBeforeStart(err error) bool {
	var ge *client.Error
	return errors.As(err, &ge) && ge.Status >= 400 && ge.Status < 500
}

// StartJob starts a supervised background job.
func (m *Manager) StartJob(ctx context.Context, tenant, id string, req JobStart) (*Job, error) {
	return m.startJob(ctx, tenant, id, req, false)
}

// StartExecStream starts the job under POST .../exec/stream: a job for
// the budget (max_jobs, max_concurrent_jobs, compute), and a command,
// which counts in execs (max_execs) and whose timeout the compute budget
// caps.
func (m *Manager) StartExecStream(ctx context.Context, tenant, id string, req ExecRequest) (*Job, error) {
	return m.startJob(ctx, tenant, id, JobStart{Command: req.Command, TimeoutSeconds: req.TimeoutSeconds,
		ApprovalID: req.ApprovalID, ApprovalWaitSeconds: req.ApprovalWaitSeconds}, true)
}

// validateJob is the validate step of a job start (and of the wait for
// its approval, AwaitApproval).
func validateJob(p *pipe, req JobStart) pipeStep {
	return step(StepValidate, func(context.Context) error {
		p.cmd.Text = req.Command
		if strings.TrimSpace(req.Command) == "" {
			return bad("command is empty")
		}
		if len(req.Command) > MaxCommandBytes || strings.ContainsRune(req.Command, 0) {
			return bad("command must be at most %d bytes without NUL", MaxCommandBytes)
		}
		if req.MaxOutputBytes < 0 || req.MaxOutputBytes > api.MaxMaxOutputBytes {
			return bad("max_output_bytes must be from 0 to %d", api.MaxMaxOutputBytes)
		}
		return checkApprovalFields(req.ApprovalID, req.ApprovalWaitSeconds)
	})
}

func (m *Manager) startJob(ctx context.Context, tenant, id string, req JobStart, streamed bool) (*Job, error) {
	kind, what := CommandJob, StartJob
	if streamed {
		kind, what = CommandStream, StartStream
	}
	p := m.newPipe(ctx, kind, tenant, id)
	var (
		j       *api.Job
		maxOut  int64
		started time.Time
		lostErr string
	)
	err := p.walk(ctx,
		validateJob(p, req),
		loadRunning(),
		judgeCommand(jobCheck(req)),
		// In flight from here (a restore or fork refuses), and one job
		// start at a time per session while the budget counts running
		// jobs.
		gateCommand(req.ApprovalWaitSeconds > 0),
		admitStep(what, req.TimeoutSeconds),
		spendApproval(),
		runHooks("job"),
		step(StepRun, func(ctx context.Context) error {
			maxOut = req.MaxOutputBytes
			if p.adm.OutputCap > 0 && (maxOut == 0 || maxOut > p.adm.OutputCap) {
				maxOut = p.adm.OutputCap
			}
			started = m.now()
			var err error
			j, err = p.cl.StartJob(ctx, api.JobRequest{Command: api.Command{Shell: req.Command, Cwd: p.s.Workspace.Path,
				TimeoutSeconds: p.adm.Timeout, MaxOutputBytes: maxOut, Confine: p.cmd.Confine}, Stdin: req.Stdin})
			if err != nil && refusedBeforeStart(err) {
				return guestErr(err)
			}
			// The job started, or may have: it keeps its unit and the
			// ledger says so.
			p.ran, p.kept = true, true
			if err != nil {
				lostErr, p.err = clipText(err.Error(), 300), guestErr(err)
				return p.err
			}
			m.recordJob(ctx, id, j, req.Command, started, maxOut, streamed)
			return nil
		}),
		step(StepRecord, func(ctx context.Context) error {
			if p.err != nil {
				m.ledgerAppend(context.WithoutCancel(ctx), id, "job.start", p.withNotes(map[string]any{"command": req.Command, "interrupted": true, "error": lostErr, "policy": p.v.decision.Rule}))
				return nil
			}
			entry := map[string]any{"job": j.ID, "command": req.Command, "stdin": req.Stdin, "policy": p.v.decision.Rule}
			if p.adm.OutputCap > 0 {
				entry["max_output_bytes"] = maxOut
			}
			if p.adm.Capped {
				entry["timeout_seconds"], entry["timeout_capped_by_budget"] = p.adm.Timeout, true
			}
			if streamed {
				// An exec/stream: its exec entry follows at its exit, so
				// a replay runs it from there, not as a job.
				entry["streamed"] = true
			}
			m.ledgerAppend(ctx, id, "job.start", p.withNotes(entry))
			if streamed {
				// The exec entry follows when the command ends, made by
				// the host whether or not the caller is still there.
				go m.followStreamed(id, p.cl, j.ID)
			}
			return nil
		}),
		step(StepUsage, func(context.Context) error {
			m.addUsage(id, store.UsageRow{Jobs: p.adm.Untaken(), Execs: p.adm.UntakenStreamExec()})
			return nil
		}),
	)
	if err != nil {
		return nil, err
	}
	return &Job{Job: *j, Command: req.Command, Engine: "supervisor"}, nil
}

// Jobs lists the session's jobs.
func (m *Manager) Jobs(ctx context.Context, tenant, id string) ([]Job, error) {
	c, err := m.machineFor(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	js, err := c.Jobs(ctx)
	if err != nil {
		return nil, guestErr(err)
	}
	out := make([]Job, 0, len(js))
	for _, j := range js {
		m.settleJob(ctx, id, j)
		out = append(out, Job{Job: j, Command: j.Shell, Engine: "supervisor"})
	}
	return out, nil
}

// ReadJob reads a job's output from offsets, waiting up to wait for more.
func (m *Manager) ReadJob(ctx context.Context, tenant, id, job string, offset, stderrOffset int64, wait time.Duration) (*JobRead, error) {
	c, err := m.machineFor(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	r, err := c.ReadJob(ctx, job, client.ReadOptions{Offset: offset, StderrOffset: stderrOffset, Wait: wait})
	if err != nil {
		return nil, guestErr(err)
	}
	m.settleJob(ctx, id, r.Job)
	return &JobRead{Job: Job{Job: r.Job, Command: r.Shell, Engine: "supervisor"},
		Output: string(r.Output), OutputBase64: base64.StdEncoding.EncodeToString(r.Output), NextOffset: r.NextOffset,
		Stderr: string(r.Stderr), StderrNextOffset: r.StderrNextOffset, More: r.More, EOF: r.EOF, Truncated: r.Truncated}, nil
}

// WriteJobStdin writes to (or closes) a job's stdin; only sizes are
// ledgered.
func (m *Manager) WriteJobStdin(ctx context.Context, tenant, id, job string, req JobStdin) (*Job, error) {
	data := []byte(req.Text)
	if req.DataBase64 != "" {
		if req.Text != "" {
			return nil, bad("give text or data_base64, not both")
		}
		var err error
		if data, err = base64.StdEncoding.DecodeString(req.DataBase64); err != nil {
			return nil, bad("data_base64 is not valid base64: %v", err)
		}
	}
	if len(data) > api.MaxStdinWriteBytes {
		return nil, fmt.Errorf("%w: at most %d bytes per stdin write", ErrTooLarge, api.MaxStdinWriteBytes)
	}
	c, err := m.machineFor(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	j, err := c.WriteStdin(ctx, job, api.JobStdin{Data: data, Close: req.Close})
	if err != nil {
		return nil, guestErr(err)
	}
	m.ledgerAppend(ctx, id, "job.stdin", map[string]any{"job": job, "bytes": len(data), "close": req.Close})
	return &Job{Job: *j, Command: j.Shell, Engine: "supervisor"}, nil
}

// SignalJob signals a job's whole process tree.
func (m *Manager) SignalJob(ctx context.Context, tenant, id, job, signal string) (*Job, error) {
	c, err := m.machineFor(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	j, err := c.SignalJob(ctx, job, signal)
	if err != nil {
		return nil, guestErr(err)
	}
	m.ledgerAppend(ctx, id, "job.kill", map[string]any{"job": job, "signal": signal})
	return &Job{Job: *j, Command: j.Shell, Engine: "supervisor"}, nil
}
