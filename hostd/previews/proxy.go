package previews

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"

	"paddock.dev/paddock/hostd/api/routes"
)

// Serving preview URLs. A preview is reached as
//
//	/preview/<token>/<path>        (path form, on the daemon's own origin)
//	<token>.preview.<domain>/<path> (host form, when a domain is set)
//
// The token is the credential: no bearer token is asked for, and every
// way a token can fail (malformed, unknown, expired, revoked, its session
// not running) is the same 404, byte for byte. A live token is
// reverse-proxied to its port on the sandbox's loopback through the
// guest agent's port forward, with the prefix taken off the path.

// Limits on what goes through a preview.
const (
	// MaxPreviewBodyBytes bounds one request body sent through a preview.
	MaxPreviewBodyBytes = routes.PreviewBody
	// MaxPreviewHeaderBytes bounds a request's headers (names and values)
	// and the guest's response headers.
	MaxPreviewHeaderBytes = 64 << 10
	// maxDevToolsBody bounds a DevTools JSON document read for rewriting;
	// a larger one passes unchanged.
	maxDevToolsBody = 1 << 20
	// previewDialTimeout bounds opening a stream to the guest's port.
	previewDialTimeout = 10 * time.Second
	// previewHeaderTimeout bounds the wait for the guest's response
	// headers (a dev server compiling on its first request is slow).
	previewHeaderTimeout = 2 * time.Minute
)

// PreviewCSP is the Content-Security-Policy added to every preview
// response. The page runs in an opaque origin: its scripts, forms, popups
// and dialogs work, but it can read no storage or cookies of the origin
// it is served from (the daemon's, in the path form) and cannot call the
// API as the person viewing it. allow-same-origin is never given: with
// allow-scripts on a shared origin it would undo the sandbox.
const PreviewCSP = "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads"

// previewNotFoundBody is the one answer of every refused token.
var previewNotFoundBody = []byte("404 page not found\n")

// strippedResponseHeaders are response headers a guest may not set: they
// would act on the origin the preview is served from (cookies, clearing
// its storage, HSTS and alternative services for the whole host, network
// error reports sent to the guest's endpoint), not on the preview alone.
var strippedResponseHeaders = []string{"Set-Cookie", "Set-Cookie2", "Clear-Site-Data", "Strict-Transport-Security",
	"Alt-Svc", "Nel", "Report-To", "Reporting-Endpoints", "Service-Worker-Allowed", "Public-Key-Pins", "Public-Key-Pins-Report-Only"}

// strippedRequestHeaders never reach the guest: credentials of the
// viewer (for the daemon or anything else on its origin), and what the
// gateway says about the viewer. Names starting with Paddock- or
// X-Paddock- go too (isIdentityHeader).
var strippedRequestHeaders = []string{"Cookie", "Authorization", "Proxy-Authorization", "Forwarded", "X-Real-Ip",
	"X-Client-Ip", "True-Client-Ip", "X-Remote-User", "Remote-User", "X-Forwarded-User", "X-Forwarded-Email",
	"X-Forwarded-Groups", "X-Auth-Request-User", "X-Auth-Request-Email"}

func isIdentityHeader(name string) bool {
	n := strings.ToLower(name)
	return strings.HasPrefix(n, "paddock-") || strings.HasPrefix(n, "x-paddock-") || strings.HasPrefix(n, "x-forwarded-")
}

// devToolsPaths are the Chrome DevTools HTTP endpoints whose JSON names
// WebSocket URLs; those URLs are rewritten to the preview's own address.
var devToolsPaths = map[string]bool{"/json": true, "/json/": true, "/json/list": true, "/json/list/": true,
	"/json/version": true, "/json/version/": true, "/json/new": true}

// previewCall is what the proxy knows about one request: the resolved
// preview and the address the viewer used.
type previewCall struct {
	target   *PreviewTarget
	path     string // the path the guest sees (escaped)
	prefix   string // "/preview/<token>" in the path form, "" in the host form
	host     string // the host the viewer used (X-Forwarded-Host or Host)
	secure   bool   // the viewer used https (X-Forwarded-Proto or TLS)
	devtools bool   // a DevTools JSON request
}

type previewCallKey struct{}

