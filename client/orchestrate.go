package client

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
	"unicode/utf8"

	"paddock.dev/paddock/api"
	"paddock.dev/paddock/errdefs"
)

// Evaluate and Rollout are orchestration over fork, exec and delete, done
// here in the SDK rather than by a daemon route: they hold no state the
// daemon must keep, they take as long as the slowest command (minutes),
// which an HTTP request should not be held open for, and every one of
// their steps already goes through the daemon's own checks (fork's
// budget and lifecycle rules, each exec's policy, approvals and budget).
// The CLI calls them, and so will the MCP server: one implementation.

// Limits of the orchestration verbs.
const (
	// MaxCandidates is the most candidates one Evaluate takes.
	MaxCandidates = 16
	// MaxRolloutCount is the most children one Rollout forks: fork's own
	// limit.
	MaxRolloutCount = 32
	// MaxRunTimeout bounds the timeout of each command (a candidate, a
	// test, a rollout's command): exec's own bound.
	MaxRunTimeout = api.MaxExecTimeout * time.Second
	// DefaultRunTimeout is each command's timeout when none is given.
	DefaultRunTimeout = api.DefaultExecTimeout * time.Second
	// OutputTail is how much of the end of each stream a result keeps.
	OutputTail = 2 << 10
	// cleanupTimeout bounds the deletes done after the caller's context
	// ended.
	cleanupTimeout = 2 * time.Minute
)

// The scores of an evaluated candidate.
const (
	ScorePassed    = 100 // the test exited 0 (with no test: the candidate did)
	ScoreTestFails = 10  // the candidate exited 0 and the test did not
	ScoreFailed    = 0   // the candidate failed or never ran
)

// EvaluateRequest is what Evaluate tries.
type EvaluateRequest struct {
	// Candidates are shell lines, each run in a fork child of its own.
	Candidates []string
	// Test is run in each child after its candidate exited 0; empty, the
	// candidate's own exit code decides.
	Test string
	// KeepAll keeps every child; otherwise only the winner is kept.
	KeepAll bool
	// Timeout is each command's timeout (0: DefaultRunTimeout).
	Timeout time.Duration
	// Progress, when set, hears each step done of a total known from the
	// start: the fork, each candidate finished (its run and its test),
	// and the losers' deletes (one step, absent with KeepAll).
	Progress ProgressFunc
}

// ProgressFunc hears that done of total steps of an orchestration are
// done, with a short message naming the last step. Calls come one at a
// time, done rising by one each call, and none after the verb returns;
// it should return quickly, as a run waits for it. A verb that fails
// stops short of total.
type ProgressFunc func(done, total int, msg string)

// steps counts an orchestration's steps for its ProgressFunc.
type steps struct {
	mu          sync.Mutex
	fn          ProgressFunc
	done, total int
}

// step reports one more step done; it does nothing with no ProgressFunc.
func (p *steps) step(msg string) {
	if p.fn == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	p.fn(p.done, p.total, msg)
}

// CandidateResult is one candidate's run and score.
type CandidateResult struct {
	Index   int    `json:"index"`
	Command string `json:"command"`
	Session string `json:"session"`
	Score   int    `json:"score"`
	// ExitCode is the candidate's; TestExitCode the test's, when it ran.
	ExitCode     *int `json:"exit_code"`
	TestExitCode *int `json:"test_exit_code,omitempty"`
	TimedOut     bool `json:"timed_out"`
	// DurationMS is the candidate's and the test's run time as the daemon
	// measured them.
	DurationMS int64 `json:"duration_ms"`
	// Error says why a command never ran (refused by policy, a budget,
	// an approval it needs).
	Error string `json:"error,omitempty"`
	// StdoutTail and StderrTail end the last command run (at most
	// OutputTail bytes each).
	StdoutTail string `json:"stdout_tail"`
	StderrTail string `json:"stderr_tail"`
	// Deleted says the child was deleted; DeleteError why it could not be.
	Deleted     bool   `json:"deleted"`
	DeleteError string `json:"delete_error,omitempty"`
}

