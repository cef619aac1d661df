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

	"paddock.dev/paddock/api"
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
	// DefaultHTTPCallsPerToken bounds the tool calls of one token running
	// at once, over all its sessions: each may hold a tool's output (up
	// to a 64 MiB API answer) in memory. A call past it is refused at
	// once with a tool error led by too_many_calls (the agent retries
	// when one of its calls has finished); it does not wait.
	DefaultHTTPCallsPerToken = 8
)

// The handler's bounds on the tokens it keeps a server for: in all, and
// per owner (a tenant, or the admin), so one tenant minting tokens cannot
// fill the table for everyone. Variables so a test can make them small.
var (
	maxHTTPTokens         = 4096
	maxHTTPTokensPerOwner = 256
	// recheckEvery is how often the tokens with sessions open are asked
	// about again, so a revoked token's open streams (a GET) end
	// without waiting for a request of it.
	recheckEvery = 30 * time.Second
)

// HTTPOptions configure the streamable HTTP handler.
type HTTPOptions struct {
	// Client returns a client of the public API that carries token: every
	// tool call of a caller goes to the API with that caller's own token.
	Client func(token string) *client.Client
	// AllowWrite offers the write tools, as Options.AllowWrite.
	AllowWrite bool
	Version    string
	// MaxBody, SessionsPerToken, IdleTimeout and CallsPerToken are the
	// limits (the Default* constants when zero).
	MaxBody          int64
	SessionsPerToken int
	IdleTimeout      time.Duration
	CallsPerToken    int
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
	// rechecking is true while the recheck loop runs.
	rechecking bool
	// maxTokens, maxPerOwner and recheckEvery are the package's bounds,
	// copied when the handler is made (a test changes them for the
	// handlers it makes, not for those still running).
	maxTokens, maxPerOwner int
	recheckEvery           time.Duration
}

type tokenServer struct {
	srv *Server
	// c is the API client with the token, for the recheck.
	c    *client.Client
	used time.Time
	// owner is the tenant the token belongs to ("" for the admin).
	owner string
	// opening counts the session-opening requests (initialize) of the
	// token in flight: each holds a place under SessionsPerToken until
	// its session is open (then Sessions counts it) or it failed. Read
	// and written with HTTPHandler.mu held.
	opening int
}

// open says how many sessions the token has open or opening. Called with
// HTTPHandler.mu held. A session counts once initialized: the SDK also
// makes a session for each session-less POST that is not an initialize
// (the newer clients' server/discover probe) and closes it when that
// request ends, and such a session must not take a place.
func (ts *tokenServer) open() int {
	n := ts.opening
	for ss := range ts.srv.Sessions() {
		if ss.InitializeParams() != nil {
			n++
		}
	}
	return n
}

// close ends every open session of the token.
func (ts *tokenServer) close() {
	for ss := range ts.srv.Sessions() {
		ss.Close()
	}
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
	if opts.CallsPerToken <= 0 {
		opts.CallsPerToken = DefaultHTTPCallsPerToken
	}
	h := &HTTPHandler{opts: opts, servers: map[string]*tokenServer{},
		maxTokens: maxHTTPTokens, maxPerOwner: maxHTTPTokensPerOwner, recheckEvery: recheckEvery}
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
	sid := r.Header.Get("Mcp-Session-Id")
	// Only a POST with no session id opens a session (initialize), and
	// only it needs a server built; every other request needs the
	// token's server to exist already.
	opens := r.Method == http.MethodPost && sid == ""
	ts, status, code, msg := h.server(r.Context(), key, token, opens)
	if status != 0 {
		httpError(w, status, code, msg)
		return
	}
	if opens {
		// server reserved a place under SessionsPerToken for this
		// initialize; it is given back when the request ends: by then
		// its session is open and counted, or it failed.
		// It is given back at the answer's first byte, not when the
		// handler returns: the session is counted by then, and a client
		// that opens its next session on reading the answer must not find
		// this one counted twice (once open, once opening).
		rw := &releaseWriter{ResponseWriter: w}
		rw.release = func() {
			h.mu.Lock()
			ts.opening--
			ts.used = time.Now()
			h.mu.Unlock()
		}
		defer rw.done()
		w = rw
	}
	// A session id must be one of this token's own sessions: any other
	// (another token's, closed, or made up) is not found, so a session id
	// alone tells a caller nothing.
	if sid != "" {
		found := false
		if ts != nil {
			for ss := range ts.srv.Sessions() {
				if ss.ID() == sid {
					found = true
					break
				}
			}
		}
		if !found {
			httpError(w, http.StatusNotFound, "not_found", "mcp: no MCP session "+strconvQuote(sid)+" of this token: start a new one (initialize without Mcp-Session-Id)")
			return
		}
	}
	// The tools learn the address the caller used from this header (set
	// here, whatever the request carried), so a URL a tool hands out is
	// one the caller can open rather than the daemon's internal one.
	if base := publicBase(r); base != "" {
		r.Header.Set(publicBaseHeader, base)
	} else {
		r.Header.Set(publicBaseHeader, noPublicBase)
	}
	var s *Server
	if ts != nil {
		s = ts.srv
	}
	// The SDK also binds a session to the user id it was opened with and
	// refuses the session id with any other (403).
	info := &auth.TokenInfo{UserID: key, Expiration: time.Now().Add(24 * time.Hour)}
	ctx := r.Context()
	if s != nil {
		// With no server (a request that is neither initialize nor of a
		// session, such as a GET with no session id) the SDK answers 400.
		ctx = context.WithValue(ctx, serverKey{}, s)
	}
	auth.RequireBearerToken(func(context.Context, string, *http.Request) (*auth.TokenInfo, error) {
		return info, nil
	}, nil)(h.h).ServeHTTP(w, r.WithContext(ctx))
}

