package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/internal/testutil"
)

// execOut runs command in session id and returns its trimmed stdout.
func execOut(t *testing.T, c *client.Client, id, command string) string {
	t.Helper()
	r, err := c.Exec(context.Background(), id, session.ExecRequest{Command: command})
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("exec %q in %s: %+v %v", command, id, r, err)
	}
	return strings.TrimSpace(string(r.Stdout))
}

// counterValue reads the counter a job keeps in /workspace/count.
func counterValue(t *testing.T, c *client.Client, id string) int {
	t.Helper()
	n, err := strconv.Atoi(execOut(t, c, id, "cat /workspace/count"))
	if err != nil {
		t.Fatalf("counter of %s: %v", id, err)
	}
	return n
}

// TestForkLive, on procbox through a real daemon: a counter runs as a
// job; a fork into 2 goes ahead (no 409); the children start from the
// disk state with no counter, and the answer names the job not carried;
// the parent's counter keeps going; identity unique gives each child a
// host name and machine id of its own, preserve the parent's; from a
// checkpoint tag starts from that state; the limits are refused.
func TestForkLive(t *testing.T) {
	testutil.RequiresRoot(t)
	d := newTestDaemon(t)
	ctx := context.Background()
	s, err := d.c.CreateSession(ctx, session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.c.DeleteSession(ctx, s.ID)
	p := sp(s.ID)
	execOut(t, d.c, s.ID, "echo A > /workspace/state")
	if _, err := d.c.Checkpoint(ctx, s.ID, -1, session.CheckpointRequest{Tag: "ck-a"}); err != nil {
		t.Fatal(err)
	}
	execOut(t, d.c, s.ID, "echo B > /workspace/state")
	var j session.Job
	const counter = "i=0; while :; do i=$((i+1)); echo $i > /workspace/count; sleep 0.1; done"
	if code := call(t, d.url, "POST", p+"/jobs", map[string]any{"command": counter}, &j); code != 201 {
		t.Fatalf("counter job: %d", code)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if r, err := d.c.Exec(ctx, s.ID, session.ExecRequest{Command: "cat /workspace/count"}); err == nil && r.ExitCode == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the counter never wrote")
		}
	}

	fr, err := d.c.ForkWith(ctx, s.ID, -1, session.ForkRequest{Count: 2, Identity: "unique"})
	if err != nil {
		t.Fatalf("fork while the counter runs: %v, want it to go ahead", err)
	}
	for _, k := range fr.Children {
		defer d.c.DeleteSession(ctx, k.ID)
	}
	if len(fr.Children) != 2 || fr.Memory || fr.Identity != "unique" {
		t.Fatalf("fork answer: %+v", fr)
	}
	if len(fr.NotCarried) != 1 || fr.NotCarried[0].Job != j.ID || fr.NotCarried[0].Command != counter || fr.NotCarried[0].Reason == "" {
		t.Errorf("not_carried: %+v, want job %s with its command", fr.NotCarried, j.ID)
	}
	parentHost := execOut(t, d.c, s.ID, "hostname")
	parentMID := execOut(t, d.c, s.ID, "cat /etc/machine-id")
	hosts, mids := map[string]bool{parentHost: true}, map[string]bool{parentMID: true}
	for i, k := range fr.Children {
		// The child has the disk state: the files, the counter's value at
		// the fork, and no counter running.
		if got := execOut(t, d.c, k.ID, "cat /workspace/state"); got != "B" {
			t.Errorf("child %s state: %q, want B", k.ID, got)
		}
		c1 := counterValue(t, d.c, k.ID)
		time.Sleep(700 * time.Millisecond)
		if c2 := counterValue(t, d.c, k.ID); c2 != c1 {
			t.Errorf("child %s counter moved %d → %d: a disk fork carried the job", k.ID, c1, c2)
		}
		var jobs struct {
			Jobs []session.Job `json:"jobs"`
		}
		if code := call(t, d.url, "GET", sp(k.ID)+"/jobs", nil, &jobs); code != 200 {
			t.Errorf("child jobs: %d", code)
		}
		for _, cj := range jobs.Jobs {
			if cj.State == "running" {
				t.Errorf("child %s has a running job %s", k.ID, cj.ID)
			}
		}
		// Identity: its own, as the answer says.
		h, mid := execOut(t, d.c, k.ID, "hostname"), execOut(t, d.c, k.ID, "cat /etc/machine-id")
		if hosts[h] || mids[mid] || mid == "" {
			t.Errorf("child %s identity %q %q is not its own (parent %q %q)", k.ID, h, mid, parentHost, parentMID)
		}
		hosts[h], mids[mid] = true, true
		if id := fr.Identities[i]; id.Session != k.ID || id.Hostname != h || id.MachineID != mid {
			t.Errorf("identities[%d] = %+v, the child says %q %q", i, id, h, mid)
		}
	}
	// The parent's counter kept going.
	c1 := counterValue(t, d.c, s.ID)
	time.Sleep(700 * time.Millisecond)
	if c2 := counterValue(t, d.c, s.ID); c2 <= c1 {
		t.Errorf("the parent's counter stopped: %d → %d", c1, c2)
	}

	// preserve: the parent's host name and machine id.
	pr, err := d.c.ForkWith(ctx, s.ID, -1, session.ForkRequest{Count: 1, Identity: "preserve"})
	if err != nil {
		t.Fatalf("fork preserve: %v", err)
	}
	defer d.c.DeleteSession(ctx, pr.Children[0].ID)
	if h, mid := execOut(t, d.c, pr.Children[0].ID, "hostname"), execOut(t, d.c, pr.Children[0].ID, "cat /etc/machine-id"); h != parentHost || mid != parentMID {
		t.Errorf("preserve child identity %q %q, want the parent's %q %q", h, mid, parentHost, parentMID)
	}

	// from a checkpoint tag: that state, and the checkpoint stays.
	fa, err := d.c.ForkWith(ctx, s.ID, -1, session.ForkRequest{Count: 1, From: "ck-a"})
	if err != nil {
		t.Fatalf("fork from ck-a: %v", err)
	}
	defer d.c.DeleteSession(ctx, fa.Children[0].ID)
	if got := execOut(t, d.c, fa.Children[0].ID, "cat /workspace/state"); got != "A" || fa.From != "ck-a" || fa.Identity != "best-effort" {
		t.Errorf("child from ck-a: state %q, answer %+v", got, fa)
	}
	if r, err := d.c.Exec(ctx, fa.Children[0].ID, session.ExecRequest{Command: "test -e /workspace/count"}); err != nil || r.ExitCode == 0 {
		t.Errorf("the child from ck-a has the counter's file, written after the checkpoint: %+v %v", r, err)
	}
	if _, err := d.c.Restore(ctx, fa.Children[0].ID, -1, "ck-a"); status(err) != 404 {
		t.Errorf("a child restoring its parent's checkpoint: %v, want 404", err)
	}
	// from names only the forking session's own checkpoints.
	if _, err := d.c.ForkWith(ctx, fa.Children[0].ID, -1, session.ForkRequest{Count: 1, From: "ck-a"}); status(err) != 404 {
		t.Errorf("a child forking from its parent's checkpoint: %v, want 404", err)
	}
	got, err := d.c.GetSession(ctx, s.ID)
	if err != nil || len(got.Checkpoints) != 1 || got.Checkpoints[0].Tag != "ck-a" {
		t.Errorf("the parent's checkpoints after a fork from one: %+v %v", got, err)
	}

	// Limits and bad input: nothing is created.
	before, _ := d.c.GetSession(ctx, s.ID)
	for _, tc := range []struct {
		body       map[string]any
		code       int
		errCode    string
		whatInside string
	}{
		{map[string]any{"count": 0}, 400, "invalid_argument", "count"},
		{map[string]any{"count": 33}, 400, "invalid_argument", "count"},
		{map[string]any{"count": 1, "identity": "clone"}, 400, "fork_identity_unknown", "identity"},
		{map[string]any{"count": 1, "identity": strings.Repeat("x", 5000)}, 400, "fork_identity_unknown", "identity"},
		{map[string]any{"count": 1, "from": "no-such"}, 404, "not_found", "no-such"},
		{map[string]any{"count": 1, "from": "../x"}, 400, "invalid_argument", "from"},
	} {
		var e struct{ Error, Code string }
		if code := call(t, d.url, "POST", p+"/fork", tc.body, &e); code != tc.code || e.Code != tc.errCode || !strings.Contains(e.Error, tc.whatInside) {
			t.Errorf("fork %v: %d %+v, want %d %s", tc.body, code, e, tc.code, tc.errCode)
		}
	}
	after, _ := d.c.GetSession(ctx, s.ID)
	if len(after.Children) != len(before.Children) {
		t.Errorf("refused forks made children: %v → %v", before.Children, after.Children)
	}
}