// EvaluateResult answers Evaluate.
type EvaluateResult struct {
	Parent  string            `json:"parent"`
	Results []CandidateResult `json:"results"`
	// Winner is the index of the winning candidate, -1 when none passed;
	// WinnerSession its child, ready for Promote.
	Winner        int    `json:"winner"`
	WinnerSession string `json:"winner_session,omitempty"`
}

// RolloutRequest is what Rollout runs.
type RolloutRequest struct {
	Count   int
	Command string
	// Keep keeps the children; otherwise they are deleted.
	Keep    bool
	Timeout time.Duration
	// Progress, when set, hears each step done of a total known from the
	// start: the fork, each child's run finished, and the deletes (one
	// step, absent with Keep).
	Progress ProgressFunc
}

// RolloutRun is the command's run in one child.
type RolloutRun struct {
	Index       int    `json:"index"`
	Session     string `json:"session"`
	ExitCode    *int   `json:"exit_code"`
	TimedOut    bool   `json:"timed_out"`
	DurationMS  int64  `json:"duration_ms"`
	Error       string `json:"error,omitempty"`
	StdoutTail  string `json:"stdout_tail"`
	StderrTail  string `json:"stderr_tail"`
	Deleted     bool   `json:"deleted"`
	DeleteError string `json:"delete_error,omitempty"`
}

// RolloutResult answers Rollout.
type RolloutResult struct {
	Parent  string       `json:"parent"`
	Command string       `json:"command"`
	Runs    []RolloutRun `json:"runs"`
}

// checkCommand refuses an empty or oversized shell line.
func checkCommand(what, cmd string) error {
	if cmd == "" {
		return errdefs.New(errdefs.ErrInvalidArgument, what+" is empty")
	}
	if len(cmd) > api.MaxCommandBytes {
		return errdefs.New(errdefs.ErrInvalidArgument, fmt.Sprintf("%s is %d bytes; at most %d", what, len(cmd), api.MaxCommandBytes))
	}
	return nil
}

// runTimeout turns a timeout into exec's whole seconds, refusing one out
// of bounds.
func runTimeout(d time.Duration) (int, error) {
	if d == 0 {
		d = DefaultRunTimeout
	}
	if d < time.Second || d > MaxRunTimeout {
		return 0, errdefs.New(errdefs.ErrInvalidArgument, fmt.Sprintf("timeout %s: between 1s and %s", d, MaxRunTimeout))
	}
	return int((d + time.Second - 1) / time.Second), nil
}

// Evaluate forks session id into one child per candidate, runs each
// candidate in its child and then, if it exited 0, the test, all children
// in parallel; scores them (ScorePassed, ScoreTestFails, ScoreFailed) and
// names the winner: the best score, then the shortest run, then the
// lowest index, and only among those that passed. The losers are deleted
// unless KeepAll. The fork spends the parent's max_children; a refused
// fork creates nothing. When Evaluate fails after the fork (its context
// ended, the daemon went away), it deletes every child it made.
func (c *Client) Evaluate(ctx context.Context, id string, req EvaluateRequest) (*EvaluateResult, error) {
	n := len(req.Candidates)
	if n < 1 || n > MaxCandidates {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, fmt.Sprintf("%d candidates: give 1 to %d", n, MaxCandidates))
	}
	for i, cand := range req.Candidates {
		if err := checkCommand(fmt.Sprintf("candidate %d", i), cand); err != nil {
			return nil, err
		}
	}
	if req.Test != "" {
		if err := checkCommand("the test", req.Test); err != nil {
			return nil, err
		}
	}
	secs, err := runTimeout(req.Timeout)
	if err != nil {
		return nil, err
	}
	prog := &steps{fn: req.Progress, total: 1 + n}
	if !req.KeepAll {
		prog.total++
	}
	kids, err := c.forkN(ctx, id, n)
	if err != nil {
		return nil, err
	}
	prog.step(fmt.Sprintf("forked %d children", n))
	res := &EvaluateResult{Parent: id, Winner: -1, Results: make([]CandidateResult, n)}
	var wg sync.WaitGroup
	aborts := make([]error, n)
	for i := range kids {
		res.Results[i] = CandidateResult{Index: i, Command: req.Candidates[i], Session: kids[i]}
		wg.Add(1)
		go func(r *CandidateResult) {
			defer wg.Done()
			aborts[r.Index] = c.runCandidate(ctx, r, req.Test, secs)
			if aborts[r.Index] == nil {
				prog.step(fmt.Sprintf("candidate %d finished with score %d", r.Index, r.Score))
			}
		}(&res.Results[i])
	}
	wg.Wait()
	if err := errors.Join(aborts...); err != nil {
		c.deleteAll(ctx, kids)
		return nil, fmt.Errorf("evaluate stopped, its children deleted: %w", err)
	}
	res.Winner = pickWinner(res.Results)
	if res.Winner >= 0 {
		res.WinnerSession = res.Results[res.Winner].Session
	}
	if !req.KeepAll {
		var del []int
		for i := range res.Results {
			if i != res.Winner {
				del = append(del, i)
			}
		}
		c.deleteEach(ctx, del, func(i int) string { return res.Results[i].Session }, func(i int, err error) {
			r := &res.Results[i]
			r.Deleted = err == nil
			if err != nil {
				r.DeleteError = err.Error()
			}
		})
		prog.step(fmt.Sprintf("deleted %d losing children", len(del)))
	}
	return res, nil
}