// previewHandler serves preview URLs.
type previewHandler struct {
	p      *Service
	domain string // host form: <token>.preview.<domain>; "" turns it off
	proxy  *httputil.ReverseProxy
}

// Handler returns the handler of preview URLs: the path form
// /preview/<token>/<path>, and, when domain is not empty, the host form
// <token>.preview.<domain> (any port) with the whole path going to the
// guest. A request of neither shape is 404. The daemon's own handler
// (hostd/api) serves the path form with it; a gateway in front sends the
// host form here (or uses Wrap).
//
// Every token failure is the same 404 (previewNotFoundBody). A live token
// whose port refuses the connection is 502 (the holder of a live URL
// learns nothing new from it, and it says the server is not up yet). The
// request loses Cookie, Authorization, Proxy-Authorization, Forwarded,
// X-Forwarded-*, Paddock-* and X-Paddock-* and other identity headers;
// the guest sees Host localhost:<port>, and an Origin of the preview
// itself (or "null", the sandboxed page's) as http://localhost:<port>.
// Every response gets Content-Security-Policy: PreviewCSP, Referrer-Policy:
// no-referrer and Cache-Control: no-store, and loses Set-Cookie and the
// other strippedResponseHeaders. WebSocket (any Upgrade) is bridged.
// Nothing is ledgered per request.
func (p *Service) Handler(domain string) http.Handler {
	h := &previewHandler{p: p, domain: strings.Trim(strings.ToLower(domain), ".")}
	tr := &http.Transport{
		DialContext:            h.dial,
		MaxIdleConnsPerHost:    8,
		IdleConnTimeout:        30 * time.Second,
		ResponseHeaderTimeout:  previewHeaderTimeout,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: MaxPreviewHeaderBytes,
		DisableCompression:     true,
	}
	h.proxy = &httputil.ReverseProxy{
		Rewrite:        h.rewrite,
		Transport:      tr,
		FlushInterval:  -1, // event streams and long polls of dev servers go out at once
		ModifyResponse: h.modifyResponse,
		ErrorHandler:   h.proxyError,
		ErrorLog:       slog.NewLogLogger(p.log.Handler(), slog.LevelWarn),
	}
	return h
}

