package api

import (
	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/hostd/approvals"
	"paddock.dev/paddock/hostd/grants"
	"paddock.dev/paddock/hostd/previews"
	"paddock.dev/paddock/hostd/promote"
	"paddock.dev/paddock/hostd/replay"
	"paddock.dev/paddock/hostd/rewind"
	"paddock.dev/paddock/hostd/sandboxes"
	"paddock.dev/paddock/hostd/speculate"
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
	Promote   *promote.Service
	Rewind    *rewind.Service
	Replay    *replay.Service
	Sandboxes *sandboxes.Service
	Speculate *speculate.Service
	Terminals *terminals.Service
	Tokens    *tokens.Service
	Workspace *workspace.Service
}

// Missing names the services svc lacks. Every route of a service needs
// it, so hostd/daemon sets all of them (and refuses to start otherwise).
func (svc Services) Missing() []string {
	var out []string
	for _, x := range []struct {
		name string
		nil_ bool
	}{
		{"approvals", svc.Approvals == nil}, {"grants", svc.Grants == nil}, {"previews", svc.Previews == nil},
		{"rewind", svc.Rewind == nil}, {"sandboxes", svc.Sandboxes == nil}, {"terminals", svc.Terminals == nil}, {"tokens", svc.Tokens == nil},
		{"workspace", svc.Workspace == nil}, {"promote", svc.Promote == nil}, {"replay", svc.Replay == nil},
		{"speculate", svc.Speculate == nil},
	} {
		if x.nil_ {
			out = append(out, x.name)
		}
	}
	return out
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
