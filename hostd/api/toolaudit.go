package api

import (
	"net/http"
	"strings"

	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/session"
)

// maxAuditPath bounds the file path an mcp.read entry keeps.
const maxAuditPath = 512

// auditToolRead records, in the session's ledger, a read an MCP tool made
// (a request with the Mcp-Tool header, auth.ToolOf) on a session route
// that answered without error. Writes are recorded by what they do (each
// of their ledger entries carries mcp_tool); a read records nothing of
// its own, so without this entry an audit could not tell which tools
// looked at a session. The entry names the route and the path asked for,
// never what was read.
func (s *Server) auditToolRead(r *http.Request, pattern string, err error) {
	tool := auth.ToolOf(r.Context())
	if tool == "" || err != nil || r.Method != http.MethodGet || !strings.HasPrefix(pattern, "GET /v1/agents/sessions/{id}") {
		return
	}
	data := map[string]any{"route": pattern}
	if p := r.URL.Query().Get("path"); p != "" {
		data["path"] = session.ClipText(p, maxAuditPath)
	}
	s.sessions.LedgerAppend(r.Context(), r.PathValue("id"), "mcp.read", data)
}
