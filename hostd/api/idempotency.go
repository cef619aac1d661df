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

	"paddock.dev/paddock/errdefs"
	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/store"
)

var errIdemMismatch = errdefs.New(errdefs.ErrIdempotencyMismatch, "this Idempotency-Key was used with a different request")

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

// idempotent wraps a JSON route: a retry with the same Idempotency-Key and
// body replays the first 2xx answer; a different body is 422; a key whose
// first request is still running is 409. Keys live 24 hours.
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
		scope := auth.ActorOf(r.Context()) + " " + r.Pattern + " " + r.PathValue("id")
		st := s.sessions.Store()
		ctx := r.Context()
		if err := st.PutIdempotency(ctx, store.Idempotency{Scope: scope, Key: key, RequestHash: hash}); errors.Is(err, store.ErrConflict) {
			prev, err := st.GetIdempotency(ctx, scope, key)
			if err != nil {
				return err
			}
			switch {
			case prev.RequestHash != hash:
				return errIdemMismatch
			case !prev.Done:
				return fmt.Errorf("%w: the first request with this Idempotency-Key is still running", session.ErrConflict)
			}
			var sr storedResponse
			if err := json.Unmarshal(prev.Response, &sr); err != nil {
				return err
			}
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Idempotent-Replayed", "true")
			w.WriteHeader(sr.Status)
			w.Write(sr.Body)
			return nil
		} else if err != nil {
			return err
		}
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
