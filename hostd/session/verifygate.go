package session

import (
	"context"
	"fmt"
	"sync"
	"time"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/errdefs"
)

// Ledger verification reads and hashes a whole ledger, which is slow on a
// big one, and any reader of a session may ask for it. These caps keep a
// burst of verifies from taking the database's connections from everyone:
// one verify runs per session (callers who ask while it runs wait for it
// and share its answer), a tenant runs at most verifyPerTenant at once and
// the daemon at most verifyTotal; past a cap the call is refused with 429.
const (
	verifyPerTenant = 2
	verifyTotal     = 4
	// verifyMaxTime bounds one verify. It runs apart from the caller's
	// context (a caller who leaves must not cancel the others' answer).
	verifyMaxTime = 5 * time.Minute
)

// verifyGate holds the verifies in flight.
type verifyGate struct {
	mu        sync.Mutex
	calls     map[string]*verifyCall // session id → the verify running for it
	perTenant map[string]int
	total     int
	// hook, when set (tests only), runs for each caller: joined is false
	// for the caller whose verify reads the ledger (it runs at the start
	// of that verify), true for one who waits for a verify already running.
	hook func(id string, joined bool)
}

// verifyCall is one verify, shared by everyone who asked while it ran.
type verifyCall struct {
	done chan struct{}
	res  *apiv1.LedgerVerification
	err  error
}

// SetVerifyHook installs fn to run for every ledger verify (tests only):
// with joined false at the start of a verify that reads the ledger, with
// joined true for a caller who waits for the verify already running.
func (m *Manager) SetVerifyHook(fn func(id string, joined bool)) {
	m.verifies.mu.Lock()
	defer m.verifies.mu.Unlock()
	m.verifies.hook = fn
}

// shared runs fn for session id of tenant, or waits for the run already
// going for id; it refuses with ErrTooManyRequests when a new run would pass
// a cap.
func (g *verifyGate) shared(ctx context.Context, tenant, id string, fn func(context.Context) (*apiv1.LedgerVerification, error)) (*apiv1.LedgerVerification, error) {
	g.mu.Lock()
	if c, ok := g.calls[id]; ok {
		hook := g.hook
		g.mu.Unlock()
		if hook != nil {
			hook(id, true)
		}
		return c.wait(ctx)
	}
	switch {
	case g.perTenant[tenant] >= verifyPerTenant:
		g.mu.Unlock()
		return nil, fmt.Errorf("%w: %d ledger verifies already run for this tenant, the most allowed: wait for one to end", errdefs.ErrTooManyRequests, verifyPerTenant)
	case g.total >= verifyTotal:
		g.mu.Unlock()
		return nil, fmt.Errorf("%w: %d ledger verifies already run on this daemon, the most allowed: retry shortly", errdefs.ErrTooManyRequests, verifyTotal)
	}
	if g.calls == nil {
		g.calls, g.perTenant = map[string]*verifyCall{}, map[string]int{}
	}
	c := &verifyCall{done: make(chan struct{})}
	g.calls[id] = c
	g.perTenant[tenant]++
	g.total++
	hook := g.hook
	g.mu.Unlock()

	go func() {
		defer func() {
			g.mu.Lock()
			delete(g.calls, id)
			if g.perTenant[tenant]--; g.perTenant[tenant] <= 0 {
				delete(g.perTenant, tenant)
			}
			g.total--
			g.mu.Unlock()
			close(c.done)
		}()
		if hook != nil {
			hook(id, false)
		}
		vctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), verifyMaxTime)
		defer cancel()
		c.res, c.err = fn(vctx)
	}()
	return c.wait(ctx)
}

// wait returns the call's answer, or the caller's context error if it
// leaves first (the verify goes on for the others).
func (c *verifyCall) wait(ctx context.Context) (*apiv1.LedgerVerification, error) {
	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
