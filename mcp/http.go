package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"paddock.dev/paddock/client"
	"paddock.dev/paddock/errdefs"
)

// The HTTP server's limits when HTTPOptions leaves them zero.
const (
	// DefaultHTTPMaxBody bounds one request's body: a tool call's
	// arguments, room enough for the largest session_file_write
	// (MaxUploadWriteBytes as base64) and the JSON-RPC around it. It is
	// the body limit of /mcp's POST row in the daemon's route table
	// (hostd/api/routes.MCPBody; a test holds them equal), and under the
	// gateway's limit for that row, so this handler's own 413 answers
	// first.
	DefaultHTTPMaxBody = (MaxUploadWriteBytes/3+1)*4 + 64<<10
	// DefaultHTTPSessionsPerToken bounds the MCP sessions one token holds
	// open at once.
	DefaultHTTPSessionsPerToken = 16
	// DefaultHTTPIdleTimeout closes an MCP session no request has touched
	// for this long.
	DefaultHTTPIdleTimeout = 30 * time.Minute
	// maxHTTPTokens bounds the tokens the handler keeps a server for.
	maxHTTPTokens = 4096
)

// HTTPOptions configure the streamable HTTP handler.
type HTTPOptions struct {
	// Client returns a client of the public API that carries token: every
	// tool call of a caller goes to the API with that caller's own token.
	Client func(token string) *client.Client
	// AllowWrite offers the write tools, as Options.AllowWrite.
	AllowWrite bool
	Version    string
	// MaxBody, SessionsPerToken and IdleTimeout are the limits (the
	// Default* constants when zero).
	MaxBody          int64
	SessionsPerToken int
	IdleTimeout      time.Duration
}

// HTTPHandler serves MCP over streamable HTTP. Each request's bearer token
// is checked with the daemon (GET /v1/whoami) before any MCP work, and the
// request is served by the server built for that token: its tools call the
// API as that token, so what a caller may do is exactly what the REST API
// lets the token do. An MCP session belongs to the token that opened it;
// the same session id with another token is refused.
type HTTPHandler struct {
	opts HTTPOptions
	h    *sdk.StreamableHTTPHandler
	mu   sync.Mutex
	// servers holds one server per token, keyed by the token's hash.
	servers map[string]*tokenServer
}

type tokenServer struct {
	srv  *Server
	used time.Time
	// opening is held while a new session of the token is counted and
	// opened, so two at once cannot both pass the count.
	opening sync.Mutex
}

type serverKey struct{}

// NewHTTPHandler returns the handler.
func NewHTTPHandler(opts HTTPOptions) *HTTPHandler {
	if opts.MaxBody <= 0 {
		opts.MaxBody = DefaultHTTPMaxBody
	}
	if opts.SessionsPerToken <= 0 {
		opts.SessionsPerToken = DefaultHTTPSessionsPerToken
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultHTTPIdleTimeout
	}
	h := &HTTPHandler{opts: opts, servers: map[string]*tokenServer{}}
	h.h = sdk.NewStreamableHTTPHandler(func(r *http.Request) *sdk.Server {
		s, _ := r.Context().Value(serverKey{}).(*Server)
		if s == nil {
			return nil
		}
		return s.Server
	}, &sdk.StreamableHTTPOptions{
		SessionTimeout: opts.IdleTimeout,
		// The SDK has its own body cap (4 MiB by default), below what a
		// large session_file_write needs: ServeHTTP checks MaxBody first,
		// so the SDK's is set to the same.
		MaxRequestBodyBytes: opts.MaxBody,
		// The daemon is reached through the gateway, whose Host is the
		// daemon's name; the bearer token is what protects it.
		DisableLocalhostProtection: true,
	})
	return h
}

