package api

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/session"
)

// maxAuditPath bounds the file path an mcp.read entry keeps.
const maxAuditPath = 512

// The bounds on mcp.read entries (variables so a test can make them
// small). Within one window of a session's (or sandbox's) reads, the
// first read of each distinct (actor, tool, route, path) gets its entry
// at once; repeats of it are only counted, and one entry with the count
// ("repeats") is written when the window closes. Each actor has its own
// bound: at most maxReadKeysPerWindow distinct reads of one actor are
// itemised per window, and that actor's reads past it are counted into
// one entry of its own ("other_reads", with the actor), so one reader
// cannot push another's reads out of the record. At most
// maxReadActorsPerWindow actors are followed apart in a window; the reads
// of any more are counted into one shared entry (actor the daemon). So a
// window adds at most maxReadActorsPerWindow*(2*maxReadKeysPerWindow+1)+1
// entries, whatever readers send. At most maxReadWindows windows are open
// at once; past it the oldest is closed (its counts written) early.
var (
	readWindow             = time.Minute
	maxReadKeysPerWindow   = 64
	maxReadActorsPerWindow = 16
	maxReadWindows         = 4096
)

// readKey is one distinct read: who, through which tool, what.
type readKey struct{ actor, tool, route, path string }

// readCount is a distinct read seen in the open window.
type readCount struct {
	ctx     context.Context // the first read's (its actor and tool, not its cancel)
	data    map[string]any
	repeats int
}

// readWindowState is one session's open window.
type readWindowState struct {
	start  time.Time
	timer  *time.Timer
	keys   map[readKey]*readCount
	actors map[string]*actorReads // by actor: its distinct reads and overflow
	other  int                    // reads of actors past maxReadActorsPerWindow
}

// actorReads is one actor's share of a window.
type actorReads struct {
	ctx      context.Context // the actor's first read's, for its overflow entry
	distinct int             // distinct reads itemised
	other    int             // reads past maxReadKeysPerWindow distinct ones
}

// readFolder folds the mcp.read entries of repeated reads.
type readFolder struct {
	mu      sync.Mutex
	windows map[string]*readWindowState // by session or sandbox id
}

// auditToolRead records, in the session's (or sandbox's) ledger, a read
// an MCP tool made (a request with the Mcp-Tool header, auth.ToolOf) that
// answered without error. Writes are recorded by what they do (each of
// their ledger entries carries mcp_tool); a read records nothing of its
// own, so without this entry an audit could not tell which tools looked
// at a session. The entry names the route and, for a route that takes
// one (pathRoutes), the path asked for (in the query; a sandbox's fs/read
// carries it in its body, which is not kept), never what was read.
// Repeats are folded (readWindow above), so a reader cannot grow a
// ledger without bound by sending the header.
func (s *Server) auditToolRead(r *http.Request, pattern string, err error) {
	tool := auth.ToolOf(r.Context())
	if tool == "" || err != nil || !isRead(pattern) {
		return
	}
	data := map[string]any{"route": pattern}
	path := ""
	if p := r.URL.Query().Get("path"); p != "" && pathRoutes[pattern] {
		path = session.ClipText(p, maxAuditPath)
		data["path"] = path
	}
	id := r.PathValue("id")
	key := readKey{actor: auth.ActorOf(r.Context()), tool: tool, route: pattern, path: path}
	if s.reads.note(s, id, key, r.Context(), data) {
		s.sessions.LedgerAppend(r.Context(), id, "mcp.read", data)
	}
}

// note counts one read of key in id's window and says whether it is the
// first of its kind there (the caller writes its entry then).
func (f *readFolder) note(s *Server, id string, key readKey, ctx context.Context, data map[string]any) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := f.windows[id]
	if w == nil {
		if f.windows == nil {
			f.windows = map[string]*readWindowState{}
		}
		if len(f.windows) >= maxReadWindows {
			f.evictOldest(s)
		}
		w = &readWindowState{start: time.Now(), keys: map[readKey]*readCount{}, actors: map[string]*actorReads{}}
		f.windows[id] = w
		w.timer = time.AfterFunc(readWindow, func() { f.close(s, id, w) })
	}
	if c := w.keys[key]; c != nil {
		c.repeats++
		return false
	}
	a := w.actors[key.actor]
	if a == nil {
		if len(w.actors) >= maxReadActorsPerWindow {
			w.other++
			return false
		}
		a = &actorReads{ctx: context.WithoutCancel(ctx)}
		w.actors[key.actor] = a
	}
	if a.distinct >= maxReadKeysPerWindow {
		a.other++
		return false
	}
	a.distinct++
	w.keys[key] = &readCount{ctx: context.WithoutCancel(ctx), data: data}
	return true
}

// evictOldest closes the window that opened first, early. f.mu is held;
// its entries are written on another goroutine.
func (f *readFolder) evictOldest(s *Server) {
	var oldID string
	var old *readWindowState
	for id, w := range f.windows {
		if old == nil || w.start.Before(old.start) {
			oldID, old = id, w
		}
	}
	if old == nil {
		return
	}
	old.timer.Stop()
	delete(f.windows, oldID)
	go f.write(s, oldID, old)
}

// close ends id's window w (if it is still the open one) and writes
// its counts.
func (f *readFolder) close(s *Server, id string, w *readWindowState) {
	f.mu.Lock()
	if f.windows[id] != w {
		f.mu.Unlock()
		return
	}
	delete(f.windows, id)
	f.mu.Unlock()
	f.write(s, id, w)
}

// write appends a closed window's counts: one entry per read that was
// repeated (as its first reader, through its tool), one for each actor's
// reads past its bound (as that actor), and one for the reads of actors
// past the actors' bound.
func (f *readFolder) write(s *Server, id string, w *readWindowState) {
	secs := int(readWindow / time.Second)
	for _, c := range w.keys {
		if c.repeats == 0 {
			continue
		}
		data := map[string]any{"repeats": c.repeats, "window_seconds": secs}
		for k, v := range c.data {
			data[k] = v
		}
		s.sessions.LedgerAppend(c.ctx, id, "mcp.read", data)
	}
	for _, a := range w.actors {
		if a.other > 0 {
			s.sessions.LedgerAppend(a.ctx, id, "mcp.read", map[string]any{"other_reads": a.other, "window_seconds": secs})
		}
	}
	if w.other > 0 {
		s.sessions.LedgerAppend(context.Background(), id, "mcp.read", map[string]any{"other_reads": w.other, "window_seconds": secs})
	}
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
