// Package cors lets web pages on origins the operator lists call the API
// from a browser: the Caddy module http.handlers.paddock_cors, placed in
// front of the token check (gateway/auth).
//
// A browser sends a preflight (OPTIONS with Origin and
// Access-Control-Request-Method) before any call that carries a bearer
// token. The preflight has no token, so it must be answered before
// paddock_auth, which would refuse it with 401. For a listed origin this
// module answers it itself with 204 and the methods and request headers
// the API uses; the browser then sends the real call, whose answer (hostd's
// or the gateway's own, such as a 401 or a 413) carries
// Access-Control-Allow-Origin with that origin and the response headers a
// client may read.
//
// An origin is listed exactly (scheme, host and port): there is no `*`,
// no pattern and no `null`, and credentials (cookies) are never allowed,
// since the API takes bearer tokens only. A request from an origin not
// listed passes through untouched: no CORS header is added, its preflight
// meets the token check's 401, and the browser blocks the call. Preview
// paths and the console are left alone (previews answer for the guest's
// app, and the console is served on the API's own origin).
package cors

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"paddock.dev/paddock/hostd/api/routes"
)

// Limits on the operator's list.
const (
	// MaxOrigins is the most origins one gateway lists.
	MaxOrigins = 64
	// MaxOriginBytes is the longest origin taken (a host name is at most
	// 253 bytes; the scheme and port add a few).
	MaxOriginBytes = 300
	// MaxAge is how long, in seconds, a browser may keep a preflight's
	// answer (Chromium keeps it 2 hours at most).
	MaxAge = 7200
)

// AllowHeaders are the request headers a page may send: the ones the
// API reads and the SDKs send (the bearer token, JSON bodies, retries,
// revisions, resumed streams, and the MCP server's session and version).
var AllowHeaders = []string{
	"Authorization", "Content-Type", "Idempotency-Key", "If-Match", "Last-Event-ID",
	"Mcp-Session-Id", "Mcp-Protocol-Version",
}

// ExposeHeaders are the response headers, beyond the ones a browser
// always shows a page (Content-Type, Content-Length, Cache-Control…),
// that the API sends for a client to read: an idempotent retry's replay
// marker, the MCP server's session id, and the challenge of a 401.
var ExposeHeaders = []string{"Idempotent-Replayed", "Mcp-Session-Id", "WWW-Authenticate"}

// AllowMethods are the methods of the API's routes (hostd's route table
// and the rows served in front of it), in a fixed order.
func AllowMethods() []string {
	var out []string
	for _, rt := range append(routes.All(), routes.Outside()...) {
		if m := rt.Method(); !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	slices.Sort(out)
	return out
}

func init() {
	caddy.RegisterModule(CORS{})
}

// CORS is the http.handlers.paddock_cors module.
type CORS struct {
	// Origins are the pages' origins allowed to call the API, each an
	// exact scheme://host[:port].
	Origins []string `json:"origins,omitempty"`

	allowed          map[string]bool
	methods, headers string
	exposed, maxAge  string
}

// New returns the module for origins. It does nothing else: the list is
// checked by Provision.
func New(origins ...string) *CORS { return &CORS{Origins: origins} }

// CaddyModule implements caddy.Module.
func (CORS) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.paddock_cors",
		New: func() caddy.Module { return new(CORS) },
	}
}

// Provision implements caddy.Provisioner: every origin is checked and put
// in the form a browser sends it.
func (c *CORS) Provision(caddy.Context) error {
	list, err := ParseOrigins(c.Origins)
	if err != nil {
		return err
	}
	c.allowed = map[string]bool{}
	for _, o := range list {
		c.allowed[o] = true
	}
	c.methods = strings.Join(AllowMethods(), ", ")
	c.headers = strings.Join(AllowHeaders, ", ")
	c.exposed = strings.Join(ExposeHeaders, ", ")
	c.maxAge = strconv.Itoa(MaxAge)
	return nil
}

// Validate implements caddy.Validator.
func (c *CORS) Validate() error {
	if len(c.allowed) == 0 {
		return errors.New("paddock_cors: no origin listed (give each page's origin, https://app.example.com)")
	}
	return nil
}