// Wrap is the daemon's handler with preview URLs in front: a request
// whose Host is <token>.preview.<domain> goes to the preview handler,
// everything else to next, the API (which serves /preview/ paths).
func (p *Service) Wrap(next http.Handler, domain string) http.Handler {
	ph := p.Handler(domain).(*previewHandler)
	if ph.domain == "" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := ph.hostToken(r.Host); ok {
			ph.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostToken reads the token of a host-form Host header.
func (h *previewHandler) hostToken(host string) (string, bool) {
	if h.domain == "" {
		return "", false
	}
	host = strings.ToLower(host)
	if hn, _, err := net.SplitHostPort(host); err == nil {
		host = hn
	}
	label, ok := strings.CutSuffix(strings.TrimSuffix(host, "."), ".preview."+h.domain)
	if !ok || label == "" || strings.Contains(label, ".") {
		return "", false
	}
	return label, true
}

func (h *previewHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	call := &previewCall{host: r.Host, secure: r.TLS != nil}
	if v := r.Header.Get("X-Forwarded-Host"); v != "" {
		call.host = strings.TrimSpace(strings.Split(v, ",")[0])
	}
	if v := r.Header.Get("X-Forwarded-Proto"); v != "" {
		call.secure = strings.EqualFold(strings.TrimSpace(strings.Split(v, ",")[0]), "https")
	}
	token, hostForm := h.hostToken(r.Host)
	addSlash := false
	if hostForm {
		call.path = r.URL.EscapedPath()
	} else {
		rest, ok := strings.CutPrefix(r.URL.EscapedPath(), PreviewPathPrefix)
		if !ok {
			previewNotFound(w)
			return
		}
		var after string
		var slash bool
		token, after, slash = strings.Cut(rest, "/")
		call.prefix = PreviewPathPrefix + token
		call.path = "/" + after
		addSlash = !slash
	}
	t, err := h.p.ResolvePreview(r.Context(), token)
	if err != nil {
		if !errors.Is(err, ErrPreviewNotFound) {
			h.p.log.Error("preview lookup failed", "err", err)
		}
		previewNotFound(w)
		return
	}
	call.target = t
	if addSlash {
		// /preview/<token> is the preview's root: the page's relative
		// links need the slash.
		loc := call.prefix + "/"
		if r.URL.RawQuery != "" {
			loc += "?" + r.URL.RawQuery
		}
		setPreviewHeaders(w.Header())
		http.Redirect(w, r, loc, http.StatusPermanentRedirect)
		return
	}
	if r.Method == http.MethodConnect {
		previewError(w, http.StatusMethodNotAllowed, "a preview is not a proxy: CONNECT is refused")
		return
	}
	if headerBytes(r.Header) > MaxPreviewHeaderBytes {
		previewError(w, http.StatusRequestHeaderFieldsTooLarge, fmt.Sprintf("the request's headers are over %d bytes", MaxPreviewHeaderBytes))
		return
	}
	if r.ContentLength > MaxPreviewBodyBytes {
		previewError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is over %d bytes", MaxPreviewBodyBytes))
		return
	}
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = http.MaxBytesReader(w, r.Body, MaxPreviewBodyBytes)
	}
	call.devtools = (r.Method == http.MethodGet || r.Method == http.MethodPut) && devToolsPaths[call.path]
	h.proxy.ServeHTTP(informationalWriter{w}, r.WithContext(context.WithValue(r.Context(), previewCallKey{}, call)))
}

// informationalWriter keeps a guest's headers off the 1xx responses the
// proxy relays: httputil.ReverseProxy passes them on through its
// Got1xxResponse hook, which ModifyResponse never sees, so a 103 could
// otherwise bring Set-Cookie or Clear-Site-Data to the viewer. Only Link
// (what Early Hints are for) goes out on a 1xx; 101 is a final answer and
// goes through modifyResponse. Unwrap lets http.ResponseController flush
// and hijack (for 101) through it.
type informationalWriter struct {
	http.ResponseWriter
}

func (w informationalWriter) WriteHeader(code int) {
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		h := w.Header()
		for name := range h {
			if name != "Link" {
				delete(h, name)
			}
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w informationalWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// dial opens the stream to the guest's port for the call in ctx.
func (h *previewHandler) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	call, ok := ctx.Value(previewCallKey{}).(*previewCall)
	if !ok {
		return nil, errors.New("preview transport: no preview in the dial's context")
	}
	ctx, cancel := context.WithTimeout(ctx, previewDialTimeout)
	defer cancel()
	return call.target.Dial(ctx)
}

// rewrite builds the request the guest gets.
func (h *previewHandler) rewrite(pr *httputil.ProxyRequest) {
	call := pr.In.Context().Value(previewCallKey{}).(*previewCall)
	out := pr.Out
	port := strconv.Itoa(call.target.Port)
	// The preview's id keys the transport's pool of guest connections,
	// so a connection is only reused for the preview it was opened for.
	out.URL.Scheme, out.URL.Host = "http", call.target.ID
	out.URL.RawPath = call.path
	out.URL.Path, _ = url.PathUnescape(call.path)
	out.Host = "localhost:" + port
	for _, name := range strippedRequestHeaders {
		out.Header.Del(name)
	}
	for name := range out.Header {
		if isIdentityHeader(name) {
			out.Header.Del(name)
		}
	}
	if o := out.Header.Get("Origin"); o == "null" || o == call.origin() {
		out.Header.Set("Origin", "http://localhost:"+port)
	}
	if call.devtools {
		out.Header.Del("Accept-Encoding") // the JSON is read and rewritten
	}
}

// origin is the preview's own origin as the viewer's browser sees it.
func (c *previewCall) origin() string {
	if c.secure {
		return "https://" + c.host
	}
	return "http://" + c.host
}

// modifyResponse hardens the guest's answer and makes its addresses the
// preview's.
func (h *previewHandler) modifyResponse(resp *http.Response) error {
	call := resp.Request.Context().Value(previewCallKey{}).(*previewCall)
	hd := resp.Header
	for _, name := range strippedResponseHeaders {
		hd.Del(name)
	}
	setPreviewHeaders(hd)
	if loc := hd.Get("Location"); loc != "" {
		hd.Set("Location", call.location(loc))
	}
	if call.devtools && resp.StatusCode == http.StatusOK && hd.Get("Content-Encoding") == "" {
		rewriteDevToolsBody(resp, call)
	}
	return nil
}

// location rewrites a redirect of the guest: a path of its own gets the
// preview's prefix, a URL of localhost:<port> becomes the preview's.
func (c *previewCall) location(loc string) string {
	if strings.HasPrefix(loc, "/") && !strings.HasPrefix(loc, "//") {
		return c.prefix + loc
	}
	u, err := url.Parse(loc)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !c.isGuestHost(u.Host) {
		return loc
	}
	scheme := "http"
	if c.secure {
		scheme = "https"
	}
	u.Scheme, u.Host = scheme, c.host
	u.Path, u.RawPath = c.prefix+u.Path, prefixRaw(c.prefix, u.RawPath)
	return u.String()
}

// isGuestHost reports whether host:port names the guest's own port on
// its loopback, as an app that builds absolute URLs from its Host would.
func (c *previewCall) isGuestHost(hostport string) bool {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil || port != strconv.Itoa(c.target.Port) {
		return false
	}
	switch strings.ToLower(host) {
	case "localhost", "127.0.0.1", "::1", "0.0.0.0":
		return true
	}
	return false
}

func prefixRaw(prefix, raw string) string {
	if raw == "" {
		return ""
	}
	return prefix + raw
}

// rewriteDevToolsBody rewrites the WebSocket URLs in a DevTools JSON
// document (/json, /json/list, /json/version, /json/new) to the preview's
// address, so a CDP client that follows them reaches the browser through
// the preview. Anything it cannot parse passes unchanged.
func rewriteDevToolsBody(resp *http.Response, call *previewCall) {
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxDevToolsBody+1))
	if err != nil || len(data) > maxDevToolsBody {
		resp.Body = readCloser{io.MultiReader(bytes.NewReader(data), resp.Body), resp.Body}
		return
	}
	resp.Body.Close()
	if out, ok := rewriteDevTools(data, call); ok {
		data = out
	}
	resp.Body = io.NopCloser(bytes.NewReader(data))
	resp.ContentLength = int64(len(data))
	resp.TransferEncoding = nil
	resp.Header.Set("Content-Length", strconv.Itoa(len(data)))
}

