// Package auth is the gateway's bearer-token check, the Caddy module
// http.handlers.paddock_auth. It asks hostd who a token belongs to (GET
// /v1/whoami over hostd's unix socket, so it works the same whether the
// gateway runs inside `paddock serve` or alone as `paddock gateway`),
// answers 401 at the edge for a missing, unknown, revoked or expired
// token, and otherwise passes the request on with the caller's identity in
// the Paddock-Identity header.
//
// The header is for hostd's logs and audit only. hostd never trusts it for
// authorization: the Authorization header goes on untouched and hostd
// verifies the token again itself (defence in depth), so a compromised
// gateway can relay tokens it has seen but cannot mint an identity. Any
// identity header a client sent (Paddock-Identity and the like) is
// removed before anything else happens.
//
// Terminal WebSockets opened by browsers carry a single-use ticket
// (?ticket=) instead of a bearer token, since a browser cannot set
// Authorization on a WebSocket: such a request (a route whose row in
// hostd's route table, hostd/api/routes, takes a ticket, given a ticket
// and no Authorization) goes through to hostd without an identity, and
// hostd checks the ticket.
package auth

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"paddock.dev/paddock/errdefs"
	"paddock.dev/paddock/hostd/api/routes"
	hauth "paddock.dev/paddock/hostd/auth"
)

// IdentityHeader carries the verified caller (hostd's ledger actor:
// "admin", "tenant:<name>" or "session-token:<id>") from the gateway to
// hostd, for its logs.
const IdentityHeader = "Paddock-Identity"

// Defaults of the module's settings.
const (
	DefaultTimeout  = 5 * time.Second
	maxCacheEntries = 4096
)

func init() {
	caddy.RegisterModule(Auth{})
}

// Auth is the http.handlers.paddock_auth module.
type Auth struct {
	// HostdSocket is the path of hostd's API socket.
	HostdSocket string `json:"hostd_socket,omitempty"`
	// CacheTTL keeps a token's verified identity this long, so a burst of
	// requests asks hostd once. 0 asks every time. A revoked token may
	// pass the edge for up to this long; hostd still refuses it.
	CacheTTL caddy.Duration `json:"cache_ttl,omitempty"`
	// Timeout bounds one question to hostd (default 5 s).
	Timeout caddy.Duration `json:"timeout,omitempty"`

	client *http.Client
	cache  *identityCache
	logger *zap.Logger
}

// New returns the module for hostd's socket at socket. It does nothing
// else: the connection to hostd is set up by Provision.
func New(socket string) *Auth { return &Auth{HostdSocket: socket} }

// CaddyModule implements caddy.Module.
func (Auth) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.paddock_auth",
		New: func() caddy.Module { return new(Auth) },
	}
}

// Provision implements caddy.Provisioner.
func (a *Auth) Provision(ctx caddy.Context) error {
	a.logger = ctx.Logger()
	timeout := time.Duration(a.Timeout)
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	a.client = hostdClient(a.HostdSocket, timeout)
	if a.CacheTTL > 0 {
		a.cache = &identityCache{entries: map[[32]byte]cacheEntry{}}
	}
	return nil
}

// hostdClient is an HTTP client whose every connection goes to the unix
// socket at socket.
func hostdClient(socket string, timeout time.Duration) *http.Client {
	var d net.Dialer
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return d.DialContext(ctx, "unix", socket)
			},
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     time.Minute,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Validate implements caddy.Validator.
func (a *Auth) Validate() error {
	if a.HostdSocket == "" {
		return errors.New("paddock_auth: hostd_socket is required (the path of hostd's API socket)")
	}
	if a.CacheTTL < 0 || a.Timeout < 0 {
		return errors.New("paddock_auth: cache_ttl and timeout cannot be negative")
	}
	return nil
}

// Cleanup implements caddy.CleanerUpper.
func (a *Auth) Cleanup() error {
	if a.client != nil {
		a.client.CloseIdleConnections()
	}
	return nil
}

