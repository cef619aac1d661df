package api

import (
	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/hostd/approvals"
	"paddock.dev/paddock/hostd/grants"
	"paddock.dev/paddock/hostd/previews"
	"paddock.dev/paddock/hostd/rewind"
	"paddock.dev/paddock/hostd/sandboxes"
	"paddock.dev/paddock/hostd/terminals"
	"paddock.dev/paddock/hostd/tokens"
	"paddock.dev/paddock/hostd/workspace"
)

// Services are the session core's sibling packages whose routes this
// server serves. hostd/daemon makes them on the same Manager it gives New
// and hands them over with SetServices before the server serves.
type Services struct {
	Approvals *approvals.Service
	Grants    *grants.Service
	Previews  *previews.Service
	Rewind    *rewind.Service
	Sandboxes *sandboxes.Service
	Terminals *terminals.Service
	Tokens    *tokens.Service
	Workspace *workspace.Service
}

// SetServices gives the server the sibling services, serves preview
// URLs' path form (/preview/<token>/...) with the previews service, and
// has the verifier find session tokens through the tokens service. Call
// it once, before the server serves.
func (s *Server) SetServices(svc Services) {
	s.svc = svc
	if svc.Tokens != nil {
		s.verifier.SetSessionTokens(svc.Tokens)
	}
	if svc.Previews != nil {
		s.mux.Handle(apiv1.PreviewPathPrefix, svc.Previews.Handler(""))
	}
}
