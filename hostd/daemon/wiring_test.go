package daemon_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
	"paddock.dev/paddock/hostd/daemon/daemontest"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/hypervisor/fake"
	"paddock.dev/paddock/policy"
)

// TestDaemonWiresEverySibling: the daemon fills every seam the core
// leaves to a sibling (approvals, budgets, the egress log, the sandbox
// hooks) and hands the API every service. Each seam fails closed when
// empty, so a wiring line lost in a refactor would not open anything,
// but would turn a feature off without a word: New refuses to start then,
// and the features answer through the daemon on the fake backend (no
// root): a session token verifies, a budgeted exec runs, an approved
// command runs with its approval.
func TestDaemonWiresEverySibling(t *testing.T) {
	d := daemontest.New(t, daemontest.WithBackends(func(state string) ([]hypervisor.Backend, error) {
		return []hypervisor.Backend{fake.New(filepath.Join(state, fake.Name))}, nil
	}))
	if u := d.Manager().Unwired(); len(u) > 0 {
		t.Errorf("the daemon's manager has empty seams: %v", u)
	}
	c, ctx := d.Client, context.Background()
	two := int64(2)
	rules := policy.ProcessRules{Allow: []string{"echo *"}, Ask: []string{"touch *"}}
	s, err := c.CreateSession(ctx, api.CreateRequest{TTLSeconds: 600, Budget: &api.Budget{MaxExecs: &two},
		Policy: &api.PolicyRequest{Process: &rules}})
	if err != nil {
		t.Fatal(err)
	}
	// The budgets service: without it a budgeted session's exec is 503.
	if r, err := c.Exec(ctx, s.ID, api.ExecRequest{Command: "echo hi"}); err != nil || r.Stdout != "hi\n" {
		t.Errorf("a budgeted exec: %+v %v", r, err)
	}
	// The tokens service, on the verifier: without it no session token
	// verifies (401).
	tok, err := c.MintToken(ctx, s.ID, api.TokenRequest{Ops: []string{"read"}})
	if err != nil {
		t.Fatal(err)
	}
	if who, err := client.New(d.URL, tok.Token).WhoAmI(ctx); err != nil || who.Session != s.ID {
		t.Errorf("whoami with a session token: %+v %v", who, err)
	}
	// The approvals service: without it an approved command is 403.
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, s.ID, api.ExecRequest{Command: "touch /workspace/approved", ApprovalWaitSeconds: 30})
		done <- err
	}()
	approved := false
	for deadline := time.Now().Add(10 * time.Second); !approved && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		as, _ := c.Approvals(ctx, s.ID)
		for _, a := range as {
			if a.State == "pending" {
				if _, err := c.Approve(ctx, s.ID, a.ID, ""); err != nil {
					t.Fatal(err)
				}
				approved = true
			}
		}
	}
	if !approved {
		t.Fatal("no pending approval")
	}
	if err := <-done; err != nil {
		t.Errorf("the approved command: %v", err)
	}
	// The promote service: a fork child's new file is in the plan.
	kids, err := c.Fork(ctx, s.ID, -1, 1)
	if err != nil {
		t.Fatal(err)
	}
	// (Written through the files routes: the child's budget has no exec left.)
	if err := c.Call(ctx, "PUT", kids[0].ID, "/files/content", nil, api.FileWrite{Path: "/workspace/new", ContentBase64: "bmV3Cg=="}, nil); err != nil {
		t.Fatal(err)
	}
	if p, err := c.Promote(ctx, kids[0].ID, api.PromoteRequest{DryRun: true}); err != nil || len(p.Plan.Apply) != 1 || p.Plan.Apply[0].Path != "new" {
		t.Errorf("a promotion's plan: %+v %v", p, err)
	}
}
