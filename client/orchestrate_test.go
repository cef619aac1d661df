package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"paddock.dev/paddock/api"
	"paddock.dev/paddock/errdefs"
)

// fakeDaemon answers fork, exec and delete the way the daemon does, with
// each exec's answer chosen by the test, and records what was asked.
type fakeDaemon struct {
	t            *testing.T
	mu           sync.Mutex
	forks, execs int
	deleted      []string
	// forkRefusal, when set, is fork's answer (status, code).
	forkStatus int
	forkCode   string
	// exec answers a command in a child, or returns status > 0 with a
	// refusal's code.
	exec func(ctx context.Context, child, command string, timeout int) (api.ExecResult, int, string)
}

func (f *fakeDaemon) serve() *Client {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/agents/sessions/{id}/fork", func(w http.ResponseWriter, r *http.Request) {
		var req api.ForkRequest
		json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		f.forks++
		f.mu.Unlock()
		if f.forkStatus != 0 {
			w.WriteHeader(f.forkStatus)
			json.NewEncoder(w).Encode(map[string]string{"error": "refused", "code": f.forkCode})
			return
		}
		var out api.ForkResult
		for i := range req.Count {
			out.Children = append(out.Children, &api.Session{ID: fmt.Sprintf("%s-k%d", r.PathValue("id"), i)})
		}
		w.WriteHeader(201)
		json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("POST /v1/agents/sessions/{id}/exec", func(w http.ResponseWriter, r *http.Request) {
		var req api.ExecRequest
		json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		f.execs++
		f.mu.Unlock()
		res, status, code := f.exec(r.Context(), r.PathValue("id"), req.Command, req.TimeoutSeconds)
		if status != 0 {
			w.WriteHeader(status)
			json.NewEncoder(w).Encode(map[string]string{"error": "refused: " + code, "code": code})
			return
		}
		json.NewEncoder(w).Encode(res)
	})
	mux.HandleFunc("DELETE /v1/agents/sessions/{id}", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.deleted = append(f.deleted, r.PathValue("id"))
		f.mu.Unlock()
		w.WriteHeader(204)
	})
	srv := httptest.NewServer(mux)
	f.t.Cleanup(srv.Close)
	return New(srv.URL, "tok")
}

func (f *fakeDaemon) gone() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := slices.Clone(f.deleted)
	slices.Sort(out)
	return out
}

// scripted answers commands of the form "exit N ms M": exit code N after
// M milliseconds (as the daemon reports it); "test" runs the test and
// passes only in children listed in pass.
func scripted(pass ...string) func(context.Context, string, string, int) (api.ExecResult, int, string) {
	return func(_ context.Context, child, cmd string, _ int) (api.ExecResult, int, string) {
		if cmd == "test" {
			if slices.Contains(pass, child) {
				return api.ExecResult{ExitCode: 0, DurationMS: 5, Stdout: "ok\n"}, 0, ""
			}
			return api.ExecResult{ExitCode: 1, DurationMS: 5, Stderr: "FAIL\n"}, 0, ""
		}
		if cmd == "denied" {
			return api.ExecResult{}, 403, "command_denied"
		}
		var code int
		var ms int64
		fmt.Sscanf(cmd, "exit %d ms %d", &code, &ms)
		return api.ExecResult{ExitCode: code, DurationMS: ms, Stdout: cmd + "\n"}, 0, ""
	}
}

