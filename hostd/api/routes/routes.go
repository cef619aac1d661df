// Package routes is the API's route table as data: one row per route of
// hostd's API, with who may call it, whether an Idempotency-Key makes a
// retry safe, the largest body it takes, and whether a terminal ticket
// may stand for the bearer token. It holds no handlers, so the gateway
// can read the table without linking the server: hostd/api binds a
// handler to every row (and refuses to start if one is missing), and
// gateway/auth and gateway/limits read the rows to decide ticket routes
// and body limits at the edge.
//
// Adding a route is one row here, one handler in hostd/api, and one entry
// in docs/api/openapi.yaml; docs/ARCHITECTURE.md ("Where to add a route")
// names the tests that hold the three together.
package routes

import (
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"

	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/hostd/auth"
)

// Body limits of the API's routes, in bytes.
const (
	// JSONBody bounds every JSON request body but the file writes below.
	JSONBody = 1 << 20
	// UploadChunkBody bounds one resumable-upload chunk (raw bytes).
	UploadChunkBody = api.MaxPartBytes
	// FileWriteBody bounds PUT .../files/content: the largest file the
	// guest takes, as base64, plus room for the JSON around it.
	FileWriteBody = (api.MaxFileWriteBytes/3+1)*4 + 4096
	// SandboxFileBytes is the largest file POST /v1/sandboxes/{id}/fs/write
	// writes (hostd/sandboxes.MaxSandboxFileBytes; a test holds them equal).
	SandboxFileBytes = 32 << 20
	// SandboxWriteBody bounds POST /v1/sandboxes/{id}/fs/write: the
	// largest file as base64, plus room for the JSON around it.
	SandboxWriteBody = (SandboxFileBytes/3+1)*4 + 64<<10

	// MCPWriteBytes is the largest file content the MCP server's
	// session_file_write takes (mcp.MaxUploadWriteBytes; a test in mcp
	// holds them equal).
	MCPWriteBytes = 8 << 20
	// MCPBody bounds one request to the MCP server at /mcp (one JSON-RPC
	// message): the largest session_file_write, its content as base64,
	// plus room for the JSON-RPC and the tool's other arguments.
	MCPBody = (MCPWriteBytes/3+1)*4 + 64<<10

	// PreviewBody bounds one request body sent through a preview URL
	// (hostd/previews' proxy). Previews are not rows of the table (they
	// are served under /preview/ and the preview host, not the API), but
	// their limit lives here beside the API's so the gateway takes it from
	// the same place, with the same room (EdgeLimit).
	PreviewBody = 64 << 20
)

// Route is one row of the table.
type Route struct {
	// Pattern is the route as http.ServeMux reads it: "METHOD /path",
	// with {name} for one path segment.
	Pattern string
	// Access is what the route asks of its caller (auth.Access): a
	// grantable op, or a class no op opens.
	Access auth.Access
	// Idempotent routes replay their first 2xx answer to a retry with
	// the same Idempotency-Key and body (hostd/api/idempotency.go).
	Idempotent bool
	// BodyLimit is the largest request body hostd reads on the route.
	BodyLimit int64
	// Ticket routes take a single-use terminal ticket (?ticket=) in place
	// of the bearer token, because a browser's WebSocket cannot send
	// Authorization. The ticket stands for whoever asked for it, and the
	// route's access is checked as for them.
	Ticket bool
}

// Method is the route's HTTP method.
func (r Route) Method() string {
	m, _, _ := strings.Cut(r.Pattern, " ")
	return m
}

// Path is the route's path pattern.
func (r Route) Path() string {
	_, p, _ := strings.Cut(r.Pattern, " ")
	return p
}

// row is a route with the defaults: JSON bodies, not idempotent.
func row(pattern string, a auth.Access) Route {
	return Route{Pattern: pattern, Access: a, BodyLimit: JSONBody}
}

func idempotent(r Route) Route { r.Idempotent = true; return r }

func body(r Route, limit int64) Route { r.BodyLimit = limit; return r }

