package api

import (
	"net/http"
	"strings"

	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/session"
)

// maxAuditPath bounds the file path an mcp.read entry keeps.
const maxAuditPath = 512

// auditToolRead records, in the session's (or sandbox's) ledger, a read
// an MCP tool made (a request with the Mcp-Tool header, auth.ToolOf) that
// answered without error. Writes are recorded by what they do (each of
// their ledger entries carries mcp_tool); a read records nothing of its
// own, so without this entry an audit could not tell which tools looked
// at a session. The entry names the route and, for a route that takes
// one (pathRoutes), the path asked for (in the query; a sandbox's fs/read carries it in its body, which is not kept),
// never what was read.
func (s *Server) auditToolRead(r *http.Request, pattern string, err error) {
	tool := auth.ToolOf(r.Context())
	if tool == "" || err != nil || !isRead(pattern) {
		return
	}
	data := map[string]any{"route": pattern}
	if p := r.URL.Query().Get("path"); p != "" && pathRoutes[pattern] {
		data["path"] = session.ClipText(p, maxAuditPath)
	}
	s.sessions.LedgerAppend(r.Context(), r.PathValue("id"), "mcp.read", data)
}

// pathRoutes are the read routes that take a path in the query; any
// other route ignores one, so the entry does not record it.
var pathRoutes = map[string]bool{
	"GET /v1/agents/sessions/{id}/files":         true,
	"GET /v1/agents/sessions/{id}/files/content": true,
	"GET /v1/agents/sessions/{id}/files/range":   true,
	"GET /v1/agents/sessions/{id}/git/diff":      true,
}

// isRead says whether a route only reads a session or a sandbox.
func isRead(pattern string) bool {
	return strings.HasPrefix(pattern, "GET /v1/agents/sessions/{id}") || strings.HasPrefix(pattern, "GET /v1/sandboxes/{id}") ||
		pattern == "POST /v1/sandboxes/{id}/fs/read"
}
