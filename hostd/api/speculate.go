package api

import (
	"net/http"

	"paddock.dev/paddock/hostd/speculate"
)

// speculateRoutes registers speculation and changesets (hostd/speculate),
// the same set on sessions and on sandboxes.
func (s *Server) speculateRoutes(bind func(string, handler)) {
	for _, x := range []struct{ prefix, kind string }{
		{"/v1/agents/sessions/{id}", speculate.KindSession},
		{"/v1/sandboxes/{id}", speculate.KindSandbox},
	} {
		kind := x.kind
		bind("POST "+x.prefix+"/speculate", func(w http.ResponseWriter, r *http.Request) error {
			var req speculate.Request
			if err := decode(w, r, &req); err != nil {
				return err
			}
			cs, err := s.svc.Speculate.Speculate(r.Context(), tenant(r), r.PathValue("id"), kind, req)
			if err != nil {
				return err
			}
			writeJSON(w, http.StatusCreated, cs)
			return nil
		})
		bind("GET "+x.prefix+"/changesets", func(w http.ResponseWriter, r *http.Request) error {
			out, err := s.svc.Speculate.List(r.Context(), tenant(r), r.PathValue("id"), kind)
			if err != nil {
				return err
			}
			writeJSON(w, http.StatusOK, out)
			return nil
		})
		bind("GET "+x.prefix+"/changesets/{changeset}", func(w http.ResponseWriter, r *http.Request) error {
			cs, err := s.svc.Speculate.Get(r.Context(), tenant(r), r.PathValue("id"), kind, r.PathValue("changeset"))
			if err != nil {
				return err
			}
			writeJSON(w, http.StatusOK, cs)
			return nil
		})
		bind("POST "+x.prefix+"/changesets/{changeset}/decide", func(w http.ResponseWriter, r *http.Request) error {
			var d speculate.Decision
			if err := decode(w, r, &d); err != nil {
				return err
			}
			cs, err := s.svc.Speculate.Decide(r.Context(), tenant(r), r.PathValue("id"), kind, r.PathValue("changeset"), d)
			if err != nil {
				return err
			}
			writeJSON(w, http.StatusOK, cs)
			return nil
		})
		bind("POST "+x.prefix+"/changesets/{changeset}/apply", func(w http.ResponseWriter, r *http.Request) error {
			res, err := s.svc.Speculate.Apply(r.Context(), tenant(r), r.PathValue("id"), kind, r.PathValue("changeset"))
			if err != nil {
				return err
			}
			writeJSON(w, http.StatusOK, res)
			return nil
		})
	}
}