// TestEvaluateScores: each candidate's score (passed, test failed,
// failed, refused), the winner among the passing ones by the shortest
// run then the lowest index, and every loser deleted.
func TestEvaluateScores(t *testing.T) {
	f := &fakeDaemon{t: t, exec: scripted("p-k1", "p-k2", "p-k4")}
	c := f.serve()
	res, err := c.Evaluate(context.Background(), "p", EvaluateRequest{
		Candidates: []string{"exit 0 ms 10", "exit 0 ms 50", "exit 0 ms 20", "exit 3 ms 1", "exit 0 ms 20", "denied"},
		Test:       "test",
	})
	if err != nil {
		t.Fatal(err)
	}
	var scores []int
	for _, r := range res.Results {
		scores = append(scores, r.Score)
	}
	if want := []int{10, 100, 100, 0, 100, 0}; !slices.Equal(scores, want) {
		t.Errorf("scores %v, want %v", scores, want)
	}
	// k2 and k4 both passed in 25 ms: the lower index wins over k1 (55 ms).
	if res.Winner != 2 || res.WinnerSession != "p-k2" {
		t.Errorf("winner %d %q, want 2 p-k2", res.Winner, res.WinnerSession)
	}
	if got, want := f.gone(), []string{"p-k0", "p-k1", "p-k3", "p-k4", "p-k5"}; !slices.Equal(got, want) {
		t.Errorf("deleted %v, want %v", got, want)
	}
	r := res.Results
	if r[3].TestExitCode != nil || r[3].ExitCode == nil || *r[3].ExitCode != 3 {
		t.Errorf("a failed candidate ran its test or lost its exit code: %+v", r[3])
	}
	if r[5].ExitCode != nil || !strings.Contains(r[5].Error, "command_denied") {
		t.Errorf("a refused candidate: %+v", r[5])
	}
	if r[0].TestExitCode == nil || *r[0].TestExitCode != 1 || r[0].StderrTail != "FAIL\n" || r[0].DurationMS != 15 {
		t.Errorf("a candidate whose test failed: %+v", r[0])
	}
	if r[2].Deleted || !r[1].Deleted {
		t.Errorf("deleted flags: winner %v, a loser %v", r[2].Deleted, r[1].Deleted)
	}
	if f.forks != 1 {
		t.Errorf("%d forks, want one fork of all the children", f.forks)
	}
}