type readCloser struct {
	io.Reader
	io.Closer
}

// rewriteDevTools rewrites one DevTools document: an object or a list of
// objects whose webSocketDebuggerUrl and devtoolsFrontendUrl* fields name
// the browser's own address.
func rewriteDevTools(data []byte, call *previewCall) ([]byte, bool) {
	var one map[string]json.RawMessage
	if json.Unmarshal(data, &one) == nil {
		if !rewriteDevToolsObject(one, call) {
			return nil, false
		}
		return marshalNoEscape(one)
	}
	var list []map[string]json.RawMessage
	if json.Unmarshal(data, &list) != nil {
		return nil, false
	}
	changed := false
	for _, o := range list {
		changed = rewriteDevToolsObject(o, call) || changed
	}
	if !changed {
		return nil, false
	}
	return marshalNoEscape(list)
}

func rewriteDevToolsObject(o map[string]json.RawMessage, call *previewCall) bool {
	changed := false
	for k, raw := range o {
		var v string
		if json.Unmarshal(raw, &v) != nil || v == "" {
			continue
		}
		var nv string
		switch {
		case k == "webSocketDebuggerUrl":
			nv = call.devToolsWebSocket(v)
		case strings.HasPrefix(k, "devtoolsFrontendUrl"):
			nv = call.devToolsFrontend(v)
		default:
			continue
		}
		if nv == v {
			continue
		}
		if b, ok := marshalNoEscape(nv); ok {
			o[k] = b
			changed = true
		}
	}
	return changed
}

func marshalNoEscape(v any) ([]byte, bool) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return nil, false
	}
	return bytes.TrimRight(b.Bytes(), "\n"), true
}