func ticket(r Route) Route { r.Ticket = true; return r }

// table is every route hostd serves.
//
// Decisions worth knowing about access: git status, diff and log need
// git, not read, because a diff shows file contents; read shows what the
// session is and did (record, ledger, trajectory, artifact paths, probe),
// never content. Listing jobs needs jobs, since job records carry
// commands and the read routes carry output. Every upload route, the
// listings included, needs files.write. An agent may see its own approval
// requests (read), never decide one. Restore, fork, delete, grants and
// tokens are never grantable: a session token cannot widen or outlive its
// own session. Rewind is never grantable either: an undo or a bisect
// replaces the machine as a restore does. Making and deleting a preview URL needs preview (it opens
// a port to whoever holds the URL); listing them needs read, since the
// list shows only what the ledger (read) shows already: ids, ports and
// expiries, never a token.
var table = []Route{
	row("GET /healthz", auth.AccessPublic),
	row("GET /v1/whoami", auth.AccessAny),
	row("GET /v1/admin/policy", auth.AccessAdmin),
	row("GET /v1/admin/tenants", auth.AccessAdmin),
	row("GET /v1/backends", auth.AccessTenant),
	row("POST /v1/policy/compile", auth.AccessTenant),

	idempotent(row("POST /v1/agents/sessions", auth.AccessTenant)),
	row("GET /v1/agents/sessions", auth.AccessTenant),
	row("GET /v1/agents/sessions/{id}", auth.OpRead),
	row("DELETE /v1/agents/sessions/{id}", auth.AccessTenant),
	idempotent(row("POST /v1/agents/sessions/{id}/exec", auth.OpExec)),
	row("POST /v1/agents/sessions/{id}/exec/stream", auth.OpExec),
	idempotent(row("POST /v1/agents/sessions/{id}/checkpoint", auth.OpCheckpoint)),
	idempotent(row("POST /v1/agents/sessions/{id}/restore", auth.AccessTenant)),
	idempotent(row("POST /v1/agents/sessions/{id}/fork", auth.AccessTenant)),
	idempotent(row("POST /v1/agents/sessions/{id}/promote", auth.AccessTenant)),
	row("GET /v1/agents/sessions/{id}/artifacts", auth.OpRead),
	row("GET /v1/agents/sessions/{id}/events", auth.OpRead),
	row("GET /v1/agents/sessions/{id}/events/stream", auth.OpRead),
	row("GET /v1/agents/sessions/{id}/trajectory", auth.OpRead),
	row("GET /v1/agents/sessions/{id}/probe", auth.OpRead),

	row("GET /v1/agents/sessions/{id}/git/status", auth.OpGit),
	row("GET /v1/agents/sessions/{id}/git/diff", auth.OpGit),
	row("GET /v1/agents/sessions/{id}/git/log", auth.OpGit),
	row("POST /v1/agents/sessions/{id}/git/commit", auth.OpGit),
	row("POST /v1/agents/sessions/{id}/git/branch", auth.OpGit),

	row("GET /v1/agents/sessions/{id}/files", auth.OpFilesRead),
	row("GET /v1/agents/sessions/{id}/files/content", auth.OpFilesRead),
	row("GET /v1/agents/sessions/{id}/files/range", auth.OpFilesRead),
	body(row("PUT /v1/agents/sessions/{id}/files/content", auth.OpFilesWrite), FileWriteBody),
	row("DELETE /v1/agents/sessions/{id}/files", auth.OpFilesWrite),

	row("POST /v1/agents/sessions/{id}/uploads", auth.OpFilesWrite),
	row("GET /v1/agents/sessions/{id}/uploads", auth.OpFilesWrite),
	row("GET /v1/agents/sessions/{id}/uploads/{upload}", auth.OpFilesWrite),
	body(row("PUT /v1/agents/sessions/{id}/uploads/{upload}", auth.OpFilesWrite), UploadChunkBody),
	row("POST /v1/agents/sessions/{id}/uploads/{upload}/complete", auth.OpFilesWrite),
	row("DELETE /v1/agents/sessions/{id}/uploads/{upload}", auth.OpFilesWrite),

	idempotent(row("POST /v1/agents/sessions/{id}/jobs", auth.OpJobs)),
	row("GET /v1/agents/sessions/{id}/jobs", auth.OpJobs),
	row("GET /v1/agents/sessions/{id}/jobs/{job}", auth.OpJobs),
	row("POST /v1/agents/sessions/{id}/jobs/{job}/stdin", auth.OpJobs),
	row("DELETE /v1/agents/sessions/{id}/jobs/{job}", auth.OpJobs),
	row("GET /v1/agents/sessions/{id}/jobs/{job}/stream", auth.OpJobs),

	row("POST /v1/agents/sessions/{id}/grants", auth.AccessTenant),
	row("GET /v1/agents/sessions/{id}/grants", auth.AccessTenant),
	row("DELETE /v1/agents/sessions/{id}/grants", auth.AccessTenant),
	row("DELETE /v1/agents/sessions/{id}/grants/{grant}", auth.AccessTenant),

	row("GET /v1/agents/sessions/{id}/approvals", auth.OpRead),
	row("POST /v1/agents/sessions/{id}/approvals/{approval}/approve", auth.AccessTenant),
	row("POST /v1/agents/sessions/{id}/approvals/{approval}/deny", auth.AccessTenant),

	row("POST /v1/agents/sessions/{id}/tokens", auth.AccessTenant),
	row("GET /v1/agents/sessions/{id}/tokens", auth.AccessTenant),
	row("DELETE /v1/agents/sessions/{id}/tokens/{token}", auth.AccessTenant),

	// Replay reads the source ({id}); the target's exec is checked by
	// hostd/replay against the same caller (exec on the target).
	row("POST /v1/agents/sessions/{id}/replay", auth.OpRead),

	// A speculation runs a command as exec does and shows file contents,
	// so it needs exec here and files.read in hostd/speculate; reading
	// changesets shows contents (files.read); applying one writes files
	// (files.write). Deciding is never grantable: an agent must not
	// approve its own changeset.
	row("POST /v1/agents/sessions/{id}/speculate", auth.OpExec),
	row("GET /v1/agents/sessions/{id}/changesets", auth.OpFilesRead),
	row("GET /v1/agents/sessions/{id}/changesets/{changeset}", auth.OpFilesRead),
	row("POST /v1/agents/sessions/{id}/changesets/{changeset}/decide", auth.AccessTenant),
	row("POST /v1/agents/sessions/{id}/changesets/{changeset}/apply", auth.OpFilesWrite),

	row("POST /v1/agents/sessions/{id}/preview", auth.OpPreview),
	row("GET /v1/agents/sessions/{id}/previews", auth.OpRead),
	row("DELETE /v1/agents/sessions/{id}/preview/{preview}", auth.OpPreview),

	ticket(row("GET /v1/agents/sessions/{id}/pty", auth.AccessTenant)),
	row("POST /v1/agents/sessions/{id}/pty-ticket", auth.AccessTenant),

	row("GET /v1/agents/sessions/{id}/rewind", auth.AccessTenant),
	row("POST /v1/agents/sessions/{id}/rewind/config", auth.AccessTenant),
	idempotent(row("POST /v1/agents/sessions/{id}/rewind/undo", auth.AccessTenant)),
	row("POST /v1/agents/sessions/{id}/rewind/pin", auth.AccessTenant),
	row("POST /v1/agents/sessions/{id}/rewind/bisect", auth.AccessTenant),
	idempotent(row("POST /v1/agents/sessions/{id}/rewind/branch", auth.AccessTenant)),

	idempotent(row("POST /v1/sandboxes", auth.AccessTenant)),
	row("GET /v1/sandboxes", auth.AccessTenant),
	row("GET /v1/sandboxes/{id}", auth.AccessTenant),
	row("DELETE /v1/sandboxes/{id}", auth.AccessTenant),
	idempotent(row("POST /v1/sandboxes/{id}/process", auth.AccessTenant)),
	row("POST /v1/sandboxes/{id}/fs/read", auth.AccessTenant),
	body(row("POST /v1/sandboxes/{id}/fs/write", auth.AccessTenant), SandboxWriteBody),
	row("POST /v1/sandboxes/{id}/speculate", auth.AccessTenant),
	row("GET /v1/sandboxes/{id}/changesets", auth.AccessTenant),
	row("GET /v1/sandboxes/{id}/changesets/{changeset}", auth.AccessTenant),
	row("POST /v1/sandboxes/{id}/changesets/{changeset}/decide", auth.AccessTenant),
	row("POST /v1/sandboxes/{id}/changesets/{changeset}/apply", auth.AccessTenant),
}

