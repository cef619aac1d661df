package speculate_test

import (
	"context"
	"testing"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/hostd/daemon/daemontest"
)

// TestSpeculateBudgetLive: a speculation costs what an exec costs (it is
// counted in usage.execs and refused once max_execs is spent) and its
// copy is a fork child (refused once max_children is spent), so it is no
// way around the session's budget; the copy is deleted afterwards.
func TestSpeculateBudgetLive(t *testing.T) {
	d := daemontest.New(t)
	c := d.Client
	ctx := context.Background()
	one, three := int64(1), int64(3)
	s, err := c.CreateSession(ctx, apiv1.CreateRequest{Budget: &apiv1.Budget{MaxChildren: &one, MaxExecs: &three}})
	if err != nil {
		t.Fatal(err)
	}
	base := "/v1/agents/sessions/" + s.ID
	req := apiv1.SpeculateRequest{Command: "echo a > a", Paths: []string{"."}}
	var cs apiv1.Changeset
	if st, _ := call(t, d, d.Token, "POST", base+"/speculate", req, &cs); st != 201 {
		t.Fatalf("first speculation: %d", st)
	}
	got, err := c.GetSession(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Usage.Execs != 1 || got.Usage.Children != 1 {
		t.Errorf("usage after a speculation: execs %d children %d, want 1 and 1", got.Usage.Execs, got.Usage.Children)
	}
	// The copy is gone.
	all, _ := c.ListAllSessions(ctx)
	for _, x := range all {
		if x.Parent == s.ID && x.State != "deleted" {
			t.Errorf("the copy %s is still %s", x.ID, x.State)
		}
	}
	if st, code := call(t, d, d.Token, "POST", base+"/speculate", req, nil); st != 403 || code != "budget_exceeded" {
		t.Errorf("a speculation past max_children: %d %s, want 403 budget_exceeded", st, code)
	}
}