// wsAddress is the preview's WebSocket address for a guest path:
// ws[s]://<host><prefix><path>.
func (c *previewCall) wsAddress(pathAndQuery string) string {
	if c.secure {
		return "wss://" + c.host + c.prefix + pathAndQuery
	}
	return "ws://" + c.host + c.prefix + pathAndQuery
}

// devToolsWebSocket rewrites ws://127.0.0.1:9222/devtools/page/ID.
func (c *previewCall) devToolsWebSocket(v string) string {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") {
		return v
	}
	return c.wsAddress(u.RequestURI())
}

// devToolsFrontend rewrites the ws= (or wss=) parameter of a frontend URL
// (/devtools/inspector.html?ws=127.0.0.1:9222/devtools/page/ID, or the
// same on Chrome's hosted frontend), and puts a frontend path the browser
// serves itself under the preview.
func (c *previewCall) devToolsFrontend(v string) string {
	base, query, ok := strings.Cut(v, "?")
	if !ok {
		return v
	}
	params := strings.Split(query, "&")
	found := false
	for i, p := range params {
		name, val, _ := strings.Cut(p, "=")
		if name != "ws" && name != "wss" {
			continue
		}
		if un, err := url.QueryUnescape(val); err == nil {
			val = un
		}
		_, path, hasPath := strings.Cut(val, "/")
		if !hasPath {
			continue
		}
		addr := strings.TrimPrefix(strings.TrimPrefix(c.wsAddress("/"+path), "wss://"), "ws://")
		scheme := "ws"
		if c.secure {
			scheme = "wss"
		}
		params[i] = scheme + "=" + addr
		found = true
	}
	if !found {
		return v
	}
	if strings.HasPrefix(base, "/") && !strings.HasPrefix(base, "//") {
		base = c.prefix + base
	}
	return base + "?" + strings.Join(params, "&")
}

// proxyError answers a request the guest could not take: 413 for a body
// over the limit; the token's 404 when the preview stopped being live
// meanwhile (so a revoked URL never answers otherwise); else 502, the
// port is not answering. A viewer who went away gets nothing.
func (h *previewHandler) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		previewError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is over %d bytes", MaxPreviewBodyBytes))
		return
	}
	if r.Context().Err() != nil {
		return
	}
	call, _ := r.Context().Value(previewCallKey{}).(*previewCall)
	if call == nil {
		previewNotFound(w)
		return
	}
	if _, rerr := h.p.ResolvePreview(r.Context(), tokenOf(call, r)); rerr != nil {
		previewNotFound(w)
		return
	}
	msg := "the preview's port in the sandbox did not answer"
	switch {
	case errors.Is(err, ErrBadGateway):
		msg = strings.TrimPrefix(err.Error(), ErrBadGateway.Error()+": ")
	case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		msg = fmt.Sprintf("the server on port %d in the sandbox did not answer in time", call.target.Port)
	}
	h.p.log.Debug("preview upstream failed", "preview", call.target.ID, "session", call.target.Session, "err", err)
	previewError(w, http.StatusBadGateway, msg)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// tokenOf finds the request's token again (for the recheck after an
// upstream failure).
func tokenOf(call *previewCall, r *http.Request) string {
	if call.prefix != "" {
		return strings.TrimPrefix(call.prefix, PreviewPathPrefix)
	}
	host := strings.ToLower(r.Host)
	if hn, _, err := net.SplitHostPort(host); err == nil {
		host = hn
	}
	label, _, _ := strings.Cut(host, ".")
	return label
}

// setPreviewHeaders sets what every preview answer carries.
func setPreviewHeaders(h http.Header) {
	h.Add("Content-Security-Policy", PreviewCSP)
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
}

// previewNotFound is the one answer of a token that leads nowhere.
func previewNotFound(w http.ResponseWriter) {
	previewText(w, http.StatusNotFound, previewNotFoundBody)
}

// previewError answers with status and a line of text.
func previewError(w http.ResponseWriter, status int, msg string) {
	previewText(w, status, []byte(fmt.Sprintf("%d %s: %s\n", status, strings.ToLower(http.StatusText(status)), msg)))
}

func previewText(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	for k := range h {
		delete(h, k)
	}
	setPreviewHeaders(h)
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}

// headerBytes is the size of a request's header names and values.
func headerBytes(h http.Header) int {
	n := 0
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}