// outside are routes the daemon serves in front of hostd/api rather than
// through it: the MCP server over streamable HTTP (hostd/daemon/mcp.go,
// docs/mcp.md), which checks its caller's token itself and whose tools
// call the API as that caller, and the web console's files (console). They are rows so that their limits live
// in the table and the gateway applies them (Match and Lookup find
// them); hostd/api binds no handler to them and docs/api/openapi.yaml
// does not describe them, so All leaves them out.
var outside = []Route{
	body(row("POST /mcp", auth.AccessAny), MCPBody),
	row("GET /mcp", auth.AccessAny),
	row("DELETE /mcp", auth.AccessAny),
	// The web console's static files (console, hostd/daemon/console.go):
	// public, since they hold no secret; the page's API calls carry the
	// token. No body is read.
	row("GET /console", auth.AccessPublic),
	row("GET /console/", auth.AccessPublic),
}

// All returns every row hostd/api serves, in the table's order.
func All() []Route { return slices.Clone(table) }

// Outside returns the rows served in front of hostd/api (outside).
func Outside() []Route { return slices.Clone(outside) }

// every is the table then the outside rows: what Lookup and Match search.
var every = sync.OnceValue(func() []Route { return append(slices.Clone(table), outside...) })

// Lookup returns the row of a "METHOD /path" pattern.
func Lookup(pattern string) (Route, bool) {
	i := index()[pattern]
	if i == 0 {
		return Route{}, false
	}
	return every()[i-1], true
}

