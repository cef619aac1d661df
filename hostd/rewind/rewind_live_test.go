package rewind_test

// Live tests: a real daemon (hostd/daemon/daemontest) running procbox
// sandboxes (root needed; skipped otherwise), driven through the API with
// the Go SDK.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
	"paddock.dev/paddock/hostd/daemon/daemontest"
	"paddock.dev/paddock/hostd/ledger"
	"paddock.dev/paddock/internal/testutil"
)

func liveDaemon(t *testing.T) *daemontest.Daemon {
	t.Helper()
	return daemontest.New(t, daemontest.WithImage(testutil.MiniImageName, testutil.MiniImages(t)))
}

func newSession(t *testing.T, c *client.Client) *api.Session {
	t.Helper()
	return sessionOn(t, c, api.Runtime{})
}

// sessionOn makes a session of rt and checks it runs on rt's backend,
// when rt names one.
func sessionOn(t *testing.T, c *client.Client, rt api.Runtime) *api.Session {
	t.Helper()
	s, err := c.CreateSession(context.Background(), api.CreateRequest{TTLSeconds: 900, Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	if rt.Backend != "" && s.Backend != rt.Backend {
		t.Fatalf("the session runs on %q, want %q", s.Backend, rt.Backend)
	}
	return s
}

func ptr[T any](v T) *T { return &v }

func mustExec(t *testing.T, c *client.Client, id, cmd string) *api.ExecResult {
	t.Helper()
	r, err := c.Exec(context.Background(), id, api.ExecRequest{Command: cmd})
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("exec %q: %+v %v", cmd, r, err)
	}
	return r
}

func clientErr(err error) *client.Error {
	var e *client.Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

func kinds(t *testing.T, d *daemontest.Daemon, id string) map[string]int {
	t.Helper()
	es, err := d.Ledger().List(context.Background(), id, 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, e := range es {
		out[e.Kind]++
	}
	return out
}

func ledgerOf(t *testing.T, d *daemontest.Daemon, id string) []ledger.Entry {
	t.Helper()
	es, err := d.Ledger().List(context.Background(), id, 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func pointTags(rw *api.Rewind) string {
	var out []string
	for _, p := range rw.Points {
		tag := p.Tag
		if p.Pinned {
			tag += "*"
		}
		out = append(out, tag)
	}
	return strings.Join(out, ",")
}

// TestRewindUndoLive: an `rm -rf` of the workspace is undone. Points are
// taken by the pipeline's hook before each exec (and not when rewind is
// off), they do not change the revision, an undo restores the machine
// and drops the point it went back to and the newer ones, and the limits
// answer 400 or 409 with a message saying what to do.
func TestRewindUndoLive(t *testing.T) {
	d := liveDaemon(t)
	c := d.Client
	ctx := context.Background()
	s := newSession(t, c)

	// Off by default: no point is taken.
	mustExec(t, c, s.ID, "mkdir -p /workspace/app && echo v1 > /workspace/app/main.txt")
	if rw, err := c.Rewind(ctx, s.ID); err != nil || rw.Config.Enabled || len(rw.Points) != 0 || rw.Config.MaxPoints != 10 {
		t.Fatalf("rewind before config: %+v %v", rw, err)
	}

	// The limits.
	for _, tc := range []struct {
		req    api.RewindConfigRequest
		status int
		want   string
	}{
		{api.RewindConfigRequest{MaxPoints: ptr(51)}, 400, "max_points 51 must be from 1 to 50"},
		{api.RewindConfigRequest{MaxPoints: ptr(0)}, 400, "max_points 0"},
		{api.RewindConfigRequest{Triggers: []string{"exec", "boot"}}, 400, `trigger "boot" is unknown`},
		{api.RewindConfigRequest{Triggers: []string{}}, 400, "triggers must name"},
	} {
		_, err := c.RewindConfig(ctx, s.ID, tc.req)
		if e := clientErr(err); e == nil || e.Status != tc.status || !strings.Contains(e.Message, tc.want) {
			t.Errorf("config %+v: %v, want %d %q", tc.req, err, tc.status, tc.want)
		}
	}

	rw, err := c.RewindConfig(ctx, s.ID, api.RewindConfigRequest{Enabled: ptr(true), MaxPoints: ptr(5)})
	if err != nil || !rw.Config.Enabled || rw.Config.MaxPoints != 5 || strings.Join(rw.Config.Triggers, ",") != "exec" {
		t.Fatalf("config: %+v %v", rw, err)
	}
	before, err := c.GetSession(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, c, s.ID, "echo v2 >> /workspace/app/main.txt")
	mustExec(t, c, s.ID, "rm -rf /workspace/app")
	if r := mustExec(t, c, s.ID, "ls /workspace/app 2>&1 || true"); !strings.Contains(r.Stdout, "No such file") {
		t.Fatalf("rm -rf did not remove the workspace: %q", r.Stdout)
	}
	after, err := c.GetSession(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after.Revision != before.Revision {
		t.Errorf("points changed the revision: %d -> %d", before.Revision, after.Revision)
	}
	rw, err = c.Rewind(ctx, s.ID)
	if err != nil || len(rw.Points) != 3 {
		t.Fatalf("points after 3 execs: %+v %v", rw, err)
	}
	if p := rw.Points[1]; p.Tag != "rw-2" || p.Command != "rm -rf /workspace/app" || p.Trigger != "exec" || p.Memory {
		t.Errorf("the rm point: %+v", p)
	}

	// Steps past the ring: a clear 409.
	_, err = c.RewindUndo(ctx, s.ID, api.RewindUndoRequest{Steps: 4})
	if e := clientErr(err); e == nil || e.Status != 409 || !strings.Contains(e.Message, "steps 4 goes past the oldest point") || !strings.Contains(e.Message, "3 rewind points") {
		t.Errorf("undo 4 of 3: %v", err)
	}
	for _, tc := range []struct {
		req  api.RewindUndoRequest
		code int
	}{
		{api.RewindUndoRequest{Steps: 51}, 400},
		{api.RewindUndoRequest{Steps: -1}, 400},
		{api.RewindUndoRequest{Steps: 1, To: "rw-1"}, 400},
		{api.RewindUndoRequest{To: "../x"}, 400},
		{api.RewindUndoRequest{To: "rw-99"}, 404},
	} {
		if _, err := c.RewindUndo(ctx, s.ID, tc.req); status(err) != tc.code {
			t.Errorf("undo %+v: %v, want %d", tc.req, err, tc.code)
		}
	}

	// Undo 2: back to just before the rm (the ls after it is the last).
	u, err := c.RewindUndo(ctx, s.ID, api.RewindUndoRequest{Steps: 2})
	if err != nil || u.Restored.Tag != "rw-2" || strings.Join(u.Dropped, ",") != "rw-2,rw-3" || u.Revision <= after.Revision {
		t.Fatalf("undo 2: %+v %v", u, err)
	}
	if r := mustExec(t, c, s.ID, "cat /workspace/app/main.txt"); r.Stdout != "v1\nv2\n" {
		t.Errorf("after undo the file reads %q, want v1 v2", r.Stdout)
	}
	// That exec took a new point; the ring is rw-1 and rw-4.
	if rw, err = c.Rewind(ctx, s.ID); err != nil || pointTags(rw) != "rw-1,rw-4" {
		t.Errorf("points after the undo and one exec: %q %v", pointTags(rw), err)
	}
	k := kinds(t, d, s.ID)
	if k["rewind.point"] != 4 || k["rewind.undo"] != 1 || k["rewind.config"] != 1 {
		t.Errorf("ledger kinds: %v", k)
	}
	// The exec's own entry names its point.
	var noted bool
	for _, e := range ledgerOf(t, d, s.ID) {
		if e.Kind == "exec" && strings.Contains(string(e.Data), `"rewind_point":"rw-2"`) {
			noted = true
		}
	}
	if !noted {
		t.Error("the rm's exec entry does not name its rewind point")
	}

	// Off: no more points, and the ring stays.
	if _, err := c.RewindConfig(ctx, s.ID, api.RewindConfigRequest{Enabled: ptr(false)}); err != nil {
		t.Fatal(err)
	}
	mustExec(t, c, s.ID, "true")
	if rw, err = c.Rewind(ctx, s.ID); err != nil || pointTags(rw) != "rw-1,rw-4" {
		t.Errorf("points with rewind off: %q %v", pointTags(rw), err)
	}
}

func status(err error) int {
	if e := clientErr(err); e != nil {
		return e.Status
	}
	return 0
}

// TestRewindPinsLive: a pinned point survives the ring's eviction and an
// undo that goes past it; a pin that would leave no free slot is 409, and
// so is lowering max_points under the pins.
func TestRewindPinsLive(t *testing.T) {
	rewindPinsLive(t, liveDaemon(t), api.Runtime{})
}

// rewindPinsLive is the body of the pin tests, in a session of rt on d.
func rewindPinsLive(t *testing.T, d *daemontest.Daemon, rt api.Runtime) {
	c := d.Client
	ctx := context.Background()
	s := sessionOn(t, c, rt)
	if _, err := c.RewindConfig(ctx, s.ID, api.RewindConfigRequest{Enabled: ptr(true), MaxPoints: ptr(3)}); err != nil {
		t.Fatal(err)
	}
	mustExec(t, c, s.ID, "echo one > /workspace/f")
	if p, err := c.RewindPin(ctx, s.ID, "rw-1", true); err != nil || !p.Pinned {
		t.Fatalf("pin rw-1: %+v %v", p, err)
	}
	for i := 2; i <= 5; i++ {
		mustExec(t, c, s.ID, fmt.Sprintf("echo %d >> /workspace/f", i))
	}
	rw, err := c.Rewind(ctx, s.ID)
	if err != nil || pointTags(rw) != "rw-1*,rw-4,rw-5" {
		t.Fatalf("after 5 execs in a ring of 3 with rw-1 pinned: %q %v", pointTags(rw), err)
	}
	if rw.Points[0].Memory != s.Capabilities.MemoryCheckpoint {
		t.Errorf("the pinned point: memory %v, the backend's memory checkpoints %v", rw.Points[0].Memory, s.Capabilities.MemoryCheckpoint)
	}
	if _, err := c.RewindPin(ctx, s.ID, "rw-4", true); err != nil {
		t.Fatalf("a second pin in a ring of 3: %v", err)
	}
	_, err = c.RewindPin(ctx, s.ID, "rw-5", true)
	if e := clientErr(err); e == nil || e.Status != 409 || !strings.Contains(e.Message, "no free slot") {
		t.Errorf("a pin that fills the ring: %v", err)
	}
	_, err = c.RewindConfig(ctx, s.ID, api.RewindConfigRequest{MaxPoints: ptr(2)})
	if e := clientErr(err); e == nil || e.Status != 409 || !strings.Contains(e.Message, "at least 3") {
		t.Errorf("max_points under the pins: %v", err)
	}
	if _, err := c.RewindPin(ctx, s.ID, "rw-9", true); status(err) != 404 {
		t.Errorf("pin of an unknown point: %v", err)
	}
	// Undo to rw-1: rw-4 is pinned and kept, rw-5 dropped; rw-1 itself,
	// pinned, stays too.
	u, err := c.RewindUndo(ctx, s.ID, api.RewindUndoRequest{To: "rw-1"})
	if err != nil || strings.Join(u.Dropped, ",") != "rw-5" || strings.Join(u.Kept, ",") != "rw-1,rw-4" {
		t.Fatalf("undo to rw-1: %+v %v", u, err)
	}
	if r := mustExec(t, c, s.ID, "cat /workspace/f 2>&1 || true"); !strings.Contains(r.Stdout, "No such file") {
		t.Errorf("after undo to rw-1 (before the first write) f reads %q", r.Stdout)
	}
	// The kept pinned point still restores: rw-4 is the machine before
	// the 4th write.
	if _, err := c.RewindPin(ctx, s.ID, "rw-1", false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RewindUndo(ctx, s.ID, api.RewindUndoRequest{To: "rw-4"}); err != nil {
		t.Fatal(err)
	}
	if r := mustExec(t, c, s.ID, "cat /workspace/f"); r.Stdout != "one\n2\n3\n" {
		t.Errorf("after undo to the pinned rw-4, f reads %q", r.Stdout)
	}
}

// TestRewindBisectLive: 16 commands, the 11th breaks a test; bisect names
// it with about log2(n)+2 restores, and the session ends where it started
// (its files as they were, the ring untouched).
func TestRewindBisectLive(t *testing.T) {
	rewindBisectLive(t, liveDaemon(t), api.Runtime{})
}

// rewindBisectLive is the body of the bisect tests, in a session of rt
// on d.
func rewindBisectLive(t *testing.T, d *daemontest.Daemon, rt api.Runtime) {
	c := d.Client
	ctx := context.Background()
	s := sessionOn(t, c, rt)
	if _, err := c.RewindConfig(ctx, s.ID, api.RewindConfigRequest{Enabled: ptr(true), MaxPoints: ptr(20)}); err != nil {
		t.Fatal(err)
	}
	const breaking = 11
	for i := 1; i <= 16; i++ {
		cmd := fmt.Sprintf("echo step-%d >> /workspace/log", i)
		if i == breaking {
			cmd = "echo BROKEN > /workspace/flag"
		}
		mustExec(t, c, s.ID, cmd)
	}
	before, err := c.Rewind(ctx, s.ID)
	if err != nil || len(before.Points) != 16 {
		t.Fatalf("16 points: %+v %v", before, err)
	}
	for _, p := range before.Points {
		if p.Memory != s.Capabilities.MemoryCheckpoint {
			t.Fatalf("point %s: memory %v, the backend's memory checkpoints %v", p.Tag, p.Memory, s.Capabilities.MemoryCheckpoint)
		}
	}
	const test = "! test -e /workspace/flag"
	// The ends agree: 409.
	_, err = c.RewindBisect(ctx, s.ID, api.RewindBisectRequest{Test: test, Good: "rw-1", Bad: "rw-5"})
	if e := clientErr(err); e == nil || e.Status != 409 || !strings.Contains(e.Message, "passes at rw-5") {
		t.Errorf("bisect with two good ends: %v", err)
	}
	for _, tc := range []struct {
		req  api.RewindBisectRequest
		code int
	}{
		{api.RewindBisectRequest{}, 400},
		{api.RewindBisectRequest{Test: test, TimeoutSeconds: 601}, 400},
		{api.RewindBisectRequest{Test: test, Good: "rw-5", Bad: "rw-2"}, 400},
		{api.RewindBisectRequest{Test: test, Good: "rw-77"}, 404},
	} {
		if _, err := c.RewindBisect(ctx, s.ID, tc.req); status(err) != tc.code {
			t.Errorf("bisect %+v: %v, want %d", tc.req, err, tc.code)
		}
	}

	t0 := time.Now()
	b, err := c.RewindBisect(ctx, s.ID, api.RewindBisectRequest{Test: test})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("bisect on %s took %v: %+v", s.Backend, time.Since(t0), b)
	if b.Command != "echo BROKEN > /workspace/flag" || b.Point != fmt.Sprintf("rw-%d", breaking) ||
		b.LastGood != "rw-11" || b.FirstBad != "rw-12" {
		t.Errorf("bisect named %+v, want the 11th command", b)
	}
	// 17 states: the bad end is now (no restore), then the good end and
	// ceil(log2(16)) = 4 midpoints, and the final restore.
	if limit := int(math.Ceil(math.Log2(17))) + 2; b.Restores > limit || b.Restores < 2 {
		t.Errorf("restores %d, want at most %d", b.Restores, limit)
	}
	if len(b.Tested) < 3 || b.Tested[0].State != "now" || b.Tested[0].Passed {
		t.Errorf("tested: %+v", b.Tested)
	}
	// The session is where it started.
	if r := mustExec(t, c, s.ID, "cat /workspace/flag; tail -n1 /workspace/log"); r.Stdout != "BROKEN\nstep-16\n" {
		t.Errorf("after the bisect the workspace reads %q", r.Stdout)
	}
	after, err := c.Rewind(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The exec just above took one more point; the 16 are as they were.
	if len(after.Points) != 17 || pointTags(&api.Rewind{Points: after.Points[:16]}) != pointTags(before) {
		t.Errorf("the ring changed: %q, was %q", pointTags(after), pointTags(before))
	}
	if k := kinds(t, d, s.ID); k["rewind.bisect"] != 1 || k["restore"] != 0 {
		t.Errorf("ledger: %v", k)
	}
}
