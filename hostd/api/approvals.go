package api

import (
	"errors"
	"fmt"
	"net/http"

	"paddock.dev/paddock/errdefs"
	"paddock.dev/paddock/hostd/approvals"
	"paddock.dev/paddock/hostd/session"
)

// approvalRoutes registers a session's approval requests
// (hostd/approvals): commands held by an ask rule until an
// operator decides.
func (s *Server) approvalRoutes(bind func(string, handler)) {
	bind("GET /v1/agents/sessions/{id}/approvals", s.listApprovals)
	bind("POST /v1/agents/sessions/{id}/approvals/{approval}/approve", s.decideApproval(true))
	bind("POST /v1/agents/sessions/{id}/approvals/{approval}/deny", s.decideApproval(false))
}

func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request) error {
	if s.svc.Approvals == nil {
		return errNoApprovals
	}
	out, err := s.svc.Approvals.List(r.Context(), tenant(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, approvalList{Approvals: out})
	return nil
}

type approvalList struct {
	Approvals []approvals.Approval `json:"approvals"`
}

func (s *Server) decideApproval(approve bool) handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		if s.svc.Approvals == nil {
			return errNoApprovals
		}
		var req approvals.Decision
		if err := decodeLimit(r, &req, 16<<10); err != nil {
			return err
		}
		out, err := s.svc.Approvals.Decide(r.Context(), tenant(r), r.PathValue("id"), r.PathValue("approval"), approve, req)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	}
}

// errNoApprovals answers the approval routes of a server given no
// approvals service (409).
var errNoApprovals = fmt.Errorf("%w: this daemon has no approvals service", session.ErrConflict)

// heldBody is the 428 answer of a command held for approval.
type heldBody struct {
	Error string `json:"error"`
	Code  string `json:"code"` // approval_required
	session.Hold
}

// refusedBody is the 403 answer of a command the process policy denies.
type refusedBody struct {
	Error   string `json:"error"`
	Code    string `json:"code"` // policy_refused
	Rule    string `json:"rule,omitempty"`
	Pattern string `json:"pattern,omitempty"`
	Piece   string `json:"piece,omitempty"`
}

// policyError writes the answers that carry more than a message: a held
// command (428) and a refused one (403). It reports whether it wrote.
func policyError(w http.ResponseWriter, err error) bool {
	var hold *session.Hold
	if errors.As(err, &hold) {
		writeJSON(w, http.StatusPreconditionRequired, heldBody{Error: err.Error(), Code: errdefs.Code(err), Hold: *hold})
		return true
	}
	var refused *session.ProcessRefused
	if errors.As(err, &refused) {
		d := refused.Decision
		writeJSON(w, http.StatusForbidden, refusedBody{Error: err.Error(), Code: errdefs.Code(err), Rule: d.Rule, Pattern: d.Pattern, Piece: d.Piece})
		return true
	}
	return false
}
