package rewind

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"paddock.dev/paddock/hostd/ledger"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/store"
)

// TestStopDoesNotWaitForTheRing: the stop hook may run on the goroutine
// that holds the session's ring (an undo whose load finds the session
// expired runs the sweep, which runs the stop hooks); it must return at
// once and forget the ring, not wait for itself.
func TestStopDoesNotWaitForTheRing(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "paddock.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s := &Service{m: session.New(session.Config{Store: st, Ledger: ledger.New(st)}), rings: map[string]*ring{}}
	r := s.ringOf("ses-1", true)
	r.on.Store(true)
	r.mu.Lock() // the caller holds the ring, as Undo does
	done := make(chan struct{})
	go func() {
		s.stopped(context.Background(), "ses-1", session.StopExpired)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the stop hook waits for the ring its caller holds")
	}
	if s.ringOf("ses-1", false) != nil || r.on.Load() {
		t.Error("the stopped session's ring is still there, or still on")
	}
	r.mu.Unlock()
}
