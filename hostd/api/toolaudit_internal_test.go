package api

import (
	"context"
	"strconv"
	"testing"
	"time"

	"paddock.dev/paddock/hostd/auth"
)

// TestToolReadBoundIsPerActor: one reader that uses up its distinct reads
// in a window does not fold another reader's reads away: the second
// reader's first read is still itemised, and the first reader's overflow
// is counted as its own (kept with its actor), not as anonymous reads.
func TestToolReadBoundIsPerActor(t *testing.T) {
	defer SetReadFold(time.Hour, 4, 4096)() // the window outlives the test
	var f readFolder
	reader := func(tenant string) (context.Context, string) {
		ctx := auth.WithIdentity(context.Background(), auth.Identity{Kind: auth.KindTenant, Tenant: tenant})
		return ctx, auth.ActorOf(ctx)
	}
	ctxA, actorA := reader("acme")
	ctxB, actorB := reader("globex")
	if actorA == actorB {
		t.Fatalf("two readers with one actor %q", actorA)
	}
	const id = "ses-0123456789abcdef"
	for i := range 10 {
		key := readKey{actor: actorA, tool: "t", route: "r", path: "/p" + strconv.Itoa(i)}
		if got, want := f.note(nil, id, key, ctxA, map[string]any{}), i < 4; got != want {
			t.Errorf("reader A's read %d itemised: %v, want %v", i, got, want)
		}
	}
	if !f.note(nil, id, readKey{actor: actorB, tool: "t", route: "r", path: "/p0"}, ctxB, map[string]any{}) {
		t.Errorf("reader B's first read was folded away after reader A used up its bound")
	}
	w := f.windows[id]
	a := w.actors[actorA]
	if a == nil || a.other != 6 || w.other != 0 {
		t.Fatalf("overflow: reader A's %+v, anonymous %d; want 6 of A's and no anonymous", a, w.other)
	}
	if got := auth.ActorOf(a.ctx); got != actorA {
		t.Errorf("reader A's overflow entry is written as %q, want %q", got, actorA)
	}
	w.timer.Stop()
}