// server checks token with the daemon and returns its server, or nil
// if it has none and build is false. The server is built the first time
// an initialize of the token comes. The check is made on every request,
// so a revoked token stops at once: its 401 also closes the token's open
// sessions and forgets its server. A status of 0 means go on.
func (h *HTTPHandler) server(ctx context.Context, key, token string, build bool) (*tokenServer, int, string, string) {
	c := h.opts.Client(token)
	who, err := c.WhoAmI(ctx)
	if err != nil {
		if errors.Is(err, errdefs.ErrUnauthenticated) {
			h.forget(key)
			return nil, http.StatusUnauthorized, "unauthenticated", "mcp: the daemon does not know this token"
		}
		return nil, http.StatusBadGateway, "unavailable", "mcp: ask the daemon who this token is: " + err.Error()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	ts := h.servers[key]
	if ts != nil {
		ts.used = now
	}
	if !build {
		return ts, 0, "", ""
	}
	if ts == nil {
		var status int
		var code, msg string
		if ts, status, code, msg = h.build(c, who, now); status != 0 {
			return nil, status, code, msg
		}
		h.servers[key] = ts
	}
	// The count and the reservation are made under h.mu, and the
	// reservation keeps the server from being evicted; the lock is not
	// held for the request, so other requests of the token run meanwhile.
	if n := ts.open(); n >= h.opts.SessionsPerToken {
		return nil, http.StatusTooManyRequests, "too_many_sessions", "mcp: this token has " + itoa(int64(n)) + " MCP sessions open, the most allowed; close one (DELETE with its Mcp-Session-Id) or let it idle out"
	}
	ts.opening++
	return ts, 0, "", ""
}

// build makes the server of a token not seen before, first making room
// for it. Called with h.mu held.
func (h *HTTPHandler) build(c *client.Client, who *api.WhoAmI, now time.Time) (*tokenServer, int, string, string) {
	h.sweep(now)
	owner := who.Tenant
	if n := h.owned(owner); n >= h.maxPerOwner && !h.evict(owner, true) {
		return nil, http.StatusTooManyRequests, "too_many_tokens", "mcp: the tokens of this tenant hold " + itoa(int64(n)) + " MCP servers with sessions open, the most allowed; close some sessions"
	}
	if len(h.servers) >= h.maxTokens && !h.evict("", false) {
		return nil, http.StatusServiceUnavailable, "too_many_tokens", "mcp: the server holds sessions for too many tokens; retry later"
	}
	srv, err := newServer(c, who, Options{AllowWrite: h.opts.AllowWrite, Version: h.opts.Version})
	if err != nil {
		return nil, http.StatusBadRequest, "invalid_argument", err.Error()
	}
	srv.AddReceivingMiddleware(limitCalls(h.opts.CallsPerToken))
	if !h.rechecking {
		h.rechecking = true
		go h.recheck()
	}
	return &tokenServer{srv: srv, c: c, used: now, owner: owner}, 0, "", ""
}

// forget drops the server of key, if any, and closes its sessions: the
// daemon no longer knows the token.
func (h *HTTPHandler) forget(key string) {
	h.mu.Lock()
	ts := h.servers[key]
	delete(h.servers, key)
	h.mu.Unlock()
	if ts != nil {
		ts.close()
	}
}

// recheck asks the daemon every recheckEvery about each token with a
// session open, and forgets those it no longer knows, closing their
// sessions. It runs while any server is held and stops when none is.
func (h *HTTPHandler) recheck() {
	t := time.NewTicker(h.recheckEvery)
	defer t.Stop()
	for range t.C {
		h.mu.Lock()
		h.sweep(time.Now())
		if len(h.servers) == 0 {
			h.rechecking = false
			h.mu.Unlock()
			return
		}
		check := map[string]*client.Client{}
		for k, ts := range h.servers {
			if ts.open() > 0 {
				check[k] = ts.c
			}
		}
		h.mu.Unlock()
		for k, c := range check {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := c.WhoAmI(ctx)
			cancel()
			if errors.Is(err, errdefs.ErrUnauthenticated) {
				h.forget(k)
			}
		}
	}
}

// owned counts the servers of owner's tokens. Called with h.mu held.
func (h *HTTPHandler) owned(owner string) int {
	n := 0
	for _, ts := range h.servers {
		if ts.owner == owner {
			n++
		}
	}
	return n
}

// evict drops the least recently used server with no session open or
// opening (of owner only, if byOwner), and says whether there was one.
// Called with h.mu held.
func (h *HTTPHandler) evict(owner string, byOwner bool) bool {
	var key string
	var lru *tokenServer
	for k, ts := range h.servers {
		if byOwner && ts.owner != owner {
			continue
		}
		if ts.open() > 0 {
			continue
		}
		if lru == nil || ts.used.Before(lru.used) {
			key, lru = k, ts
		}
	}
	if lru == nil {
		return false
	}
	delete(h.servers, key)
	return true
}

// sweep forgets the servers of tokens with no session open that no request
// has used for the idle timeout. Called with h.mu held.
func (h *HTTPHandler) sweep(now time.Time) {
	for k, ts := range h.servers {
		if now.Sub(ts.used) >= h.opts.IdleTimeout && ts.open() == 0 {
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

// releaseWriter calls release once, at the first byte or header written
// or when the request ends, whichever comes first.
type releaseWriter struct {
	http.ResponseWriter
	release func()
	once    sync.Once
}

func (w *releaseWriter) done() { w.once.Do(w.release) }

func (w *releaseWriter) WriteHeader(code int) {
	w.done()
	w.ResponseWriter.WriteHeader(code)
}

func (w *releaseWriter) Write(b []byte) (int, error) {
	w.done()
	return w.ResponseWriter.Write(b)
}

func (w *releaseWriter) Flush() {
	w.done()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *releaseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// limitCalls lets at most n tool calls of one server (one token) run at
// once; a call past them is answered at once with a tool error an agent
// can act on, and never reaches the daemon.
func limitCalls(n int) sdk.Middleware {
	slots := make(chan struct{}, n)
	return func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			if method != "tools/call" {
				return next(ctx, method, req)
			}
			select {
			case slots <- struct{}{}:
			default:
				return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{
					Text: "too_many_calls: this token has " + itoa(int64(n)) + " tool calls running, the most allowed at once; retry when one has finished"}}}, nil
			}
			defer func() { <-slots }()
			return next(ctx, method, req)
		}
	}
}

// publicBaseHeader carries, from ServeHTTP to the tools (the SDK hands a
// tool its request's header), the scheme and host the caller used to
// reach /mcp; noPublicBase when the request named no usable host (the
// tools then hand out the URL's path alone).
const (
	publicBaseHeader = "Paddock-Mcp-Public-Base"
	noPublicBase     = "none"
)

// maxPublicHost bounds the host a public base is built from.
const maxPublicHost = 255

// publicBase is the scheme and host the caller used, as the preview proxy
// reads them (hostd/previews): X-Forwarded-Proto and X-Forwarded-Host
// when the gateway set them, else the connection's TLS and the Host
// header. A host that is not a plain host[:port] is passed over; "" when
// none is left. A caller who sends a false one only misleads itself: the
// base goes into its own answers.
func publicBase(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if v := r.Header.Get("X-Forwarded-Proto"); v != "" {
		if p := strings.ToLower(strings.TrimSpace(strings.Split(v, ",")[0])); p == "http" || p == "https" {
			scheme = p
		}
	}
	for _, host := range []string{strings.TrimSpace(strings.Split(r.Header.Get("X-Forwarded-Host"), ",")[0]), r.Host} {
		if plainHost(host) {
			return scheme + "://" + host
		}
	}
	return ""
}

// plainHost says whether h is a host[:port] and nothing more.
func plainHost(h string) bool {
	if h == "" || len(h) > maxPublicHost {
		return false
	}
	for _, c := range h {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune(".-_:[]", c)) {
			return false
		}
	}
	return true
}

// callBase is what ServeHTTP recorded for the tool call in ctx: the
// public base, noPublicBase, or "" when the call did not come over HTTP
// (over stdio the client's own daemon URL is the caller's).
func callBase(ctx context.Context) string {
	req, _ := ctx.Value(callKey{}).(*sdk.CallToolRequest)
	if req == nil || req.Extra == nil || req.Extra.Header == nil {
		return ""
	}
	return req.Extra.Header.Get(publicBaseHeader)
}
