package session_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/grants"
	"paddock.dev/paddock/hostd/ledger"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/session/sessiontest"
	"paddock.dev/paddock/hostd/store"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/hypervisor/procbox"
	"paddock.dev/paddock/internal/testutil"
)

// plain hides the backend's Adopter side.
type plain struct{ hypervisor.Backend }

// TestReattach restarts the manager in one process: a procbox backend's
// sandboxes are adopted by the next manager, one on a backend that cannot
// adopt is recorded lost with the reason, and both are ledgered.
func TestReattach(t *testing.T) {
	testutil.RequiresRoot(t)
	ctx := context.Background()
	state := t.TempDir()
	st, err := store.Open(filepath.Join(state, "paddock.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg := hypervisor.Config{StateDir: state, GuestBinary: testutil.GuestBinary(t), ImagesDir: testutil.MiniImages(t), AdoptLeftovers: true}
	open := func(adopter bool) (*session.Manager, func()) {
		b, err := procbox.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var be hypervisor.Backend = b
		if !adopter {
			be = plain{b}
		}
		return session.New(session.Config{Store: st, Ledger: ledger.New(st), Backend: be, DefaultImage: testutil.MiniImageName}), func() { b.Close() }
	}
	m1, close1 := open(true)
	s, err := m1.Create(ctx, "", session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m1.Exec(ctx, "", s.ID, session.ExecRequest{Command: "echo kept > /workspace/f"}); err != nil {
		t.Fatal(err)
	}
	// A grant lives in the daemon's memory only: it does not survive.
	// (The grants service takes the caller from the context, and refuses
	// a grant to nobody: the admin makes this one.)
	admin := auth.WithIdentity(ctx, auth.Identity{Kind: auth.KindAdmin})
	g1 := grants.New(m1)
	if _, err := g1.Grant(admin, "", s.ID, grants.GrantRequest{Value: "Bearer s3cret", Hosts: []string{"api.example"}}); err != nil {
		t.Fatal(err)
	}
	if len(g1.GrantsFor(s.ID)) != 1 {
		t.Fatal("the grant is not live")
	}
	// (A sandbox's adoption, whose removal at its TTL is armed again, is
	// hostd/sandboxes' TestAdoptedSandboxRemovedAtTTL.)
	// A streamed command still running when the daemon stops: the next
	// daemon follows it and records it when it ends (nobody reads it).
	streamed, err := m1.StartExecStream(ctx, "", s.ID, session.ExecRequest{Command: "sleep 2; exit 4"})
	if err != nil {
		t.Fatal(err)
	}
	m1.Detach(ctx)
	close1()

	m2, close2 := open(true)
	defer close2()
	defer m2.Shutdown(ctx) // nothing outlives a failed test
	g2 := grants.New(m2)
	if adopted, lost := m2.Reattach(ctx); adopted != 1 || lost != 0 {
		t.Fatalf("reattach: adopted %d lost %d", adopted, lost)
	}
	res, err := m2.Exec(ctx, "", s.ID, session.ExecRequest{Command: "cat /workspace/f"})
	if err != nil || res.Stdout != "kept\n" {
		t.Fatalf("exec after reattach: %+v %v", res, err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		// Looked at in the ledger itself: Events settles nothing, so only
		// the manager's own follower can have made the entry.
		es, err := ledger.New(st).List(ctx, s.ID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if e := lastKind(es, "exec"); strings.Contains(e, streamed.ID) {
			if !strings.Contains(e, `"exit_code":4`) {
				t.Errorf("the streamed command's exec entry: %s, want exit code 4", e)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a streamed command that ended after the restart was not recorded")
		}
	}
	if g := g2.GrantsFor(s.ID); len(g) != 0 {
		t.Errorf("a grant survived the restart: %+v", g)
	}
	if evs, _ := m2.Events(ctx, "", s.ID); !strings.Contains(fmt.Sprint(lastKind(evs, "sandbox.adopt")), `"grants":0`) {
		t.Errorf("sandbox.adopt does not say the grants are gone: %v", lastKind(evs, "sandbox.adopt"))
	}
	// A backend that cannot adopt stops its sandboxes at shutdown (as
	// Detach does for it), and the next start says so instead of showing
	// a running session.
	m2.Shutdown(ctx)
	close2()
	m4, close4 := open(false)
	defer close4()
	defer m4.Shutdown(ctx)
	if adopted, lost := m4.Reattach(ctx); adopted != 0 || lost != 1 {
		t.Fatalf("reattach without an adopter: adopted %d lost %d", adopted, lost)
	}
	got, err := m4.Get(ctx, "", s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != session.StateLost || !strings.Contains(got.Note, "cannot adopt") {
		t.Errorf("after a restart on a backend that cannot adopt: %q %q", got.State, got.Note)
	}
	if _, err := m4.Exec(ctx, "", s.ID, session.ExecRequest{Command: "true"}); err == nil {
		t.Error("exec on a lost session worked")
	}
	evs, err := m4.Events(ctx, "", s.ID)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, e.Kind)
	}
	if k := strings.Join(kinds, ","); !strings.Contains(k, "sandbox.adopt") || !strings.Contains(k, "sandbox.lost") {
		t.Errorf("ledger kinds: %s", k)
	}
	if err := m4.Delete(ctx, "", s.ID); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob("/sys/fs/cgroup/*/paddock/" + s.SandboxID); len(left) > 0 {
		t.Errorf("cgroups left: %v", left)
	}
}

// TestSandboxDeathIsNoticed: a sandbox killed behind the daemon's back
// makes its session lost (with the reason, ledgered) within moments,
// rather than a session that looks running.
func TestSandboxDeathIsNoticed(t *testing.T) {
	ctx := context.Background()
	m := sessiontest.New(t, sessiontest.Procbox(), sessiontest.Policy(nil))
	s, err := m.Create(ctx, "", session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	testutil.KillSandbox(t, s.SandboxID)
	var got *session.Session
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if got, err = m.Get(ctx, "", s.ID); err == nil && got.State == session.StateLost {
			break
		}
	}
	if got == nil || got.State != session.StateLost || !strings.Contains(got.Note, "ended on its own") {
		t.Fatalf("after the sandbox was killed: %+v", got)
	}
	// The ledger entry follows the state change (moments later).
	var evs []ledger.Entry
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if evs, _ = m.Events(ctx, "", s.ID); len(evs) > 0 && evs[len(evs)-1].Kind == "sandbox.lost" {
			break
		}
	}
	if len(evs) == 0 || evs[len(evs)-1].Kind != "sandbox.lost" {
		t.Errorf("ledger: %+v", evs)
	}
	if left, _ := filepath.Glob("/sys/fs/cgroup/*/paddock/" + s.SandboxID); len(left) > 0 {
		t.Errorf("the dead sandbox's cgroups were not cleaned: %v", left)
	}
}

// lastKind is the data of the last ledger entry of kind, as text.
func lastKind(evs []ledger.Entry, kind string) string {
	out := ""
	for _, e := range evs {
		if e.Kind == kind {
			out = string(e.Data)
		}
	}
	return out
}