// pickWinner is the index of the best passing result, -1 when none
// passed: the highest score, then the shortest run, then the lowest index.
func pickWinner(rs []CandidateResult) int {
	order := make([]int, len(rs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		x, y := rs[order[a]], rs[order[b]]
		if x.Score != y.Score {
			return x.Score > y.Score
		}
		if x.DurationMS != y.DurationMS {
			return x.DurationMS < y.DurationMS
		}
		return x.Index < y.Index
	})
	if len(order) == 0 || rs[order[0]].Score != ScorePassed {
		return -1
	}
	return order[0]
}

// runCandidate runs a candidate and its test in r.Session and scores it.
// A command the daemon refused is a failed run; only an error that stops
// the whole evaluation (the context, the connection) is returned.
func (c *Client) runCandidate(ctx context.Context, r *CandidateResult, test string, secs int) error {
	out, err := c.Exec(ctx, r.Session, api.ExecRequest{Command: r.Command, TimeoutSeconds: secs})
	if err != nil {
		return refusedOr(err, &r.Error, "candidate")
	}
	r.ExitCode, r.TimedOut, r.DurationMS = &out.ExitCode, out.TimedOut, out.DurationMS
	r.StdoutTail, r.StderrTail = tail(out.Stdout), tail(out.Stderr)
	if out.ExitCode != 0 || out.TimedOut {
		r.Score = ScoreFailed
		return nil
	}
	if test == "" {
		r.Score = ScorePassed
		return nil
	}
	r.Score = ScoreTestFails
	tr, err := c.Exec(ctx, r.Session, api.ExecRequest{Command: test, TimeoutSeconds: secs})
	if err != nil {
		return refusedOr(err, &r.Error, "test")
	}
	r.TestExitCode, r.DurationMS = &tr.ExitCode, r.DurationMS+tr.DurationMS
	r.TimedOut = tr.TimedOut
	r.StdoutTail, r.StderrTail = tail(tr.Stdout), tail(tr.Stderr)
	if tr.ExitCode == 0 && !tr.TimedOut {
		r.Score = ScorePassed
	}
	return nil
}

// refusedOr records the daemon's refusal of a command in *why and returns
// nil, or returns any other error (the context ended, no answer).
func refusedOr(err error, why *string, what string) error {
	var ce *Error
	if errors.As(err, &ce) {
		*why = what + " refused: " + err.Error()
		return nil
	}
	return err
}

// tail is the end of s, at most OutputTail bytes, cut on a character
// boundary.
func tail(s string) string {
	if len(s) <= OutputTail {
		return s
	}
	s = s[len(s)-OutputTail:]
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return s
}