// ServeHTTP implements caddyhttp.MiddlewareHandler.
func (a *Auth) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	StripIdentity(r.Header)
	if IsTicketRequest(r) {
		return next.ServeHTTP(w, r)
	}
	token, ok := hauth.BearerToken(r)
	if !ok || len(token) > hauth.MaxTokenBytes {
		writeError(w, hauth.ErrUnauthenticated)
		return nil
	}
	key := sha256.Sum256([]byte(token))
	if actor, ok := a.cache.get(key); ok {
		r.Header.Set(IdentityHeader, actor)
		return next.ServeHTTP(w, r)
	}
	who, status, body, err := a.whoami(r.Context(), token)
	switch {
	case err != nil:
		a.logger.Error("asking hostd who a token is", zap.Error(err))
		writeError(w, fmt.Errorf("%w: gateway: hostd did not answer: try again, or check that paddock serve runs", errdefs.ErrBadGateway))
		return nil
	case status == http.StatusUnauthorized:
		// hostd's own answer, so the edge and hostd refuse alike.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write(body)
		return nil
	case status != http.StatusOK:
		a.logger.Error("hostd answered whoami unexpectedly", zap.Int("status", status))
		writeError(w, fmt.Errorf("%w: gateway: hostd answered %d to whoami", errdefs.ErrBadGateway, status))
		return nil
	}
	actor := hauth.Identity{Kind: who.Kind, Tenant: who.Tenant, TokenID: who.TokenID}.Actor()
	if a.CacheTTL > 0 {
		exp := time.Now().Add(time.Duration(a.CacheTTL))
		if who.ExpiresAt != nil && who.ExpiresAt.Before(exp) {
			exp = *who.ExpiresAt
		}
		a.cache.put(key, actor, exp)
	}
	r.Header.Set(IdentityHeader, actor)
	return next.ServeHTTP(w, r)
}

// whoami asks hostd who token is. A 200 comes back decoded; any other
// status with its body.
func (a *Auth) whoami(ctx context.Context, token string) (hauth.WhoAmI, int, []byte, error) {
	var who hauth.WhoAmI
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://hostd/v1/whoami", nil)
	if err != nil {
		return who, 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := a.client.Do(req)
	if err != nil {
		return who, 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return who, 0, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return who, resp.StatusCode, body, nil
	}
	if err := json.Unmarshal(body, &who); err != nil || who.Kind == "" {
		return who, 0, nil, fmt.Errorf("whoami answered %q", body)
	}
	return who, resp.StatusCode, nil, nil
}

// identityHeaders are request headers that claim who the caller is. A
// client never gets to set them: the gateway removes them, and sets
// IdentityHeader itself after checking the token.
var identityHeaders = []string{
	"X-Forwarded-User", "X-Forwarded-Email", "X-Forwarded-Preferred-Username", "X-Forwarded-Groups",
	"X-Remote-User", "Remote-User", "X-Auth-Request-User", "X-Auth-Request-Email", "X-User", "X-Identity",
}

// StripIdentity removes every identity header from h: every Paddock-* and
// X-Paddock-* header, and the usual names proxies use for a verified user.
func StripIdentity(h http.Header) {
	for name := range h {
		if strings.HasPrefix(name, "Paddock-") || strings.HasPrefix(name, "X-Paddock-") {
			delete(h, name)
		}
	}
	for _, name := range identityHeaders {
		h.Del(name)
	}
}

// IsTicketRequest reports whether r authenticates with a terminal ticket
// rather than a bearer token: a request for a route whose row in hostd's
// route table takes a ticket (routes.Route.Ticket: a session's terminal
// WebSocket), with a ticket= parameter and no Authorization header. hostd
// checks the ticket.
func IsTicketRequest(r *http.Request) bool {
	if r.URL.Query().Get("ticket") == "" || r.Header.Get("Authorization") != "" {
		return false
	}
	// The method too: the router matches HEAD to a GET pattern, and only
	// the row's own method takes a ticket at the edge.
	rt, ok := routes.Match(r)
	return ok && rt.Ticket && r.Method == rt.Method()
}

// writeError answers in hostd's error shape, {"error": "...", "code":
// "..."}, with the status and code of err's errdefs kind.
func writeError(w http.ResponseWriter, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(errdefs.HTTPStatus(err))
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(map[string]string{"error": err.Error(), "code": errdefs.Code(err)})
}

// identityCache keeps verified identities by the token's SHA-256.
type identityCache struct {
	mu      sync.Mutex
	entries map[[32]byte]cacheEntry
}

type cacheEntry struct {
	actor string
	exp   time.Time
}

func (c *identityCache) get(key [32]byte) (string, bool) {
	if c == nil {
		return "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || !time.Now().Before(e.exp) {
		delete(c.entries, key)
		return "", false
	}
	return e.actor, true
}

func (c *identityCache) put(key [32]byte, actor string, exp time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= maxCacheEntries {
		clear(c.entries)
	}
	c.entries[key] = cacheEntry{actor: actor, exp: exp}
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*Auth)(nil)
	_ caddy.Validator             = (*Auth)(nil)
	_ caddy.CleanerUpper          = (*Auth)(nil)
	_ caddyhttp.MiddlewareHandler = (*Auth)(nil)
)
