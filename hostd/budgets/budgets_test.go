package budgets

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"paddock.dev/paddock/guest/client"
	"paddock.dev/paddock/hostd/ledger"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/store"
	"paddock.dev/paddock/hypervisor/fake"
	"paddock.dev/paddock/policy"
)

func n(v int64) *int64 { return &v }

// fakeManager is a Manager on the fake backend (the real guest agent in
// the test's process, no root) with the budgets service set, as
// hostd/daemon does. Its commands run on the host as the test's user,
// so the tests give them relative paths only.
func fakeManager(t *testing.T) (*session.Manager, *Service) {
	t.Helper()
	state := t.TempDir()
	st, err := store.Open(filepath.Join(state, "paddock.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	b := fake.New(filepath.Join(state, "fake"))
	t.Cleanup(func() { b.Close() })
	eng, err := policy.New(policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := session.New(session.Config{Store: st, Ledger: ledger.New(st), Backend: b, DefaultImage: "any", Policy: eng})
	t.Cleanup(func() { m.Shutdown(context.Background()) })
	v := New(m)
	m.SetBudgets(v)
	return m, v
}

// budgeted creates a session with budget b and returns it with its guest.
func budgeted(t *testing.T, m *session.Manager, b *session.Budget) (*session.Session, *client.Client) {
	t.Helper()
	s, err := m.Create(context.Background(), "", session.CreateRequest{TTLSeconds: 600, Budget: b})
	if err != nil {
		t.Fatal(err)
	}
	return s, session.Guest(m.Machine(s.ID))
}

// refusedBy says whether err is a budget refusal of field (403).
func refusedBy(err error, field string) bool {
	var be *session.BudgetError
	return errors.As(err, &be) && be.Budget == field && errors.Is(err, session.ErrForbidden)
}

// TestBudgetAdmitCounts: a limited count is taken at the start, a refusal
// says how many were used, and a unit released goes back; an exec/stream
// takes a job and an exec, and gives the job back when the exec is not
// left; a count the budget does not limit is left to the core.
func TestBudgetAdmitCounts(t *testing.T) {
	m, v := fakeManager(t)
	ctx := context.Background()
	s, c := budgeted(t, m, &session.Budget{MaxExecs: n(2), MaxJobs: n(5)})
	var adms []*session.Admission
	for i := 0; i < 2; i++ {
		a, err := v.Admit(ctx, s, c, session.StartExec, 0)
		if err != nil || !a.Taken {
			t.Fatalf("exec %d of 2: %+v %v", i+1, a, err)
		}
		adms = append(adms, a)
	}
	_, err := v.Admit(ctx, s, c, session.StartExec, 0)
	var be *session.BudgetError
	if !refusedBy(err, "max_execs") || !errors.As(err, &be) || be.Limit != 2 || be.Used != 2 || be.What != "exec" {
		t.Fatalf("a third exec of two: %v, want max_execs 2 of 2", err)
	}
	adms[1].Release()
	if _, err := v.Admit(ctx, s, c, session.StartExec, 0); err != nil {
		t.Errorf("after a unit was released: %v", err)
	}
	if u := m.Usage(ctx, s.ID); u.Execs != 2 {
		t.Errorf("execs taken %d, want 2", u.Execs)
	}
	// The execs are all taken: an exec/stream gets its job, then gives it
	// back when its exec is refused.
	if _, err := v.Admit(ctx, s, c, session.StartStream, 0); !refusedBy(err, "max_execs") {
		t.Errorf("exec/stream with no exec left: %v", err)
	}
	if u := m.Usage(ctx, s.ID); u.Jobs != 0 {
		t.Errorf("the refused exec/stream kept its job: %d", u.Jobs)
	}
	// A job only counts in jobs.
	a, err := v.Admit(ctx, s, c, session.StartJob, 0)
	if err != nil || !a.Taken || a.StreamExec {
		t.Errorf("a job: %+v %v", a, err)
	}

	// Jobs limited, execs not: an exec/stream takes its job and leaves
	// its exec to the core.
	s2, c2 := budgeted(t, m, &session.Budget{MaxJobs: n(1)})
	a, err = v.Admit(ctx, s2, c2, session.StartStream, 0)
	if err != nil || !a.Taken || !a.StreamExec || a.StreamExecTaken {
		t.Fatalf("exec/stream with jobs limited: %+v %v", a, err)
	}
	if _, err := v.Admit(ctx, s2, c2, session.StartStream, 0); !refusedBy(err, "max_jobs") {
		t.Errorf("a second exec/stream of one job: %v", err)
	}
	a, err = v.Admit(ctx, s2, c2, session.StartExec, 0)
	if err != nil || a.Taken {
		t.Errorf("an exec on a budget without max_execs: %+v %v, want admitted and left to the core", a, err)
	}
}

// TestBudgetAdmitCaps: the exec-seconds budget caps a command's timeout
// to what is left (rounded up) and refuses once it is spent, but not a
// job; max_output_bytes is handed on as the output cap.
func TestBudgetAdmitCaps(t *testing.T) {
	m, v := fakeManager(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, c := budgeted(t, m, &session.Budget{MaxExecSeconds: n(1), MaxOutputBytes: n(4096)})
	for _, tc := range []struct {
		what    session.Start
		timeout int
		want    int
		capped  bool
	}{
		{session.StartExec, 0, 1, true},
		{session.StartExec, 30, 1, true},
		{session.StartStream, 30, 30, false}, // exec seconds are an exec's only
		{session.StartJob, 0, 0, false},
	} {
		a, err := v.Admit(ctx, s, c, tc.what, tc.timeout)
		if err != nil {
			t.Fatalf("%s: %v", tc.what, err)
		}
		if a.Timeout != tc.want || a.Capped != tc.capped || a.OutputCap != 4096 {
			t.Errorf("%s with timeout %d: %+v, want timeout %d capped %v and output cap 4096", tc.what, tc.timeout, a, tc.want, tc.capped)
		}
	}
	// Spend the second through the core (which counts exec time), and
	// the next exec is refused; a job still starts.
	r, err := m.Exec(ctx, "", s.ID, session.ExecRequest{Command: "sleep 3"})
	if err != nil || !r.TimedOut {
		t.Fatalf("a command past the exec seconds: %+v %v, want it cut at the capped timeout", r, err)
	}
	if _, err := v.Admit(ctx, s, c, session.StartExec, 0); !refusedBy(err, "max_exec_seconds") {
		t.Errorf("an exec with the seconds spent: %v", err)
	}
	if _, err := v.Admit(ctx, s, c, session.StartJob, 0); err != nil {
		t.Errorf("a job with the exec seconds spent: %v", err)
	}
}

// TestBudgetAdmitConcurrentJobs: max_concurrent_jobs counts the jobs the
// guest reports running, and limits jobs only.
func TestBudgetAdmitConcurrentJobs(t *testing.T) {
	m, v := fakeManager(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, c := budgeted(t, m, &session.Budget{MaxConcurrentJobs: n(1)})
	if _, err := v.Admit(ctx, s, c, session.StartJob, 0); err != nil {
		t.Fatalf("a job with none running: %v", err)
	}
	j, err := m.StartJob(ctx, "", s.ID, session.JobStart{Command: "sleep 30"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = v.Admit(ctx, s, c, session.StartJob, 0)
	var be *session.BudgetError
	if !refusedBy(err, "max_concurrent_jobs") || !errors.As(err, &be) || be.Used != 1 {
		t.Errorf("a second job while one runs: %v", err)
	}
	if _, err := v.Admit(ctx, s, c, session.StartExec, 0); err != nil {
		t.Errorf("an exec while a job runs: %v", err)
	}
	if _, err := c.SignalJob(ctx, j.ID, "KILL"); err != nil {
		t.Logf("kill the job: %v", err)
	}
}

// TestBudgetUnitBackWhenHookRefuses: a command a command hook refuses
// never reaches the guest, and the unit the admit step took for it goes
// back (the pipeline's undo), so the budget's count is not spent.
func TestBudgetUnitBackWhenHookRefuses(t *testing.T) {
	m, _ := fakeManager(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m.AddCommandHook("rewind", func(_ context.Context, c *session.Command) error {
		if strings.Contains(c.Text, "refuse-me") {
			return errors.New("no point could be taken")
		}
		return nil
	})
	s, err := m.Create(ctx, "", session.CreateRequest{TTLSeconds: 600, Budget: &session.Budget{MaxExecs: n(2)}})
	if err != nil {
		t.Fatal(err)
	}
	var hr *session.HookRefused
	if _, err := m.Exec(ctx, "", s.ID, session.ExecRequest{Command: "touch marker # refuse-me"}); !errors.As(err, &hr) {
		t.Fatalf("refused by the hook: %v", err)
	}
	// Two execs still go: the refused one's unit went back.
	r, err := m.Exec(ctx, "", s.ID, session.ExecRequest{Command: "test -e marker; echo $?"})
	if err != nil || r.Stdout != "1\n" {
		t.Fatalf("the refused command ran: %+v %v", r, err)
	}
	if _, err := m.Exec(ctx, "", s.ID, session.ExecRequest{Command: "true"}); err != nil {
		t.Errorf("the second exec of two: %v (the refused one kept its unit?)", err)
	}
	if _, err := m.Exec(ctx, "", s.ID, session.ExecRequest{Command: "true"}); !refusedBy(err, "max_execs") {
		t.Errorf("a third exec of two: %v, want the budget's refusal", err)
	}
}

func TestBudgetParseDU(t *testing.T) {
	for _, tc := range []struct {
		out  string
		want int64
		ok   bool
	}{
		{"12\t/workspace\n", 12 << 10, true},
		{"du: cannot read directory '/workspace/x': Permission denied\n8\t/workspace\n", 8 << 10, true},
		{"", 0, false},
		{"many\t/workspace\n", 0, false},
		{"-4\t/workspace\n", 0, false},
		{"9007199254740993\t/workspace\n", 0, false}, // KiB past what bytes can hold
	} {
		got, ok := parseDU([]byte(tc.out))
		if got != tc.want || ok != tc.ok {
			t.Errorf("%q: %d %v, want %d %v", tc.out, got, ok, tc.want, tc.ok)
		}
	}
}

// TestBudgetAdmitStepForSiblings: a sibling's walk (session.Walk) with the
// exported admit step takes the unit, shows the admission to the later
// steps, gives the unit back when the walk stops before the command
// starts, and keeps it once it started.
func TestBudgetAdmitStepForSiblings(t *testing.T) {
	m, _ := fakeManager(t)
	ctx := context.Background()
	s, err := m.Create(ctx, "", session.CreateRequest{TTLSeconds: 600, Budget: &session.Budget{MaxExecs: n(1), MaxExecSeconds: n(9)}})
	if err != nil {
		t.Fatal(err)
	}
	errGuest := errors.New("the guest refused")
	walk := func(start bool) (*session.Admission, error) {
		var seen *session.Admission
		err := m.Walk(ctx, session.CommandProcess, "", s.ID,
			session.LoadRunningStep(),
			session.AdmitStep(session.StartExec, 30),
			session.NewStep(session.StepRun, func(_ context.Context, p session.Pipe) error {
				seen = p.Admission()
				if start {
					p.Started()
					return nil
				}
				return errGuest
			}))
		return seen, err
	}
	a, err := walk(false)
	if !errors.Is(err, errGuest) || a == nil || !a.Taken || a.Timeout != 9 || !a.Capped {
		t.Fatalf("a walk stopped in run: %+v %v, want the admission (taken, timeout capped to 9) and the run's error", a, err)
	}
	if u := m.Usage(ctx, s.ID); u.Execs != 0 {
		t.Errorf("a walk that never started kept its unit: %d execs", u.Execs)
	}
	if _, err := walk(true); err != nil {
		t.Fatal(err)
	}
	if _, err := walk(true); !refusedBy(err, "max_execs") {
		t.Errorf("a second start of one: %v", err)
	}
	if u := m.Usage(ctx, s.ID); u.Execs != 1 {
		t.Errorf("execs %d, want the started one", u.Execs)
	}
}