// ParseOrigins checks a list of origins (ParseOrigin) and returns them in
// the form browsers send, without repeats.
func ParseOrigins(list []string) ([]string, error) {
	if len(list) > MaxOrigins {
		return nil, fmt.Errorf("paddock_cors: %d origins listed, at most %d", len(list), MaxOrigins)
	}
	var out []string
	for _, s := range list {
		o, err := ParseOrigin(s)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	return out, nil
}

var hostnameRE = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// ParseOrigin checks one origin, scheme://host[:port] with scheme http or
// https, and returns it as a browser's Origin header carries it: lower
// case, without the scheme's default port. A wildcard, null, a path, a
// query, user info or a host that is not a name or an address is refused,
// with what to write instead.
func ParseOrigin(s string) (string, error) {
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("paddock_cors: origin %q: %s", s, why)
	}
	switch {
	case len(s) > MaxOriginBytes:
		return "", fmt.Errorf("paddock_cors: an origin of %d bytes: at most %d", len(s), MaxOriginBytes)
	case s == "*" || strings.Contains(s, "*"):
		return bad("no wildcards: list each page's origin, e.g. https://app.example.com")
	case strings.EqualFold(s, "null"):
		return bad("null is the origin of sandboxed frames and local files, which any page can take on: never allowed")
	}
	for _, r := range s {
		if r <= ' ' || r >= 0x7f {
			return bad("only printable ASCII (write an international name in its xn-- form)")
		}
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return bad("want scheme://host[:port], e.g. https://app.example.com")
	}
	scheme = strings.ToLower(scheme)
	if scheme != "https" && scheme != "http" {
		return bad("the scheme must be https or http")
	}
	if strings.ContainsAny(rest, "/?#@\\") {
		return bad("an origin is scheme://host[:port] alone: no path (not even /), query, fragment or user")
	}
	u, err := url.Parse(scheme + "://" + rest)
	if err != nil || u.Host == "" {
		return bad("want scheme://host[:port], e.g. https://app.example.com")
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if strings.HasSuffix(rest, ":") {
		return bad("a colon with no port after it")
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '0' {
			return bad("the port must be a number from 1 to 65535")
		}
		if (scheme == "https" && n == 443) || (scheme == "http" && n == 80) {
			port = "" // a browser leaves the default port out
		}
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" {
			return bad("an address with a zone is not an origin")
		}
		if ip.Is6() && !strings.HasPrefix(rest, "[") {
			return bad("an IPv6 address goes in brackets")
		}
		host = ip.String()
		if ip.Is6() {
			host = "[" + host + "]"
		}
	} else if strings.HasPrefix(rest, "[") || len(host) > 253 || !hostnameRE.MatchString(host) {
		return bad("the host must be a host name or an IP address")
	}
	if port == "" {
		return scheme + "://" + host, nil
	}
	return scheme + "://" + net.JoinHostPort(strings.Trim(host, "[]"), port), nil
}

// skipped are paths this module never answers for: preview URLs and the
// web console.
func skipped(path string) bool {
	return path == "/console" || strings.HasPrefix(path, "/console/") || strings.HasPrefix(path, "/preview/")
}

// ServeHTTP implements caddyhttp.MiddlewareHandler.
func (c *CORS) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if skipped(r.URL.Path) {
		return next.ServeHTTP(w, r)
	}
	// The answer depends on Origin once any origin is listed, so caches
	// keep one per origin, whether this one is listed or not.
	w.Header().Add("Vary", "Origin")
	origins := r.Header.Values("Origin")
	if len(origins) != 1 || !c.allowed[origins[0]] {
		return next.ServeHTTP(w, r)
	}
	origin := origins[0]
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		// A preflight: answered here, before the token check. The browser
		// compares what it wants to send with these lists.
		h.Add("Vary", "Access-Control-Request-Method")
		h.Add("Vary", "Access-Control-Request-Headers")
		h.Set("Access-Control-Allow-Methods", c.methods)
		h.Set("Access-Control-Allow-Headers", c.headers)
		h.Set("Access-Control-Max-Age", c.maxAge)
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	h.Set("Access-Control-Expose-Headers", c.exposed)
	return next.ServeHTTP(w, r)
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*CORS)(nil)
	_ caddy.Validator             = (*CORS)(nil)
	_ caddyhttp.MiddlewareHandler = (*CORS)(nil)
)
