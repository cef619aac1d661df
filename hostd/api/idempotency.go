package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"paddock.dev/paddock/errdefs"
	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/store"
)

var errIdemMismatch = errdefs.New(errdefs.ErrIdempotencyMismatch, "this Idempotency-Key was used with a different request")

// errIdemInFlight answers a retry whose first request still runs after
// idemWait: retry later to get its answer.
var errIdemInFlight = errdefs.WithCode(errdefs.CodeIdempotencyInFlight,
	fmt.Errorf("%w: the first request with this Idempotency-Key is still running; retry later for its answer", errdefs.ErrConflict))

// maxIdemKey bounds an Idempotency-Key header.
const maxIdemKey = 255

// recorder keeps what a handler wrote, to store it with the key.
type recorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (r *recorder) WriteHeader(code int) { r.status = code; r.ResponseWriter.WriteHeader(code) }
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}

type storedResponse struct {
	Status int    `json:"status"`
	Body   []byte `json:"body"` // exactly as first sent
}

// idemWait is how long a request waits for the first request with its
// Idempotency-Key to end before it answers 409 idempotency_in_flight.
// A var so a test can shorten it.
var idemWait = 10 * time.Second

// The most retries that may wait for their first request at once: per
// caller (the admin, a tenant, a session token) and on the whole daemon.
// A retry past either answers 409 idempotency_in_flight at once, as one
// that waited the whole idemWait does, so a client cannot pin goroutines,
// connections and store reads by sending many copies of a slow request.
const (
	maxIdemWaitersPerCaller = 16
	maxIdemWaiters          = 512
)

// idemFlights tells a request that found its key reserved when the first
// request with that key (on this daemon) ends, and counts the retries
// waiting. The zero value is ready.
type idemFlights struct {
	mu sync.Mutex
	m  map[string]chan struct{}
	// waiting counts the waiting retries per caller; total, all of them.
	waiting map[string]int
	total   int
}

// wait takes a waiter's place for caller; ok is false when the caller or
// the daemon has as many waiting as it may. done gives the place back.
func (f *idemFlights) wait(caller string) (done func(), ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.total >= maxIdemWaiters || f.waiting[caller] >= maxIdemWaitersPerCaller {
		return nil, false
	}
	if f.waiting == nil {
		f.waiting = map[string]int{}
	}
	f.waiting[caller]++
	f.total++
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.total--
		if f.waiting[caller]--; f.waiting[caller] <= 0 {
			delete(f.waiting, caller)
		}
	}, true
}

// begin marks id (scope and key) as running here; the returned func ends
// it, waking whoever waits.
func (f *idemFlights) begin(id string) (end func()) {
	ch := make(chan struct{})
	f.mu.Lock()
	if f.m == nil {
		f.m = map[string]chan struct{}{}
	}
	f.m[id] = ch
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		if f.m[id] == ch {
			delete(f.m, id)
		}
		f.mu.Unlock()
		close(ch)
	}
}

// ended is closed when id's running request ends; nil when none runs here.
func (f *idemFlights) ended(id string) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m[id]
}

// idempotent wraps a JSON route: a retry with the same Idempotency-Key and
// body replays the first 2xx answer; a different body is 422. A retry
// that comes while the first request still runs waits for it (up to
// idemWait): it then replays the first's answer, or, when the first
// failed and gave its key back, runs itself; still running after the
// wait, it is 409 with code idempotency_in_flight, as it is at once when
// its caller or the daemon has too many retries waiting already
// (maxIdemWaitersPerCaller, maxIdemWaiters). Keys live 24 hours.
func (s *Server) idempotent(h handler) handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		key := r.Header.Get("Idempotency-Key")
		if key == "" {
			return h(w, r)
		}
		if len(key) > maxIdemKey {
			return fmt.Errorf("%w: Idempotency-Key is longer than %d characters", session.ErrBadRequest, maxIdemKey)
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, bodyLimit(r)+1))
		if err != nil {
			return fmt.Errorf("%w: reading the body: %v", session.ErrBadRequest, err)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		sum := sha256.Sum256(append([]byte(r.Method+" "+r.URL.Path+"\n"), body...))
		hash := hex.EncodeToString(sum[:])
		// Keys are the caller's own: another caller's key never replays.
		caller := auth.ActorOf(r.Context())
		scope := caller + " " + r.Pattern + " " + r.PathValue("id")
		st := s.sessions.Store()
		ctx := r.Context()
		deadline := time.NewTimer(idemWait)
		defer deadline.Stop()
		// stopWaiting gives back the waiter's place this request holds
		// (nil: none), when it stops waiting however it ends.
		var stopWaiting func()
		defer func() {
			if stopWaiting != nil {
				stopWaiting()
			}
		}()
		for {
			err := st.PutIdempotency(ctx, store.Idempotency{Scope: scope, Key: key, RequestHash: hash})
			if err == nil {
				break // the key is this request's: run it
			}
			if !errors.Is(err, store.ErrConflict) {
				return err
			}
			prev, err := st.GetIdempotency(ctx, scope, key)
			switch {
			case errors.Is(err, store.ErrNotFound):
				// The first request failed and gave the key back between
				// the reservation and this read: try to take it again.
				select {
				case <-deadline.C:
					return errIdemInFlight
				default:
					continue
				}
			case err != nil:
				return err
			case prev.RequestHash != hash:
				return errIdemMismatch
			case prev.Done:
				var sr storedResponse
				if err := json.Unmarshal(prev.Response, &sr); err != nil {
					return err
				}
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Idempotent-Replayed", "true")
				w.WriteHeader(sr.Status)
				w.Write(sr.Body)
				return nil
			}
			// The first request still runs: wait for it to end, then look
			// again. A first request that is not this daemon's (left by a
			// daemon that stopped mid-request) is looked at again now and
			// then until the wait ends. Only so many wait at once.
			if stopWaiting == nil {
				done, ok := s.idem.wait(caller)
				if !ok {
					return errIdemInFlight
				}
				stopWaiting = done
			}
			var ended <-chan struct{} = s.idem.ended(scope + "\x00" + key)
			poll := time.NewTimer(250 * time.Millisecond)
			select {
			case <-ended:
			case <-poll.C:
			case <-deadline.C:
				poll.Stop()
				return errIdemInFlight
			case <-ctx.Done():
				poll.Stop()
				return ctx.Err()
			}
			poll.Stop()
		}
		if stopWaiting != nil { // it waited, and now runs itself
			stopWaiting()
			stopWaiting = nil
		}
		defer s.idem.begin(scope + "\x00" + key)()
		rec := &recorder{ResponseWriter: w}
		herr := h(rec, r)
		bg := context.WithoutCancel(ctx)
		if herr != nil || rec.status/100 != 2 {
			// Only a success is remembered; the key can be used again.
			st.DeleteIdempotency(bg, scope, key)
			return herr
		}
		resp, _ := json.Marshal(storedResponse{Status: rec.status, Body: rec.body.Bytes()})
		if err := st.CompleteIdempotency(bg, scope, key, resp); err != nil {
			s.log.Warn("store idempotent response", "err", err)
		}
		return nil
	}
}