// forkN forks id into n children and returns their ids. The fork is one
// call, so a refusal (409, a max_children budget's 403) creates none.
func (c *Client) forkN(ctx context.Context, id string, n int) ([]string, error) {
	fr, err := c.ForkWith(ctx, id, -1, api.ForkRequest{Count: n})
	if err != nil {
		return nil, err
	}
	kids := make([]string, 0, len(fr.Children))
	for _, k := range fr.Children {
		if k != nil && k.ID != "" {
			kids = append(kids, k.ID)
		}
	}
	if len(kids) != n {
		c.deleteAll(ctx, kids)
		return nil, fmt.Errorf("fork of %s answered %d children, asked for %d (deleted them)", id, len(kids), n)
	}
	return kids, nil
}

// deleteEach deletes the sessions of indexes in parallel (still when ctx
// has ended, for a bounded time) and reports each outcome to done.
func (c *Client) deleteEach(ctx context.Context, idx []int, session func(int) string, done func(int, error)) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, i := range idx {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := c.DeleteSession(dctx, session(i))
			mu.Lock()
			done(i, err)
			mu.Unlock()
		}()
	}
	wg.Wait()
}

// deleteAll deletes ids, best effort (the caller is already failing).
func (c *Client) deleteAll(ctx context.Context, ids []string) {
	idx := make([]int, len(ids))
	for i := range idx {
		idx[i] = i
	}
	c.deleteEach(ctx, idx, func(i int) string { return ids[i] }, func(int, error) {})
}

// Rollout forks session id into req.Count children, runs req.Command in
// every child in parallel and returns each run; the children are deleted
// afterwards unless req.Keep. It follows fork's rules (one fork call,
// which spends max_children; a refusal creates nothing), and deletes
// every child it made when it fails after the fork.
func (c *Client) Rollout(ctx context.Context, id string, req RolloutRequest) (*RolloutResult, error) {
	if req.Count < 1 || req.Count > MaxRolloutCount {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, fmt.Sprintf("count %d: give 1 to %d", req.Count, MaxRolloutCount))
	}
	if err := checkCommand("the command", req.Command); err != nil {
		return nil, err
	}
	secs, err := runTimeout(req.Timeout)
	if err != nil {
		return nil, err
	}
	prog := &steps{fn: req.Progress, total: 1 + req.Count}
	if !req.Keep {
		prog.total++
	}
	kids, err := c.forkN(ctx, id, req.Count)
	if err != nil {
		return nil, err
	}
	prog.step(fmt.Sprintf("forked %d children", req.Count))
	res := &RolloutResult{Parent: id, Command: req.Command, Runs: make([]RolloutRun, len(kids))}
	aborts := make([]error, len(kids))
	var wg sync.WaitGroup
	for i := range kids {
		res.Runs[i] = RolloutRun{Index: i, Session: kids[i]}
		wg.Add(1)
		go func(r *RolloutRun) {
			defer wg.Done()
			out, err := c.Exec(ctx, r.Session, api.ExecRequest{Command: req.Command, TimeoutSeconds: secs})
			if err != nil {
				if aborts[r.Index] = refusedOr(err, &r.Error, "command"); aborts[r.Index] == nil {
					prog.step(fmt.Sprintf("run %d refused", r.Index))
				}
				return
			}
			r.ExitCode, r.TimedOut, r.DurationMS = &out.ExitCode, out.TimedOut, out.DurationMS
			r.StdoutTail, r.StderrTail = tail(out.Stdout), tail(out.Stderr)
			prog.step(fmt.Sprintf("run %d exited %d", r.Index, out.ExitCode))
		}(&res.Runs[i])
	}
	wg.Wait()
	if err := errors.Join(aborts...); err != nil {
		c.deleteAll(ctx, kids)
		return nil, fmt.Errorf("rollout stopped, its children deleted: %w", err)
	}
	if !req.Keep {
		idx := make([]int, len(kids))
		for i := range idx {
			idx[i] = i
		}
		c.deleteEach(ctx, idx, func(i int) string { return kids[i] }, func(i int, err error) {
			r := &res.Runs[i]
			r.Deleted = err == nil
			if err != nil {
				r.DeleteError = err.Error()
			}
		})
		prog.step(fmt.Sprintf("deleted %d children", len(idx)))
	}
	return res, nil
}
