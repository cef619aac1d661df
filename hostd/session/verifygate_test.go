package session_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"paddock.dev/paddock/errdefs"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/session/sessiontest"
)

// TestVerifyLedgerIsShared: verifies of one session asked while one runs
// share its answer (the ledger is read once); a tenant runs at most two at
// once and the third is refused with 429; the daemon runs at most four.
func TestVerifyLedgerIsShared(t *testing.T) {
	m := sessiontest.New(t)
	ctx := context.Background()
	mk := func(tenant string) *session.Session {
		s, err := m.Create(ctx, tenant, session.CreateRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a1, a2, a3 := mk("ta"), mk("ta"), mk("ta")
	b1, b2, c1 := mk("tb"), mk("tb"), mk("tc")

	var runs atomic.Int32
	started := make(chan string, 16)
	joined := make(chan string, 16)
	release := make(chan struct{})
	m.SetVerifyHook(func(id string, join bool) {
		if join {
			joined <- id
			return
		}
		runs.Add(1)
		started <- id
		select { // bounded, so a broken cap fails the test instead of hanging it
		case <-release:
		case <-time.After(5 * time.Second):
		}
	})

	// Eight callers of a1 at once: one verify.
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	verify := func(tenant, id string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := m.VerifyLedger(ctx, tenant, id)
			if err == nil && !res.OK {
				err = errors.New("not ok: " + res.Detail)
			}
			errs <- err
		}()
	}
	for range 8 {
		verify("ta", a1.ID)
	}
	<-started
	for i := range 7 { // the other seven wait for the first one's verify
		select {
		case <-joined:
		case <-time.After(10 * time.Second):
			close(release)
			t.Fatalf("only %d of seven callers joined the running verify", i)
		}
	}
	verify("", a2.ID) // the admin's call counts against the session's tenant
	<-started
	if _, err := m.VerifyLedger(ctx, "ta", a3.ID); !errors.Is(err, errdefs.ErrTooManyRequests) {
		t.Errorf("a third verify for the tenant: %v, want too many requests", err)
	}
	verify("tb", b1.ID)
	<-started
	verify("tb", b2.ID)
	<-started
	if _, err := m.VerifyLedger(ctx, "tc", c1.ID); !errors.Is(err, errdefs.ErrTooManyRequests) {
		t.Errorf("a fifth verify on the daemon: %v, want too many requests", err)
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a verify: %v", err)
		}
	}
	if n := runs.Load(); n != 4 {
		t.Errorf("the ledger was verified %d times, want 4 (eight callers of one session share one)", n)
	}
	// Once they end, the caps are free again.
	if res, err := m.VerifyLedger(ctx, "ta", a3.ID); err != nil || !res.OK {
		t.Errorf("a verify after the others ended: %+v, %v", res, err)
	}
}