// TestForkIdentityUniqueRefused: a fork asking for unique identities on
// a backend that cannot show them (the fake backend has no host name or
// machine id of its own to read) is 409 fork_identity_not_unique, and
// keeps no child; best-effort forks and says why in identity_note.
func TestForkIdentityUniqueRefused(t *testing.T) {
	d := fakeDaemon(t)
	ctx := context.Background()
	s, err := d.c.CreateSession(ctx, session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.c.DeleteSession(ctx, s.ID)
	var e struct{ Error, Code string }
	if code := call(t, d.url, "POST", sp(s.ID)+"/fork", map[string]any{"count": 2, "identity": "unique"}, &e); code != 409 || e.Code != "fork_identity_not_unique" {
		t.Errorf("unique on the fake backend: %d %+v, want 409 fork_identity_not_unique", code, e)
	}
	got, _ := d.c.GetSession(ctx, s.ID)
	if len(got.Children) != 0 || got.Usage.Children != 0 {
		t.Errorf("a refused unique fork kept children: %v (usage %d)", got.Children, got.Usage.Children)
	}
	// preserve needs the parent's identity, which the fake has none of.
	if code := call(t, d.url, "POST", sp(s.ID)+"/fork", map[string]any{"count": 1, "identity": "preserve"}, &e); code != 409 || !strings.Contains(e.Error, "preserve") {
		t.Errorf("preserve on the fake backend: %d %+v, want 409 naming preserve", code, e)
	}
	if got, _ := d.c.GetSession(ctx, s.ID); len(got.Children) != 0 {
		t.Errorf("a refused preserve fork kept children: %v", got.Children)
	}
	fr, err := d.c.ForkWith(ctx, s.ID, -1, session.ForkRequest{Count: 1})
	if err != nil || len(fr.Children) != 1 || fr.IdentityNote == "" {
		t.Fatalf("best-effort on the fake backend: %+v %v, want a child and a note", fr, err)
	}
	d.c.DeleteSession(ctx, fr.Children[0].ID)
}

// TestEventsSinceAndVMEventsLive, on procbox: events?since= answers only
// what is newer, vm_events holds the machine's boot, checkpoint, fork,
// stop and death (the sandbox killed behind the daemon's back), and the
// trajectory merges them with the ledger.
func TestEventsSinceAndVMEventsLive(t *testing.T) {
	testutil.RequiresRoot(t)
	d := newTestDaemon(t)
	ctx := context.Background()
	s, err := d.c.CreateSession(ctx, session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.c.DeleteSession(ctx, s.ID)
	if _, err := d.c.Checkpoint(ctx, s.ID, -1, session.CheckpointRequest{Tag: "one"}); err != nil {
		t.Fatal(err)
	}
	kids, err := d.c.Fork(ctx, s.ID, -1, 1)
	if err != nil {
		t.Fatal(err)
	}
	all, err := d.c.EventsSince(ctx, s.ID, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	kinds := func(evs []apiv1.VMEvent) string {
		var ks []string
		for _, e := range evs {
			ks = append(ks, e.Kind)
		}
		return strings.Join(ks, ",")
	}
	if got := kinds(all.VMEvents); got != "boot,checkpoint,fork" {
		t.Errorf("vm_events: %s, want boot,checkpoint,fork", got)
	}
	mark := all.Ledger[len(all.Ledger)-1].Time
	if last := all.VMEvents[len(all.VMEvents)-1].Time; last.After(mark) {
		mark = last
	}
	time.Sleep(10 * time.Millisecond)
	execOut(t, d.c, s.ID, "echo after")
	if _, err := d.c.Checkpoint(ctx, s.ID, -1, session.CheckpointRequest{Tag: "two"}); err != nil {
		t.Fatal(err)
	}
	newer, err := d.c.EventsSince(ctx, s.ID, mark)
	if err != nil {
		t.Fatal(err)
	}
	var lk []string
	for _, e := range newer.Ledger {
		if !e.Time.After(mark) {
			t.Errorf("since %s answered an entry of %s", mark, e.Time)
		}
		lk = append(lk, e.Kind)
	}
	if strings.Join(lk, ",") != "exec,checkpoint" || kinds(newer.VMEvents) != "checkpoint" {
		t.Errorf("since the fork: ledger %v, vm %s; want exec,checkpoint and checkpoint", lk, kinds(newer.VMEvents))
	}
	// A since past everything answers nothing; a bad one is 400.
	future := url.QueryEscape(time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	var empty apiv1.Events
	if code := call(t, d.url, "GET", sp(s.ID)+"/events?since="+future, nil, &empty); code != 200 || len(empty.Ledger) != 0 || len(empty.VMEvents) != 0 {
		t.Errorf("since the future: %d %+v", code, empty)
	}
	var e struct{ Error, Code string }
	if code := call(t, d.url, "GET", sp(s.ID)+"/events?since=yesterday", nil, &e); code != 400 || e.Code != "invalid_argument" {
		t.Errorf("since=yesterday: %d %+v, want 400", code, e)
	}

	// The trajectory merges them in time order.
	var tr apiv1.Trajectory
	if code := call(t, d.url, "GET", sp(s.ID)+"/trajectory", nil, &tr); code != 200 {
		t.Fatalf("trajectory: %d", code)
	}
	vm := 0
	for i, st := range tr.Steps {
		if st.Step != i+1 || (i > 0 && st.Time.Before(tr.Steps[i-1].Time)) {
			t.Errorf("step %d out of order: %+v", i, st)
		}
		if st.Source == "vm" {
			vm++
		}
	}
	if vm != 4 {
		t.Errorf("trajectory has %d vm steps, want 4 (boot, checkpoint, fork, checkpoint)", vm)
	}

	// The child: its boot; then death when its sandbox is killed.
	ke, err := d.c.EventsSince(ctx, kids[0].ID, time.Time{})
	if err != nil || kinds(ke.VMEvents) != "boot" {
		t.Fatalf("child vm events: %+v %v", ke, err)
	}
	testutil.KillSandbox(t, kids[0].SandboxID)
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		ke, err = d.c.EventsSince(ctx, kids[0].ID, time.Time{})
		if err == nil && kinds(ke.VMEvents) == "boot,death" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no death event for a killed sandbox: %+v %v", ke, err)
		}
	}
	// Delete: stop.
	if err := d.c.DeleteSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	de, err := d.c.EventsSince(ctx, s.ID, time.Time{})
	if err != nil || !strings.HasSuffix(kinds(de.VMEvents), ",stop") {
		t.Errorf("after delete: %+v %v, want a stop last", de, err)
	}
	// The events stream with ?since= replays only the newer entries (the
	// session has ended, so the stream sends them and ends).
	q := "/events/stream?since=" + url.QueryEscape(mark.Format(time.RFC3339Nano))
	req, _ := http.NewRequest("GET", d.url+sp(s.ID)+q, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var streamed, streamedVM []string
	for _, ev := range readSSE(t, resp) {
		switch ev.name {
		case "ledger":
			var e apiv1.LedgerEntry
			json.Unmarshal([]byte(ev.data), &e)
			streamed = append(streamed, e.Kind)
		case "vm":
			var e apiv1.VMEvent
			json.Unmarshal([]byte(ev.data), &e)
			if ev.id != "" {
				t.Errorf("a vm event with an event id %q (Last-Event-ID is a ledger seq)", ev.id)
			}
			streamedVM = append(streamedVM, e.Kind)
		}
	}
	resp.Body.Close()
	if len(streamed) < 3 || streamed[0] != "exec" || streamed[1] != "checkpoint" || streamed[len(streamed)-1] != "session.delete" {
		t.Errorf("events/stream since the fork: %v, want exec, checkpoint … session.delete", streamed)
	}
	if strings.Join(streamedVM, ",") != "checkpoint,stop" {
		t.Errorf("events/stream vm events since the fork: %v, want checkpoint,stop", streamedVM)
	}
	if code := call(t, d.url, "GET", sp(s.ID)+"/events/stream?since=soon", nil, &e); code != 400 {
		t.Errorf("events/stream?since=soon: %d, want 400", code)
	}
}

// TestOOMEventLive: a command that runs its sandbox out of memory leaves
// an oom vm event (procbox counts its cgroup's OOM kills).
func TestOOMEventLive(t *testing.T) {
	testutil.RequiresRoot(t)
	d := newTestDaemon(t)
	ctx := context.Background()
	s, err := d.c.CreateSession(ctx, session.CreateRequest{Runtime: session.Runtime{MemoryMB: 64}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.c.DeleteSession(ctx, s.ID)
	runOutOfMemory(t, d, s.ID)
	waitOOMEvents(t, d, s.ID, 1, 10*time.Second)
}

// runOutOfMemory runs in session id a command that needs more memory
// than the session has, and checks the kernel killed it.
func runOutOfMemory(t *testing.T, d *testDaemon, id string) {
	t.Helper()
	// tail keeps a line it has not finished in memory: 512 MiB of zeros
	// with no newline pass the session's memory.
	r, err := d.c.Exec(context.Background(), id, session.ExecRequest{Command: "head -c 536870912 /dev/zero | tail -n 1 >/dev/null", TimeoutSeconds: 120})
	if err != nil || r.ExitCode == 0 {
		t.Fatalf("the command that eats memory: %+v %v", r, err)
	}
}

// waitOOMEvents waits up to wait for session id to have n oom events,
// each saying how many processes were killed, and returns them.
func waitOOMEvents(t *testing.T, d *testDaemon, id string, n int, wait time.Duration) []apiv1.VMEvent {
	t.Helper()
	for deadline := time.Now().Add(wait); ; time.Sleep(200 * time.Millisecond) {
		ev, err := d.c.EventsSince(context.Background(), id, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		var ooms []apiv1.VMEvent
		var kinds []string
		for _, e := range ev.VMEvents {
			kinds = append(kinds, e.Kind)
			if e.Kind == "oom" {
				ooms = append(ooms, e)
			}
		}
		if len(ooms) > n {
			t.Fatalf("%d oom events, want %d: %s", len(ooms), n, strings.Join(kinds, ","))
		}
		if len(ooms) == n {
			for _, e := range ooms {
				var data struct {
					Killed int64 `json:"killed"`
				}
				if err := json.Unmarshal(e.Data, &data); err != nil || data.Killed < 1 {
					t.Errorf("oom event data %s: %v", e.Data, err)
				}
			}
			return ooms
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d oom events, want %d: %s", len(ooms), n, strings.Join(kinds, ","))
		}
	}
}

// TestForkAndEventsAccess, on the fake backend: another tenant's session
// is 404 to fork (with identity and from) and to events?since; a session
// token with read gets its own session's events since a time, vm events
// included, and may not fork (403).
func TestForkAndEventsAccess(t *testing.T) {
	d := fakeDaemon(t)
	toks := withTenants(t, d, "acme", "beta")
	ctx := context.Background()
	acme, beta := client.New(d.url, toks["acme"]), client.New(d.url, toks["beta"])
	sa, err := acme.CreateSession(ctx, session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	defer d.c.DeleteSession(ctx, sa.ID)
	if _, err := acme.Checkpoint(ctx, sa.ID, -1, session.CheckpointRequest{Tag: "t"}); err != nil {
		t.Fatal(err)
	}
	if _, err := beta.ForkWith(ctx, sa.ID, -1, session.ForkRequest{Count: 1, From: "t", Identity: "preserve"}); status(err) != 404 {
		t.Errorf("beta forking acme's session: %v, want 404", err)
	}
	if _, err := beta.EventsSince(ctx, sa.ID, time.Now().Add(-time.Hour)); status(err) != 404 {
		t.Errorf("beta reading acme's events since: %v, want 404", err)
	}
	tok, err := acme.MintToken(ctx, sa.ID, apiv1.TokenRequest{Ops: []string{"read"}})
	if err != nil {
		t.Fatal(err)
	}
	st := client.New(d.url, tok.Token)
	ev, err := st.EventsSince(ctx, sa.ID, time.Now().Add(-time.Hour))
	if err != nil || len(ev.Ledger) == 0 || len(ev.VMEvents) != 2 || ev.VMEvents[0].Kind != "boot" || ev.VMEvents[1].Kind != "checkpoint" {
		t.Errorf("a read token's events since: %+v %v, want the ledger and boot, checkpoint", ev, err)
	}
	if _, err := st.ForkWith(ctx, sa.ID, -1, session.ForkRequest{Count: 1}); status(err) != 403 {
		t.Errorf("a session token forking: %v, want 403", err)
	}
	kids, err := acme.ForkWith(ctx, sa.ID, -1, session.ForkRequest{Count: 1, From: "t"})
	if err != nil || len(kids.Children) != 1 || kids.Children[0].Tenant != "acme" {
		t.Fatalf("acme forking its own session from t: %+v %v", kids, err)
	}
	d.c.DeleteSession(ctx, kids.Children[0].ID)
}

// TestRewindVMEventsLive, on procbox: a rewind point is a checkpoint of
// the machine and an undo a restore and a boot, in vm_events like the
// lifecycle routes' own.
func TestRewindVMEventsLive(t *testing.T) {
	testutil.RequiresRoot(t)
	d := newTestDaemon(t)
	ctx := context.Background()
	s, err := d.c.CreateSession(ctx, session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.c.DeleteSession(ctx, s.ID)
	if code := call(t, d.url, "POST", sp(s.ID)+"/rewind/config", map[string]any{"enabled": true}, nil); code != 200 {
		t.Fatalf("rewind config: %d", code)
	}
	execOut(t, d.c, s.ID, "echo x > /workspace/a")
	var e struct{ Error, Code string }
	if code := call(t, d.url, "POST", sp(s.ID)+"/rewind/undo", map[string]any{"steps": 1}, &e); code != 200 {
		t.Fatalf("undo: %d %+v", code, e)
	}
	ev, err := d.c.EventsSince(ctx, s.ID, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var ks []string
	for _, v := range ev.VMEvents {
		ks = append(ks, v.Kind)
	}
	if got := strings.Join(ks, ","); got != "boot,checkpoint,restore,boot" {
		t.Errorf("vm events of a point and an undo: %s, want boot,checkpoint,restore,boot", got)
	}
}