// Match returns the row whose pattern r's method and path match, as
// hostd's own router would match them. A path that is not clean ("//",
// "/./", "/../") matches none: hostd's router would only redirect it. A
// trailing slash is clean, as for the router ("/console/").
func Match(r *http.Request) (Route, bool) {
	if p := r.URL.Path; p == "" || path.Clean(p) != strings.TrimSuffix(p, "/") && path.Clean(p) != p {
		return Route{}, false
	}
	_, pattern := matcher().Handler(r)
	return Lookup(pattern)
}

// index maps a pattern to its row's position plus one.
var index = sync.OnceValue(func() map[string]int {
	m := make(map[string]int, len(every()))
	for i, r := range every() {
		m[r.Pattern] = i + 1
	}
	return m
})

// matcher is a ServeMux holding every pattern of the table, used only to
// find which pattern a request matches (it serves nothing).
var matcher = sync.OnceValue(func() *http.ServeMux {
	mux := http.NewServeMux()
	for _, r := range every() {
		mux.Handle(r.Pattern, http.NotFoundHandler())
	}
	return mux
})

// MiB is a mebibyte.
const MiB = 1 << 20

// EdgeLimit is the body limit the gateway applies for a route whose hostd
// limit is n: n rounded up to a whole MiB, plus one MiB of room, so a body
// hostd would take always reaches hostd and hostd's own 413 (with its
// message) answers a body just over its limit.
func EdgeLimit(n int64) int64 {
	return (n+MiB-1)/MiB*MiB + MiB
}

// DefaultEdgeLimit is the gateway's body limit for a request no row
// matches (hostd answers it 404): what a JSON route gets.
const DefaultEdgeLimit = (JSONBody+MiB-1)/MiB*MiB + MiB
