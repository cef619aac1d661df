package api

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/coder/websocket"

	"paddock.dev/paddock/hostd/api/routes"
	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/terminals"
)

// The terminal routes (hostd/session/terminal.go has the rules).
const (
	ptyRoute       = "GET /v1/agents/sessions/{id}/pty"
	ptyTicketRoute = "POST /v1/agents/sessions/{id}/pty-ticket"
)

func (s *Server) ptyRoutes(bind func(string, handler)) {
	bind(ptyRoute, s.openPTY)
	bind(ptyTicketRoute, s.ptyTicket)
}

// verifyCaller is who calls: the caller a terminal ticket was made for,
// on a route whose row takes a ticket (routes.Route.Ticket) and that was
// given ?ticket=, else the bearer token's. A ticket is spent by this
// first look, whatever follows.
func (s *Server) verifyCaller(pattern string, r *http.Request) (auth.Identity, error) {
	if rt, _ := routes.Lookup(pattern); !rt.Ticket || !r.URL.Query().Has("ticket") {
		return s.verifier.VerifyRequest(r)
	}
	if s.svc.Terminals == nil {
		return auth.Identity{}, &authError{errUnauthorized, terminals.ErrTicket}
	}
	id, err := s.svc.Terminals.RedeemTerminalTicket(r.URL.Query().Get("ticket"), r.PathValue("id"))
	if err == nil && id.Kind == auth.KindTenant && !slices.Contains(s.verifier.Tenants().Names(), id.Tenant) {
		err = terminals.ErrTicket // the tenant was removed since (SIGHUP)
	}
	if err != nil {
		s.log.Info("terminal ticket refused", "path", logPath(r))
		return auth.Identity{}, &authError{errUnauthorized, err}
	}
	return id, nil
}

// openPTY answers GET .../pty: every refusal is a JSON error before the
// WebSocket upgrade; after it, the terminal runs until it closes.
func (s *Server) openPTY(w http.ResponseWriter, r *http.Request) error {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return fmt.Errorf("%w: %s is a WebSocket: send Connection: Upgrade and Upgrade: websocket", session.ErrBadRequest, r.URL.Path)
	}
	cols, err := queryInt(r, "cols", terminals.DefaultTerminalCols, 1, terminals.MaxTerminalDim)
	if err != nil {
		return err
	}
	rows, err := queryInt(r, "rows", terminals.DefaultTerminalRows, 1, terminals.MaxTerminalDim)
	if err != nil {
		return err
	}
	req := terminals.TerminalRequest{Cols: int(cols), Rows: int(rows), Command: r.URL.Query().Get("command")}
	t, err := s.svc.Terminals.OpenTerminal(r.Context(), tenant(r), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	// The default origin check stands: a browser page may open the
	// terminal only from the origin the daemon (or its gateway) serves.
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		t.Abort()
		return nil // Accept has answered
	}
	t.Serve(conn)
	return nil
}

// ptyTicket answers POST .../pty-ticket. The body, if any, is ignored.
func (s *Server) ptyTicket(w http.ResponseWriter, r *http.Request) error {
	out, err := s.svc.Terminals.TerminalTicket(r.Context(), tenant(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, out)
	return nil
}
