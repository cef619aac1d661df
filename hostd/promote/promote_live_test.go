package promote_test

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/daemon/daemontest"
)

// code is the API's code of err ("" when err is not an API error).
func code(err error) string {
	var ce *client.Error
	if errors.As(err, &ce) {
		return ce.Code
	}
	return ""
}

func status(err error) int {
	var ce *client.Error
	if errors.As(err, &ce) {
		return ce.Status
	}
	return 0
}

func paths(cs []apiv1.PromoteChange) string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Op+":"+c.Path)
	}
	return strings.Join(out, ",")
}

// TestPromoteLive is the promotion on procbox through a real daemon: a
// child edits, adds (a large file too) and deletes files and changes a
// mode; the parent changes one of the same files, which is a conflict;
// the dry run shows it all, a stale plan_id is 409, the apply with
// skip_conflicts carries the rest, both ledgers record it, and restoring
// the pre-promote checkpoint gives the parent back.
func TestPromoteLive(t *testing.T) {
	d := daemontest.New(t)
	c := d.Client
	ctx := context.Background()
	parent, err := c.CreateSession(ctx, apiv1.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ws := parent.Workspace.Path
	daemontest.Sh(t, c, parent.ID, "cd "+ws+" && echo one > a.txt && echo two > b.txt && echo run > c.sh && echo base > both.txt && mkdir -p keep && echo k > keep/k.txt")

	kids, err := c.Fork(ctx, parent.ID, -1, 1)
	if err != nil || len(kids) != 1 {
		t.Fatalf("fork: %v %v", kids, err)
	}
	child := kids[0].ID
	daemontest.Sh(t, c, child, "cd "+ws+" && echo ONE > a.txt && rm b.txt && chmod 0755 c.sh && mkdir -p new/deep && echo fresh > new/deep/n.txt && echo child > both.txt && ln -s a.txt link && head -c 9437185 /dev/urandom > big.bin")
	daemontest.Sh(t, c, parent.ID, "cd "+ws+" && echo parent > both.txt")

	dry, err := c.Promote(ctx, child, apiv1.PromoteRequest{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := paths(dry.Plan.Apply), "modified:a.txt,deleted:b.txt,added:big.bin,modified:c.sh,added:new/deep/n.txt"; got != want {
		t.Errorf("apply %s, want %s", got, want)
	}
	if len(dry.Plan.Conflicts) != 1 || dry.Plan.Conflicts[0].Path != "both.txt" {
		t.Errorf("conflicts %+v, want both.txt", dry.Plan.Conflicts)
	}
	if dry.Plan.Untouched != 1 || dry.PlanID == "" || !dry.DryRun || dry.Checkpoint != "" || len(dry.Applied) != 0 {
		t.Errorf("dry run: %+v", dry)
	}
	if !slices.ContainsFunc(dry.NotCarried, func(n apiv1.NotCarried) bool { return n.What == "not_regular_file" && n.Path == "link" }) ||
		!slices.ContainsFunc(dry.NotCarried, func(n apiv1.NotCarried) bool { return n.What == "memory" }) {
		t.Errorf("not_carried %+v: want the link and memory", dry.NotCarried)
	}
	// The dry run changed nothing.
	if out := daemontest.Sh(t, c, parent.ID, "cat "+ws+"/a.txt; ls "+ws); out != "one\na.txt\nb.txt\nboth.txt\nc.sh\nkeep\n" {
		t.Errorf("the parent after a dry run: %q", out)
	}

	// A conflict refuses the whole promotion, with nothing written.
	if _, err := c.Promote(ctx, child, apiv1.PromoteRequest{PlanID: dry.PlanID}); code(err) != "promote_conflicts" || !strings.Contains(err.Error(), "both.txt") {
		t.Fatalf("promote with a conflict: %v (code %q)", err, code(err))
	}
	if out := daemontest.Sh(t, c, parent.ID, "cat "+ws+"/a.txt"); out != "one\n" {
		t.Errorf("a refused promotion wrote a.txt: %q", out)
	}

	// The child changes again: the reviewed plan is stale.
	daemontest.Sh(t, c, child, "echo later > "+ws+"/later.txt")
	if _, err := c.Promote(ctx, child, apiv1.PromoteRequest{PlanID: dry.PlanID, SkipConflicts: true}); code(err) != "plan_changed" || status(err) != 409 {
		t.Fatalf("promote with a stale plan_id: %v (code %q)", err, code(err))
	}
	dry2, err := c.Promote(ctx, child, apiv1.PromoteRequest{DryRun: true})
	if err != nil || dry2.PlanID == dry.PlanID {
		t.Fatalf("second dry run: %v, plan %s (first %s)", err, dry2.PlanID, dry.PlanID)
	}

	res, err := c.Promote(ctx, child, apiv1.PromoteRequest{PlanID: dry2.PlanID, SkipConflicts: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Checkpoint, "pre-promote-"+child+"-") || len(res.Applied) != 6 || !slices.Equal(res.Skipped, []string{"both.txt"}) {
		t.Errorf("apply of %s: checkpoint %q applied %v skipped %v", child, res.Checkpoint, res.Applied, res.Skipped)
	}
	// The parent has the child's changes, modes and the big file's bytes,
	// and kept its own both.txt.
	want := "ONE\n|0755|fresh\n|parent\n|later\n|k\n"
	got := daemontest.Sh(t, c, parent.ID, "cd "+ws+" && test ! -e b.txt && test ! -e link && printf '%s|%s|%s|%s|%s|%s\\n' \"$(cat a.txt)\" \"$(stat -c %a c.sh | sed 's/^/0/')\" \"$(cat new/deep/n.txt)\" \"$(cat both.txt)\" \"$(cat later.txt)\" \"$(cat keep/k.txt)\" | sed 's/|/\\n|/g'")
	if strings.ReplaceAll(got, "\n", "") != strings.ReplaceAll(want, "\n", "") {
		t.Errorf("the parent after the promotion: %q, want %q", got, want)
	}
	if p, ch := daemontest.Sh(t, c, parent.ID, "sha256sum "+ws+"/big.bin | cut -d' ' -f1"), daemontest.Sh(t, c, child, "sha256sum "+ws+"/big.bin | cut -d' ' -f1"); p != ch {
		t.Errorf("big.bin differs: parent %s child %s", p, ch)
	}
	// Promoting again finds it all applied.
	again, err := c.Promote(ctx, child, apiv1.PromoteRequest{DryRun: true})
	if err != nil || len(again.Plan.Apply) != 0 || len(again.Plan.AlreadyApplied) != 6 {
		t.Errorf("after the promotion: %v apply %s already %s", err, paths(again.Plan.Apply), paths(again.Plan.AlreadyApplied))
	}

	// Ledgered on both sides.
	if !ledgered(t, c, parent.ID, "promote", child) || !ledgered(t, c, child, "promote.out", parent.ID) {
		t.Error("promote / promote.out missing from the ledgers")
	}

	// Restoring the checkpoint gives the parent back.
	if _, err := c.Restore(ctx, parent.ID, -1, res.Checkpoint); err != nil {
		t.Fatal(err)
	}
	if out := daemontest.Sh(t, c, parent.ID, "cd "+ws+" && cat a.txt b.txt both.txt && ls"); out != "one\ntwo\nparent\na.txt\nb.txt\nboth.txt\nc.sh\nkeep\n" {
		t.Errorf("the parent after restoring %s: %q", res.Checkpoint, out)
	}
}

func ledgered(t *testing.T, c *client.Client, id, kind, names string) bool {
	t.Helper()
	es, err := c.Events(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if e.Kind == kind && strings.Contains(string(e.Data), names) {
			return true
		}
	}
	t.Logf("%s's ledger has no %s naming %s", id, kind, names)
	return false
}

// TestPromoteRefusals holds the route's refusals through a real daemon:
// a session that is no fork child, a session token, another tenant's
// child, a job running on either side, paths outside the workspace, a
// malformed plan_id, and the limit of changes (hit with 2001 files, then
// passed by naming a part of them).
func TestPromoteRefusals(t *testing.T) {
	tenants, toks := daemontest.TenantTokens(t, "a", "b")
	tokA, tokB := toks[0], toks[1]
	d := daemontest.New(t, tenants)
	ctx := context.Background()
	a := client.New(d.URL, tokA)
	b := client.New(d.URL, tokB)

	parent, err := a.CreateSession(ctx, apiv1.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ws := parent.Workspace.Path
	if _, err := a.Promote(ctx, parent.ID, apiv1.PromoteRequest{DryRun: true}); code(err) != "not_fork_child" || status(err) != 409 {
		t.Errorf("promote of a session that is no fork child: %v (code %q)", err, code(err))
	}
	kids, err := a.Fork(ctx, parent.ID, -1, 1)
	if err != nil {
		t.Fatal(err)
	}
	child := kids[0].ID

	if _, err := b.Promote(ctx, child, apiv1.PromoteRequest{DryRun: true}); status(err) != 404 {
		t.Errorf("another tenant's child: %v, want 404", err)
	}
	tok, err := a.MintToken(ctx, child, apiv1.TokenRequest{Ops: auth.GrantableOps()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.New(d.URL, tok.Token).Promote(ctx, child, apiv1.PromoteRequest{DryRun: true}); status(err) != 403 {
		t.Errorf("a session token with every op: %v, want 403", err)
	}
	for _, req := range []apiv1.PromoteRequest{
		{DryRun: true, Paths: []string{"/etc"}},
		{DryRun: true, Paths: []string{"../x"}},
		{DryRun: true, Paths: make([]string, apiv1.MaxPromotePaths+1)},
		{DryRun: true, PlanID: "not-a-plan"},
	} {
		if _, err := a.Promote(ctx, child, req); status(err) != 400 {
			t.Errorf("promote %+v: %v, want 400", req, err)
		}
	}

	// A job on either side refuses it; so does the promotion refuse to
	// start commands while... (the hold is tested in the core).
	for _, id := range []string{child, parent.ID} {
		var job struct{ ID string }
		if err := a.Call(ctx, "POST", id, "/jobs", nil, apiv1.JobStart{Command: "sleep 30"}, &job); err != nil {
			t.Fatal(err)
		}
		_, err := a.Promote(ctx, child, apiv1.PromoteRequest{DryRun: true})
		if status(err) != 409 || !strings.Contains(err.Error(), "commands are running") {
			t.Errorf("promote while a job runs on %s: %v", id, err)
		}
		if err := a.Call(ctx, "DELETE", id, "/jobs/"+job.ID, nil, nil, nil); err != nil {
			t.Fatal(err)
		}
		waitNoJobs(t, a, id)
	}

	// 2001 changes: too many at once; a directory of them fits.
	daemontest.Sh(t, a, child, "cd "+ws+" && mkdir -p x y && for i in $(seq 1 1001); do echo $i > x/$i; done && for i in $(seq 1 1000); do echo $i > y/$i; done")
	if _, err := a.Promote(ctx, child, apiv1.PromoteRequest{DryRun: true}); code(err) != "promote_too_large" {
		t.Errorf("2001 changes: %v (code %q)", err, code(err))
	}
	res, err := a.Promote(ctx, child, apiv1.PromoteRequest{Paths: []string{ws + "/y"}})
	if err != nil || len(res.Applied) != 1000 {
		t.Fatalf("promote of y/: %v (%d applied)", err, len(res.Applied))
	}
	if out := daemontest.Sh(t, a, parent.ID, "ls "+ws+"/y | wc -l; test ! -e "+ws+"/x && echo no-x"); out != "1000\nno-x\n" {
		t.Errorf("the parent after promoting y/: %q", out)
	}

	// An attacker's child: the parent's workspace has a link to a
	// directory outside it; the child makes that a real directory with a
	// file in it, hoping the promotion writes through the parent's link.
	daemontest.Sh(t, a, parent.ID, "mkdir -p /tmp/outside && ln -s /tmp/outside "+ws+"/out")
	kids, err = a.Fork(ctx, parent.ID, -1, 1)
	if err != nil {
		t.Fatal(err)
	}
	daemontest.Sh(t, a, kids[0].ID, "cd "+ws+" && rm out && mkdir out && echo planted > out/evil")
	res, err = a.Promote(ctx, kids[0].ID, apiv1.PromoteRequest{SkipConflicts: true})
	if err != nil || len(res.Applied) != 0 || !slices.Equal(res.Skipped, []string{"out/evil"}) {
		t.Fatalf("promote through the parent's link: %v %+v", err, res)
	}
	if out := daemontest.Sh(t, a, parent.ID, "ls -A /tmp/outside; echo end"); out != "end\n" {
		t.Errorf("the promotion wrote outside the parent's workspace: %q", out)
	}
}

// waitNoJobs waits until session id runs no job.
func waitNoJobs(t *testing.T, c *client.Client, id string) {
	t.Helper()
	for i := 0; i < 100; i++ {
		var jobs struct {
			Jobs []struct{ State string } `json:"jobs"`
		}
		if err := c.Call(context.Background(), "GET", id, "/jobs", nil, nil, &jobs); err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(jobs.Jobs, func(j struct{ State string }) bool { return j.State == "running" }) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("jobs of %s still run", id)
}

// TestPromoteIncomplete: a write the parent's agent refuses midway (a
// directory the guest user may not write in on the parent's side) stops
// the promotion with promote_incomplete, saying how many paths were
// applied and naming the checkpoint, and restoring that checkpoint undoes
// them.
func TestPromoteIncomplete(t *testing.T) {
	d := daemontest.New(t)
	c := d.Client
	ctx := context.Background()
	parent, err := c.CreateSession(ctx, apiv1.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ws := parent.Workspace.Path
	if out := daemontest.Sh(t, c, parent.ID, "id -u"); out == "0\n" {
		t.Skip("the guest user is root here: no directory refuses it")
	}
	daemontest.Sh(t, c, parent.ID, "cd "+ws+" && echo one > a && mkdir ro && chmod 555 ro")
	kids, err := c.Fork(ctx, parent.ID, -1, 1)
	if err != nil {
		t.Fatal(err)
	}
	daemontest.Sh(t, c, kids[0].ID, "cd "+ws+" && echo ONE > a && chmod 755 ro && echo x > ro/x && echo z > z")
	_, err = c.Promote(ctx, kids[0].ID, apiv1.PromoteRequest{})
	if code(err) != "promote_incomplete" || status(err) != 502 || !strings.Contains(err.Error(), "after 1 of 3 paths") {
		t.Fatalf("promote with a refused write: %v (code %q)", err, code(err))
	}
	tag := regexp.MustCompile(`restore checkpoint (pre-promote-\S+) of`).FindStringSubmatch(err.Error())
	if tag == nil {
		t.Fatalf("the error names no checkpoint: %v", err)
	}
	if out := daemontest.Sh(t, c, parent.ID, "cat "+ws+"/a; test ! -e "+ws+"/z && echo no-z"); out != "ONE\nno-z\n" {
		t.Errorf("the parent after the stop: %q", out)
	}
	if !ledgered(t, c, parent.ID, "promote", "stopped at ro/x") {
		t.Error("the stopped promotion is not ledgered on the parent")
	}
	if _, err := c.Restore(ctx, parent.ID, -1, tag[1]); err != nil {
		t.Fatal(err)
	}
	if out := daemontest.Sh(t, c, parent.ID, "cat "+ws+"/a"); out != "one\n" {
		t.Errorf("the parent after restoring %s: %q", tag[1], out)
	}
}
