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
	one, three := int64(1), int64(3)
	d, s, base := liveSession(t, apiv1.CreateRequest{Budget: &apiv1.Budget{MaxChildren: &one, MaxExecs: &three}})
	c := d.Client
	ctx := context.Background()
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

// TestSpeculateCapLive: a target keeps at most MaxChangesetsPerTarget
// changesets; with all of them pending a speculation is 409
// changesets_full and runs nothing, and once one is decided the next
// speculation takes its place.
func TestSpeculateCapLive(t *testing.T) {
	d, s, base := liveSession(t, apiv1.CreateRequest{})
	c := d.Client
	ctx := context.Background()
	req := apiv1.SpeculateRequest{Command: "echo a > a", Paths: []string{"."}}
	var first apiv1.Changeset
	for i := range apiv1.MaxChangesetsPerTarget {
		var cs apiv1.Changeset
		if st, _ := call(t, d, d.Token, "POST", base+"/speculate", req, &cs); st != 201 {
			t.Fatalf("speculation %d: %d", i, st)
		}
		if i == 0 {
			first = cs
		}
	}
	before, _ := c.GetSession(ctx, s.ID)
	if st, code := call(t, d, d.Token, "POST", base+"/speculate", req, nil); st != 409 || code != "changesets_full" {
		t.Fatalf("a speculation with %d pending: %d %s", apiv1.MaxChangesetsPerTarget, st, code)
	}
	if after, _ := c.GetSession(ctx, s.ID); after.Usage.Execs != before.Usage.Execs || after.Usage.Children != before.Usage.Children {
		t.Errorf("a refused speculation ran: usage %+v then %+v", before.Usage, after.Usage)
	}
	call(t, d, d.Token, "POST", base+"/changesets/"+first.ID+"/decide", apiv1.ChangesetDecision{Decision: "reject"}, nil)
	if st, _ := call(t, d, d.Token, "POST", base+"/speculate", req, nil); st != 201 {
		t.Fatalf("a speculation after one was decided: %d", st)
	}
	var list apiv1.ChangesetList
	call(t, d, d.Token, "GET", base+"/changesets", nil, &list)
	if len(list.Changesets) != apiv1.MaxChangesetsPerTarget || list.Changesets[0].ID == first.ID {
		t.Errorf("%d changesets kept, the first %s (the decided one was %s)", len(list.Changesets), list.Changesets[0].ID, first.ID)
	}
}

// TestSpeculateApplyBudgetLive: apply goes through the files routes'
// budget: a changeset larger than what max_workspace_bytes leaves is
// refused (403 budget_exceeded) before any of its files is written.
func TestSpeculateApplyBudgetLive(t *testing.T) {
	limit := int64(64 << 10)
	d, s, base := liveSession(t, apiv1.CreateRequest{Budget: &apiv1.Budget{MaxWorkspaceBytes: &limit}})
	c := d.Client
	var cs apiv1.Changeset
	if st, _ := call(t, d, d.Token, "POST", base+"/speculate", apiv1.SpeculateRequest{
		Command: "echo a > a.txt && head -c 40000 /dev/zero > b.bin && head -c 40000 /dev/zero > c.bin", Paths: []string{"."}}, &cs); st != 201 {
		t.Fatalf("speculate: %d", st)
	}
	call(t, d, d.Token, "POST", base+"/changesets/"+cs.ID+"/decide", apiv1.ChangesetDecision{Decision: "approve"}, nil)
	if st, code := call(t, d, d.Token, "POST", base+"/changesets/"+cs.ID+"/apply", nil, nil); st != 403 || code != "budget_exceeded" {
		t.Errorf("apply past max_workspace_bytes: %d %s, want 403 budget_exceeded", st, code)
	}
	if out := daemontest.Sh(t, c, s.ID, "ls -A "+s.Workspace.Path+" | wc -l"); out != "0\n" {
		t.Errorf("a refused apply wrote %s files", out)
	}
}

// TestSpeculateLimitsLive: a changeset lists at most MaxChangesetFiles
// files and keeps at most MaxChangesetBytes of contents; past either it
// is incomplete (listed files past the bytes without content).
func TestSpeculateLimitsLive(t *testing.T) {
	d, _, base := liveSession(t, apiv1.CreateRequest{})
	var many apiv1.Changeset
	if st, _ := call(t, d, d.Token, "POST", base+"/speculate", apiv1.SpeculateRequest{
		Command: "mkdir many && cd many && seq 2001 | xargs touch", Paths: []string{"many"}}, &many); st != 201 {
		t.Fatalf("speculate 2001 files: %d", st)
	}
	if len(many.Files) != apiv1.MaxChangesetFiles || many.Complete {
		t.Errorf("2001 files: %d listed, complete %v; want %d and false", len(many.Files), many.Complete, apiv1.MaxChangesetFiles)
	}
	var big apiv1.Changeset
	if st, _ := call(t, d, d.Token, "POST", base+"/speculate", apiv1.SpeculateRequest{
		Command: "mkdir big && cd big && for i in $(seq 17); do head -c 1048576 /dev/urandom > f$i; done", Paths: []string{"big"}}, &big); st != 201 {
		t.Fatalf("speculate 17 MiB: %d", st)
	}
	kept, omitted := 0, 0
	for _, f := range big.Files {
		if f.ContentOmitted {
			omitted++
		} else if len(f.Content) == 1<<20 {
			kept++
		}
	}
	if kept != apiv1.MaxChangesetBytes>>20 || omitted != 1 || big.Complete {
		t.Errorf("17 files of 1 MiB: %d kept, %d omitted, complete %v; want 16, 1, false", kept, omitted, big.Complete)
	}
}
