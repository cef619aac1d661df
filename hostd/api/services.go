package api

import "paddock.dev/paddock/hostd/grants"

// Services are the session core's sibling packages whose routes this
// server serves. hostd/daemon makes them on the same Manager it gives New
// and hands them over with SetServices before the server serves.
type Services struct {
	Grants *grants.Service
}

// SetServices gives the server the sibling services. Call it before the
// server serves.
func (s *Server) SetServices(svc Services) { s.svc = svc }