// httpError writes the API's error shape: a stable code and a message.
func httpError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="paddock"`)
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"code": code, "error": msg})
}

func (h *HTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	fields := strings.Fields(r.Header.Get("Authorization"))
	if len(fields) != 2 || !strings.EqualFold(fields[0], "bearer") {
		httpError(w, http.StatusUnauthorized, "unauthenticated", "mcp: send the token as Authorization: Bearer TOKEN")
		return
	}
	token := fields[1]
	if r.ContentLength > h.opts.MaxBody {
		httpError(w, http.StatusRequestEntityTooLarge, "too_large", "mcp: a request body may be at most "+itoa(h.opts.MaxBody)+" bytes")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, h.opts.MaxBody)
	sum := sha256.Sum256([]byte(token))
	key := hex.EncodeToString(sum[:])
	ts, status, code, msg := h.server(r.Context(), key, token)
	if ts == nil {
		httpError(w, status, code, msg)
		return
	}
	s := ts.srv
	// A request with no session id opens a new session (initialize).
	if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" {
		ts.opening.Lock()
		defer ts.opening.Unlock()
		n := 0
		for range s.Sessions() {
			n++
		}
		if n >= h.opts.SessionsPerToken {
			httpError(w, http.StatusTooManyRequests, "too_many_sessions", "mcp: this token has "+itoa(int64(n))+" MCP sessions open, the most allowed; close one (DELETE with its Mcp-Session-Id) or let it idle out")
			return
		}
	}
	// A session id must be one of this token's own sessions: any other
	// (another token's, closed, or made up) is not found, so a session id
	// alone tells a caller nothing.
	if sid := r.Header.Get("Mcp-Session-Id"); sid != "" {
		found := false
		for ss := range s.Sessions() {
			if ss.ID() == sid {
				found = true
				break
			}
		}
		if !found {
			httpError(w, http.StatusNotFound, "not_found", "mcp: no MCP session "+strconvQuote(sid)+" of this token: start a new one (initialize without Mcp-Session-Id)")
			return
		}
	}
	// The SDK also binds a session to the user id it was opened with and
	// refuses the session id with any other (403).
	info := &auth.TokenInfo{UserID: key, Expiration: time.Now().Add(24 * time.Hour)}
	ctx := context.WithValue(r.Context(), serverKey{}, s)
	auth.RequireBearerToken(func(context.Context, string, *http.Request) (*auth.TokenInfo, error) {
		return info, nil
	}, nil)(h.h).ServeHTTP(w, r.WithContext(ctx))
}

// server checks token with the daemon and returns its server, built the
// first time the token is seen. The check is made on every request, so a
// revoked token stops at once.
func (h *HTTPHandler) server(ctx context.Context, key, token string) (*tokenServer, int, string, string) {
	c := h.opts.Client(token)
	who, err := c.WhoAmI(ctx)
	if err != nil {
		if errors.Is(err, errdefs.ErrUnauthenticated) {
			return nil, http.StatusUnauthorized, "unauthenticated", "mcp: the daemon does not know this token"
		}
		return nil, http.StatusBadGateway, "unavailable", "mcp: ask the daemon who this token is: " + err.Error()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	if ts := h.servers[key]; ts != nil {
		ts.used = now
		return ts, 0, "", ""
	}
	h.sweep(now)
	if len(h.servers) >= maxHTTPTokens {
		return nil, http.StatusServiceUnavailable, "too_many_tokens", "mcp: the server holds sessions for too many tokens; retry later"
	}
	srv, err := newServer(c, who, Options{AllowWrite: h.opts.AllowWrite, Version: h.opts.Version})
	if err != nil {
		return nil, http.StatusBadRequest, "invalid_argument", err.Error()
	}
	ts := &tokenServer{srv: srv, used: now}
	h.servers[key] = ts
	return ts, 0, "", ""
}

// sweep forgets the servers of tokens with no session open that no request
// has used for the idle timeout. Called with h.mu held.
func (h *HTTPHandler) sweep(now time.Time) {
	for k, ts := range h.servers {
		if now.Sub(ts.used) < h.opts.IdleTimeout {
			continue
		}
		open := false
		for range ts.srv.Sessions() {
			open = true
			break
		}
		if !open {
			delete(h.servers, k)
		}
	}
}

// Servers says how many tokens the handler holds a server for.
func (h *HTTPHandler) Servers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.servers)
}

func strconvQuote(s string) string {
	if len(s) > 64 {
		s = s[:64]
	}
	b, _ := json.Marshal(s)
	return string(b)
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
