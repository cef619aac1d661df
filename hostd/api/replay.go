package api

import (
	"bytes"
	"encoding/json"
	"net/http"

	"paddock.dev/paddock/hostd/replay"
)

// replayRoutes registers the replay of a session's commands in another
// (hostd/replay).
func (s *Server) replayRoutes(bind func(string, handler)) {
	bind("POST /v1/agents/sessions/{id}/replay", s.replay)
}

func (s *Server) replay(w http.ResponseWriter, r *http.Request) error {
	var req replay.Request
	if err := decode(w, r, &req); err != nil {
		return err
	}
	out, err := s.svc.Replay.Replay(r.Context(), tenant(r), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	if out.StopErr != nil && out.Result.Stopped != nil {
		// The step the target did not run: its answer, exactly as the
		// target's exec route would have written it (a 403 refusal with
		// its rule, a 428 hold with its approval, ...).
		rec := &bodyRecorder{header: http.Header{}}
		s.writeError(rec, r, out.StopErr)
		out.Result.Stopped.Status = rec.status
		if json.Valid(rec.body.Bytes()) {
			out.Result.Stopped.Body = json.RawMessage(bytes.TrimSpace(rec.body.Bytes()))
		}
	}
	writeJSON(w, http.StatusOK, out.Result)
	return nil
}

// bodyRecorder is a ResponseWriter that keeps what is written to it.
type bodyRecorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bodyRecorder) Header() http.Header { return b.header }

func (b *bodyRecorder) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}

func (b *bodyRecorder) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}