// TestEvaluateNoWinner: a candidate that only ran cleanly is never
// offered; with --keep-all nothing is deleted.
func TestEvaluateNoWinner(t *testing.T) {
	f := &fakeDaemon{t: t, exec: scripted()}
	c := f.serve()
	res, err := c.Evaluate(context.Background(), "p", EvaluateRequest{Candidates: []string{"exit 0 ms 1", "exit 1 ms 1"}, Test: "test", KeepAll: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Winner != -1 || res.WinnerSession != "" {
		t.Errorf("winner %d %q with nothing passing", res.Winner, res.WinnerSession)
	}
	if len(f.gone()) != 0 {
		t.Errorf("keep-all deleted %v", f.gone())
	}
	// With no test, the candidate's own exit code decides.
	res, err = c.Evaluate(context.Background(), "p", EvaluateRequest{Candidates: []string{"exit 1 ms 1", "exit 0 ms 9"}})
	if err != nil || res.Winner != 1 || res.Results[1].Score != ScorePassed || res.Results[1].TestExitCode != nil {
		t.Fatalf("no test: %+v %v", res, err)
	}
}

// TestEvaluateForkRefused: a fork the daemon refuses (the max_children
// budget's 403) is the answer, and nothing runs or needs deleting.
func TestEvaluateForkRefused(t *testing.T) {
	f := &fakeDaemon{t: t, forkStatus: 403, forkCode: "forbidden", exec: scripted()}
	c := f.serve()
	_, err := c.Evaluate(context.Background(), "p", EvaluateRequest{Candidates: []string{"exit 0 ms 1", "exit 0 ms 1"}})
	if !errors.Is(err, errdefs.ErrForbidden) {
		t.Fatalf("refused fork: %v", err)
	}
	if f.execs != 0 || len(f.gone()) != 0 {
		t.Errorf("after a refused fork: %d execs, deleted %v", f.execs, f.gone())
	}
	if _, err := c.Rollout(context.Background(), "p", RolloutRequest{Count: 2, Command: "true"}); !errors.Is(err, errdefs.ErrForbidden) || f.execs != 0 {
		t.Fatalf("refused rollout fork: %v", err)
	}
}

// TestEvaluateStoppedDeletesChildren: when the caller's context ends
// while the candidates run, every child made is deleted, the winner's
// slot too, and keep-all does not keep them.
func TestEvaluateStoppedDeletesChildren(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &fakeDaemon{t: t}
	started := make(chan struct{}, 3)
	f.exec = func(rctx context.Context, child, cmd string, _ int) (api.ExecResult, int, string) {
		if cmd == "quick" {
			return api.ExecResult{}, 0, ""
		}
		started <- struct{}{}
		<-rctx.Done()
		return api.ExecResult{}, 0, ""
	}
	c := f.serve()
	go func() {
		<-started
		<-started
		cancel()
	}()
	_, err := c.Evaluate(ctx, "p", EvaluateRequest{Candidates: []string{"quick", "slow", "slow"}, KeepAll: true})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("evaluate cut off: %v", err)
	}
	if got, want := f.gone(), []string{"p-k0", "p-k1", "p-k2"}; !slices.Equal(got, want) {
		t.Errorf("deleted %v, want every child %v", got, want)
	}
}

// TestOrchestrateLimits: every outside count, size and duration is
// refused before anything is forked.
func TestOrchestrateLimits(t *testing.T) {
	f := &fakeDaemon{t: t, exec: scripted()}
	c := f.serve()
	big := strings.Repeat("x", api.MaxCommandBytes+1)
	many := make([]string, MaxCandidates+1)
	for i := range many {
		many[i] = "true"
	}
	for name, req := range map[string]EvaluateRequest{
		"no candidates":     {},
		"too many":          {Candidates: many},
		"empty candidate":   {Candidates: []string{"true", ""}},
		"huge candidate":    {Candidates: []string{big}},
		"huge test":         {Candidates: []string{"true"}, Test: big},
		"timeout too short": {Candidates: []string{"true"}, Timeout: 500 * time.Millisecond},
		"timeout too long":  {Candidates: []string{"true"}, Timeout: MaxRunTimeout + time.Second},
	} {
		if _, err := c.Evaluate(context.Background(), "p", req); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, req := range map[string]RolloutRequest{
		"count 0":          {Command: "true"},
		"count 33":         {Count: MaxRolloutCount + 1, Command: "true"},
		"no command":       {Count: 1},
		"huge command":     {Count: 1, Command: big},
		"timeout too long": {Count: 1, Command: "true", Timeout: 2 * time.Hour},
	} {
		if _, err := c.Rollout(context.Background(), "p", req); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("rollout %s: %v", name, err)
		}
	}
	if f.forks != 0 {
		t.Errorf("%d forks for refused requests", f.forks)
	}
	// At the limits, it runs, and the timeout reaches exec in seconds.
	var seen []int
	var mu sync.Mutex
	f.exec = func(_ context.Context, _, _ string, timeout int) (api.ExecResult, int, string) {
		mu.Lock()
		seen = append(seen, timeout)
		mu.Unlock()
		return api.ExecResult{}, 0, ""
	}
	if _, err := c.Evaluate(context.Background(), "p", EvaluateRequest{Candidates: many[:MaxCandidates], Timeout: 1500 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != MaxCandidates || seen[0] != 2 {
		t.Errorf("timeouts sent %v, want %d of 2", seen, MaxCandidates)
	}
}

// TestRollout: every child runs the command once, the results come in
// the children's order, and --keep keeps them.
func TestRollout(t *testing.T) {
	f := &fakeDaemon{t: t}
	f.exec = func(_ context.Context, child, cmd string, _ int) (api.ExecResult, int, string) {
		if child == "p-k1" {
			return api.ExecResult{ExitCode: 2, Stderr: "no\n"}, 0, ""
		}
		return api.ExecResult{Stdout: child + " " + cmd + "\n"}, 0, ""
	}
	c := f.serve()
	res, err := c.Rollout(context.Background(), "p", RolloutRequest{Count: 3, Command: "go"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 3 || res.Runs[2].StdoutTail != "p-k2 go\n" || *res.Runs[1].ExitCode != 2 || !res.Runs[0].Deleted {
		t.Fatalf("runs %+v", res.Runs)
	}
	if got := f.gone(); len(got) != 3 {
		t.Errorf("deleted %v, want all 3", got)
	}
	res, err = c.Rollout(context.Background(), "q", RolloutRequest{Count: 2, Command: "go", Keep: true})
	if err != nil || len(res.Runs) != 2 || res.Runs[0].Deleted || len(f.gone()) != 3 {
		t.Fatalf("rollout --keep: %+v %v, deleted %v", res, err, f.gone())
	}
}

// TestTail keeps the end of the output, cut on a character boundary.
func TestTail(t *testing.T) {
	s := "é" + strings.Repeat("a", OutputTail-1)
	if got := tail(s); got != strings.Repeat("a", OutputTail-1) {
		t.Errorf("tail cut a character: %q", got[:4])
	}
	if tail("short") != "short" {
		t.Error("a short output changed")
	}
}

// progressLog records what a ProgressFunc hears.
type progressLog struct {
	mu    sync.Mutex
	done  []int
	total []int
	msgs  []string
}

func (p *progressLog) fn(done, total int, msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = append(p.done, done)
	p.total = append(p.total, total)
	p.msgs = append(p.msgs, msg)
}

// check wants done to rise 1, 2, ... up to total, the same total each
// call, the fork first and the deletes (when any) last.
func (p *progressLog) check(t *testing.T, total int, deletes bool) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.done) != total {
		t.Fatalf("%d progress calls, want %d: %v %q", len(p.done), total, p.done, p.msgs)
	}
	for i := range p.done {
		if p.done[i] != i+1 || p.total[i] != total {
			t.Errorf("call %d: %d of %d, want %d of %d", i, p.done[i], p.total[i], i+1, total)
		}
	}
	if !strings.HasPrefix(p.msgs[0], "forked ") {
		t.Errorf("first step %q, want the fork", p.msgs[0])
	}
	if last := p.msgs[len(p.msgs)-1]; strings.HasPrefix(last, "deleted ") != deletes {
		t.Errorf("last step %q (deletes expected: %v)", last, deletes)
	}
}

// TestOrchestrateProgress: Evaluate and Rollout report the fork, each
// candidate or run finished (refused ones too) and the deletes, as steps
// of a total known from the start; with keep there is no delete step.
func TestOrchestrateProgress(t *testing.T) {
	f := &fakeDaemon{t: t, exec: scripted("p-k1")}
	c := f.serve()
	var p progressLog
	cands := []string{"exit 0 ms 10", "exit 0 ms 5", "exit 1 ms 1", "denied"}
	if _, err := c.Evaluate(context.Background(), "p", EvaluateRequest{Candidates: cands, Test: "test", Progress: p.fn}); err != nil {
		t.Fatal(err)
	}
	p.check(t, 1+len(cands)+1, true)

	p = progressLog{}
	if _, err := c.Evaluate(context.Background(), "q", EvaluateRequest{Candidates: cands, KeepAll: true, Progress: p.fn}); err != nil {
		t.Fatal(err)
	}
	p.check(t, 1+len(cands), false)

	f.exec = func(_ context.Context, child, cmd string, _ int) (api.ExecResult, int, string) {
		if child == "r-k2" {
			return api.ExecResult{}, 403, "command_denied"
		}
		return api.ExecResult{Stdout: "ok\n"}, 0, ""
	}
	p = progressLog{}
	if _, err := c.Rollout(context.Background(), "r", RolloutRequest{Count: 3, Command: "go", Progress: p.fn}); err != nil {
		t.Fatal(err)
	}
	p.check(t, 1+3+1, true)

	p = progressLog{}
	if _, err := c.Rollout(context.Background(), "s", RolloutRequest{Count: 2, Command: "go", Keep: true, Progress: p.fn}); err != nil {
		t.Fatal(err)
	}
	p.check(t, 1+2, false)

	// No ProgressFunc: the verbs run as before.
	if _, err := c.Rollout(context.Background(), "t", RolloutRequest{Count: 1, Command: "go"}); err != nil {
		t.Fatal(err)
	}
}
