package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The front end reads HTTP/1 requests from a sandbox connection itself
// (net/http's server would drop the Host header of an absolute-form
// request, which the proxy must compare with the URI), checks what can be
// checked on the request as it came, and hands each one to goproxy with an
// http.ResponseWriter of its own.

// clientConn is one sandbox connection that speaks HTTP/1 to the proxy.
type clientConn struct {
	conn net.Conn
	lim  *headLimit
	br   *bufio.Reader

	head bytes.Buffer  // the current request's head as it came, for its Host headers
	icpt *interception // set when the connection is decrypted TLS of an intercepted tunnel

	wmu         sync.Mutex // guards bw and headWritten: a body read may answer 100 Continue
	bw          *bufio.Writer
	headWritten bool // the current response's head is out: too late for 100 Continue
	continued   bool // the current request got 100 Continue
}

func (p *Proxy) newClientConn(c net.Conn) *clientConn {
	lim := &headLimit{r: c, n: -1}
	return &clientConn{
		conn: c,
		lim:  lim,
		br:   bufio.NewReaderSize(lim, 4096),
		bw:   bufio.NewWriterSize(deadlineWriter{c, p.cfg.IdleTimeout}, 8192),
	}
}

// writeNow writes b and flushes.
func (cc *clientConn) writeNow(b []byte) error {
	cc.wmu.Lock()
	defer cc.wmu.Unlock()
	if _, err := cc.bw.Write(b); err != nil {
		return err
	}
	return cc.bw.Flush()
}

// sendContinue answers Expect: 100-continue, unless the response has begun.
func (cc *clientConn) sendContinue() error {
	cc.wmu.Lock()
	defer cc.wmu.Unlock()
	if cc.headWritten || cc.continued {
		return nil
	}
	if _, err := cc.bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
		return err
	}
	cc.continued = true
	return cc.bw.Flush()
}

// awaitsContinue reports whether a request that expects 100 Continue never
// got it: its client may never send the body.
func (cc *clientConn) awaitsContinue(expect bool) bool {
	cc.wmu.Lock()
	defer cc.wmu.Unlock()
	return expect && !cc.continued
}

// serveForward serves a forward-proxy connection.
func (p *Proxy) serveForward(sb *sandbox, c net.Conn) {
	c.SetReadDeadline(time.Now().Add(p.cfg.HeaderTimeout))
	p.serveHTTP(sb, p.newClientConn(c), 0)
}

// serveHTTP reads and serves requests on cc until it closes, idles, or a
// request ends it. redirected is the original destination port of a
// transparent connection, or 0 on the forward proxy.
func (p *Proxy) serveHTTP(sb *sandbox, cc *clientConn, redirected int) {
	ctx, cancel := context.WithCancel(p.ctx)
	defer cancel()
	for n := 0; ; n++ {
		if n > 0 {
			cc.conn.SetReadDeadline(time.Now().Add(p.cfg.IdleTimeout))
			if _, err := cc.br.Peek(1); err != nil {
				return
			}
			cc.conn.SetReadDeadline(time.Now().Add(p.cfg.HeaderTimeout))
		}
		req, hosts, err := cc.readRequest(p.cfg.MaxHeaderBytes)
		tooLarge := cc.lim.hit
		if err != nil {
			t := &target{sb: sb}
			switch {
			case tooLarge:
				err = p.deny(t, ErrHeaderTooLarge, "", fmt.Sprintf("the request head is over %d bytes", p.cfg.MaxHeaderBytes))
			case quietEnd(err):
				return
			default:
				p.record(kindDeny, t, "", "malformed HTTP/1 request")
				err = &refusal{err: ErrBadRequest, reason: clip(err.Error(), 200)}
			}
			cc.writeNow(refusalResponse(err, true))
			return
		}
		cc.conn.SetReadDeadline(time.Time{})
		cc.wmu.Lock()
		cc.headWritten, cc.continued = false, false
		cc.wmu.Unlock()
		if !p.serveRequest(ctx, sb, cc, req, hosts, redirected) {
			return
		}
	}
}

// serveRequest serves one request and reports whether the connection may
// carry another.
func (p *Proxy) serveRequest(ctx context.Context, sb *sandbox, cc *clientConn, req *http.Request, hosts []string, redirected int) bool {
	t, err := p.examine(sb, req, hosts, redirected, cc.icpt)
	if err != nil {
		cc.writeNow(refusalResponse(err, true))
		return false
	}
	var body *clientBody
	expect := strings.EqualFold(strings.TrimSpace(req.Header.Get("Expect")), "100-continue")
	if req.Body != nil && req.Body != http.NoBody {
		body = &clientBody{rc: req.Body, cc: cc, idle: p.cfg.IdleTimeout, expect: expect}
		req.Body = body
	} else {
		expect = false
	}
	if req.Method != http.MethodConnect {
		req.URL.Scheme = t.scheme
		req.URL.Host = t.hostport()
	}
	req = req.WithContext(context.WithValue(ctx, targetKey{}, t))

	w := &responseWriter{cc: cc, req: req, header: http.Header{}, expect: expect}
	p.gp.ServeHTTP(w, req)
	if w.hijacked {
		return false // a tunnel owned the connection and has closed it
	}
	if err := w.finish(); err != nil || w.closeAfter || req.Close {
		return false
	}
	return body == nil || body.settle()
}

// examine checks a request as it came, before any policy: the form, the
// method, the host (canonicalised, and the Host header agreeing with the
// URI), and the canonical path. Inside intercepted TLS (in set) the
// request must be in origin form and its Host header must name the
// tunnel's host and port. Refusals are recorded.
func (p *Proxy) examine(sb *sandbox, req *http.Request, hosts []string, redirected int, in *interception) (*target, error) {
	t := &target{sb: sb, method: req.Method, scheme: "http", icpt: in}
	if in != nil {
		t.scheme = "https"
	}
	connect := req.Method == http.MethodConnect
	absolute := !connect && req.URL.IsAbs()
	folded := hosts == nil
	if len(hosts) == 1 && hosts[0] == "" {
		hosts = hosts[:0] // an empty Host header says nothing
	}

	var authority string
	defPort := 80
	if in != nil {
		defPort = 443
	}
	switch {
	case connect:
		authority, defPort, t.scheme, t.method = req.URL.Host, 0, "https", "" // a tunnel decision has no method
	case absolute:
		authority = req.URL.Host
	case len(hosts) > 0:
		authority = hosts[0]
	}
	host, port, explicit, splitErr := splitAuthority(authority, defPort)
	t.host, t.port = clip(strings.ToLower(host), 255), port
	if !connect {
		t.path = clip(rawPath(req.RequestURI, absolute), 1024)
	}
	refuse := func(kind error, format string, args ...any) (*target, error) {
		return nil, p.deny(t, kind, "", fmt.Sprintf(format, args...))
	}

	switch {
	case folded:
		return refuse(ErrBadRequest, "a folded (obs-fold) header line")
	case len(hosts) > 1:
		return refuse(ErrBadRequest, "%d Host headers: a request has one", len(hosts))
	case req.ProtoMajor != 1:
		return refuse(ErrUnsupported, "only HTTP/1.0 and HTTP/1.1 are spoken here")
	case req.Method == "TRACE" || req.Method == "TRACK":
		return refuse(ErrMethodRefused, "%s is refused: it would echo the request, headers and all, back", req.Method)
	case connect && redirected != 0:
		return refuse(ErrMethodRefused, "CONNECT on a redirected connection")
	case connect && in != nil:
		return refuse(ErrMethodRefused, "CONNECT inside an intercepted TLS connection")
	case absolute && in != nil:
		return refuse(ErrBadRequest, "inside TLS a request names its path, not an absolute URI")
	case in != nil && req.Header.Get("Upgrade") != "":
		return refuse(ErrUnsupported, "protocol upgrades (websockets) to %s are not supported: its requests are judged one by one", in.tun.t.host)
	case !connect && req.Header.Get("Upgrade") != "":
		return refuse(ErrUnsupported, "protocol upgrades (websockets) over plain http are not supported; use https, whose tunnel carries them")
	case req.URL.User != nil:
		return refuse(ErrBadRequest, "credentials in the URL are refused")
	case absolute && req.URL.Scheme != "http":
		return refuse(ErrBadRequest, "only http:// URLs are proxied as requests; %s goes through CONNECT", req.URL.Scheme)
	case authority == "" && connect:
		return refuse(ErrBadRequest, "CONNECT needs host:port")
	case authority == "":
		return refuse(ErrBadRequest, "no host: send an absolute URI or a Host header")
	case splitErr != nil:
		return refuse(ErrBadRequest, "%v", splitErr)
	}

	canon, ip, err := p.cfg.CanonicalHost(host)
	if err != nil {
		return refuse(ErrBadRequest, "host %q: %v", clip(host, 255), err)
	}
	t.host, t.ip = canon, ip

	if in != nil {
		if want := in.tun.t; canon != want.host || port != want.port {
			return refuse(ErrDenied, "the Host header %q does not name %s, the host this TLS connection was opened to", clip(authority, 255), want.hostport())
		}
	}
	if (connect || absolute) && len(hosts) == 1 {
		hh, hp, hexplicit, err := splitAuthority(hosts[0], port)
		var hc string
		if err == nil {
			hc, _, err = p.cfg.CanonicalHost(hh)
		}
		if err != nil || hc != canon || hexplicit && hp != port {
			return refuse(ErrBadRequest, "the Host header %q does not match the request's host %s", clip(hosts[0], 255), t.hostport())
		}
	}
	if redirected != 0 {
		if explicit && port != redirected {
			return refuse(ErrBadRequest, "the Host header names port %d, but the connection was to port %d", port, redirected)
		}
		t.port = redirected
	}
	if connect {
		return t, nil
	}

	if req.URL.Opaque != "" || !absolute && !strings.HasPrefix(req.RequestURI, "/") {
		return refuse(ErrBadRequest, "the request target %q is not a path", clip(req.RequestURI, 255))
	}
	// A '#' has no place in a request target (a fragment is never sent),
	// and net/http would keep it in the path it forwards: what was judged
	// and what goes upstream must be the same bytes.
	if strings.ContainsRune(req.RequestURI, '#') {
		return refuse(ErrBadRequest, "the request target holds a '#'")
	}
	path, err := p.cfg.CanonicalPath(rawPath(req.RequestURI, absolute))
	if err != nil {
		return refuse(ErrBadRequest, "%v", err)
	}
	if sent := req.URL.EscapedPath(); sent != path {
		return refuse(ErrBadRequest, "the path %q would be sent as %q", clip(path, 200), clip(sent, 200))
	}
	t.path = path
	return t, nil
}

// rawPath is the path of a request target exactly as it was sent, without
// the scheme, authority and query.
func rawPath(uri string, absolute bool) string {
	if absolute {
		if i := strings.Index(uri, "://"); i >= 0 {
			uri = uri[i+3:]
		}
		j := strings.IndexAny(uri, "/?#")
		if j < 0 {
			return ""
		}
		uri = uri[j:]
	}
	if k := strings.IndexAny(uri, "?#"); k >= 0 {
		uri = uri[:k]
	}
	return uri
}

// readRequest reads one request head within max bytes, with the values of
// its Host header lines as they came: net/http parses the request but
// drops the Host header, so the front end keeps a copy of the head bytes
// (those the reader held already, and those read now) and finds them
// there. hosts is nil if the head has a folded line.
func (cc *clientConn) readRequest(max int) (*http.Request, []string, error) {
	cc.head.Reset()
	held, _ := cc.br.Peek(cc.br.Buffered())
	cc.head.Write(held)
	cc.lim.set(int64(max))
	cc.lim.rec = &cc.head
	req, err := http.ReadRequest(cc.br)
	cc.lim.rec = nil
	if err != nil {
		return nil, nil, err // cc.lim.hit says whether the limit was the cause
	}
	cc.lim.set(-1)
	head := cc.head.Bytes()[:cc.head.Len()-cc.br.Buffered()]
	hosts, ok := hostLines(head)
	if !ok {
		hosts = nil
	}
	if cc.head.Cap() > 16<<10 {
		cc.head = bytes.Buffer{} // keep no large buffer for the connection's life
	}
	return req, hosts, nil
}

// hostLines returns the values of the Host header lines in a request head,
// and false if the head has a folded (obs-fold) line.
func hostLines(head []byte) ([]string, bool) {
	hosts := []string{}
	first := true
	for line := range bytes.Lines(head) {
		line = bytes.TrimRight(line, "\r\n")
		if first {
			first = false
			continue
		}
		if len(line) == 0 {
			break
		}
		if line[0] == ' ' || line[0] == '\t' {
			return nil, false
		}
		if len(line) >= 5 && bytes.EqualFold(line[:5], []byte("host:")) {
			hosts = append(hosts, string(bytes.TrimSpace(line[5:])))
		}
	}
	return hosts, true
}

// splitAuthority splits host[:port] (an IPv6 literal in brackets) and
// returns the host without brackets. A missing port is def; def 0 means
// the port is required.
func splitAuthority(a string, def int) (host string, port int, explicit bool, err error) {
	rest := ""
	if strings.HasPrefix(a, "[") {
		end := strings.IndexByte(a, ']')
		if end < 0 {
			return "", 0, false, fmt.Errorf("host %q has an unclosed [", a)
		}
		host, rest = a[1:end], a[end+1:]
		if !strings.Contains(host, ":") {
			return "", 0, false, fmt.Errorf("host %q: only IPv6 literals go in brackets", a)
		}
		if rest != "" && rest[0] != ':' {
			return "", 0, false, fmt.Errorf("host %q has text after ]", a)
		}
	} else {
		host = a
		if i := strings.LastIndexByte(a, ':'); i >= 0 {
			if strings.IndexByte(a[:i], ':') >= 0 {
				return "", 0, false, fmt.Errorf("host %q: an IPv6 literal must be in brackets", a)
			}
			host, rest = a[:i], a[i:]
		}
	}
	if host == "" {
		return "", 0, false, fmt.Errorf("host %q is empty", a)
	}
	if rest == "" || rest == ":" {
		if def == 0 {
			return host, 0, false, fmt.Errorf("%q has no port", a)
		}
		return host, def, false, nil
	}
	digits := rest[1:]
	if len(digits) > 5 {
		return host, 0, false, fmt.Errorf("port %q is out of range", digits)
	}
	for _, c := range []byte(digits) {
		if c < '0' || c > '9' {
			return host, 0, false, fmt.Errorf("port %q is not a number", digits)
		}
	}
	port, _ = strconv.Atoi(digits)
	if port < 1 || port > 65535 {
		return host, 0, false, fmt.Errorf("port %q is out of range", digits)
	}
	return host, port, true, nil
}

// quietEnd reports whether a read error means the client simply went away
// or stayed silent: nothing to answer.
func quietEnd(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrDeadlineExceeded)
}

// headLimit fails reads past n bytes (n < 0: no limit) and says so in hit.
type headLimit struct {
	r   io.Reader
	n   int64
	hit bool
	rec *bytes.Buffer // when set, gets a copy of every byte read
}

var errHeadLimit = errors.New("request head limit reached")

func (l *headLimit) set(n int64) { l.n, l.hit = n, false }

func (l *headLimit) Read(p []byte) (int, error) {
	if l.n < 0 {
		return l.r.Read(p)
	}
	if l.n == 0 {
		l.hit = true
		return 0, errHeadLimit
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	if l.rec != nil {
		l.rec.Write(p[:n])
	}
	return n, err
}

// deadlineWriter gives every write to the client IdleTimeout to finish.
type deadlineWriter struct {
	c    net.Conn
	idle time.Duration
}

func (w deadlineWriter) Write(p []byte) (int, error) {
	w.c.SetWriteDeadline(time.Now().Add(w.idle))
	return w.c.Write(p)
}

// clientBody is a request body the transport reads, with idle deadlines
// and 100 Continue; the front end takes it back with settle.
type clientBody struct {
	mu       sync.Mutex
	rc       io.ReadCloser
	cc       *clientConn
	idle     time.Duration
	expect   bool // the client waits for 100 Continue
	eof      bool
	detached bool
}

var errBodyDetached = errors.New("request body is no longer readable")

func (b *clientBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.detached {
		return 0, errBodyDetached
	}
	if b.eof {
		return 0, io.EOF
	}
	if b.expect {
		if err := b.cc.sendContinue(); err != nil {
			return 0, err
		}
	}
	b.cc.conn.SetReadDeadline(time.Now().Add(b.idle))
	n, err := b.rc.Read(p)
	if errors.Is(err, io.EOF) {
		b.eof = true
	}
	return n, err
}

// Close leaves the body to settle: the transport may close it while the
// client is still sending.
func (b *clientBody) Close() error { return nil }

// settle takes the body back (waiting for a read in progress), reads what
// is left of it up to 256 KiB, and reports whether the connection is at
// the next request.
func (b *clientBody) settle() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.detached = true
	if b.eof {
		return true
	}
	if b.cc.awaitsContinue(b.expect) {
		return false // the client may never send it
	}
	b.cc.conn.SetReadDeadline(time.Now().Add(b.idle))
	_, err := io.CopyN(io.Discard, b.rc, 256<<10)
	return errors.Is(err, io.EOF)
}

// responseWriter writes goproxy's response to the client as HTTP/1.1:
// Content-Length when known, chunked otherwise (close-delimited for an
// HTTP/1.0 client), hop-by-hop headers removed, trailers dropped.
type responseWriter struct {
	cc         *clientConn
	req        *http.Request
	header     http.Header
	expect     bool // the request expects 100 Continue
	wrote      bool
	hijacked   bool
	noBody     bool
	chunked    bool
	remaining  int64 // bytes the Content-Length still promises; -1: none
	closeAfter bool
}

var (
	_ http.ResponseWriter = (*responseWriter)(nil)
	_ http.Flusher        = (*responseWriter)(nil)
	_ http.Hijacker       = (*responseWriter)(nil)
)

func (w *responseWriter) Header() http.Header { return w.header }

func (w *responseWriter) WriteHeader(code int) {
	if w.wrote || w.hijacked || code < 200 {
		return // interim responses are not relayed
	}
	w.wrote = true
	h := w.header
	removeHopByHop(h)
	w.noBody = w.req.Method == http.MethodHead || code == http.StatusNoContent || code == http.StatusNotModified
	w.remaining = -1
	if cl := h.Get("Content-Length"); cl != "" {
		n, err := strconv.ParseInt(cl, 10, 64)
		switch {
		case err != nil || n < 0 || code == http.StatusNoContent:
			h.Del("Content-Length")
		case !w.noBody:
			w.remaining = n
		}
	}
	if !w.noBody && w.remaining < 0 {
		if w.req.ProtoAtLeast(1, 1) {
			w.chunked = true
			h.Set("Transfer-Encoding", "chunked")
		} else {
			w.closeAfter = true
		}
	}
	w.cc.wmu.Lock()
	defer w.cc.wmu.Unlock()
	if w.req.Close || w.expect && !w.cc.continued {
		w.closeAfter = true // a client still holding its body back cannot go on
	}
	if w.closeAfter {
		h.Set("Connection", "close")
	} else if !w.req.ProtoAtLeast(1, 1) {
		h.Set("Connection", "keep-alive")
	}
	w.cc.headWritten = true
	bw := w.cc.bw
	bw.WriteString("HTTP/1.1 ")
	bw.WriteString(strconv.Itoa(code))
	bw.WriteByte(' ')
	bw.WriteString(http.StatusText(code))
	bw.WriteString("\r\n")
	h.Write(bw)
	bw.WriteString("\r\n")
	// The head is out. goproxy wraps a writer whose header says chunked in
	// a writer that flushes every write and has no ReadFrom, so io.Copy
	// would take a fresh 32 KiB buffer per response (the garbage collector
	// then ran every 50 requests, most of the proxy's p99); ReadFrom below
	// flushes a chunked body itself.
	h.Del("Transfer-Encoding")
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if w.hijacked {
		return 0, http.ErrHijacked
	}
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if w.noBody {
		return 0, http.ErrBodyNotAllowed
	}
	if len(p) == 0 {
		return 0, nil
	}
	w.cc.wmu.Lock()
	defer w.cc.wmu.Unlock()
	bw := w.cc.bw
	switch {
	case w.chunked:
		bw.WriteString(strconv.FormatInt(int64(len(p)), 16))
		bw.WriteString("\r\n")
		n, err := bw.Write(p)
		if err == nil {
			_, err = bw.WriteString("\r\n")
		}
		return n, err
	case w.remaining >= 0:
		var tooMuch error
		if int64(len(p)) > w.remaining {
			p, tooMuch = p[:w.remaining], http.ErrContentLength
		}
		n, err := bw.Write(p)
		w.remaining -= int64(n)
		if err == nil {
			err = tooMuch
		}
		return n, err
	default:
		return bw.Write(p)
	}
}

// ReadFrom copies with a pooled buffer rather than io.Copy's fresh one. A
// chunked body (a stream: events, progress, long polls) is flushed at most
// streamFlushDelay after each piece, so a whole response still leaves in
// one write and a stream's pieces reach the client as they come.
func (w *responseWriter) ReadFrom(r io.Reader) (int64, error) {
	bp := relayBuffers.Get().(*[]byte)
	defer relayBuffers.Put(bp)
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if !w.chunked {
		return io.CopyBuffer(struct{ io.Writer }{w}, r, *bp)
	}
	f := &lazyFlusher{w: w}
	defer f.stop()
	return io.CopyBuffer(f, r, *bp)
}

// streamFlushDelay is how long a piece of a streamed body may wait in the
// buffer for more.
const streamFlushDelay = 2 * time.Millisecond

// lazyFlusher writes to a response and makes sure what it wrote is flushed
// within streamFlushDelay.
type lazyFlusher struct {
	w       *responseWriter
	mu      sync.Mutex
	timer   *time.Timer
	armed   bool
	stopped bool
}

func (f *lazyFlusher) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err != nil {
		return n, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.armed && !f.stopped {
		f.armed = true
		if f.timer == nil {
			f.timer = time.AfterFunc(streamFlushDelay, f.fire)
		} else {
			f.timer.Reset(streamFlushDelay)
		}
	}
	return n, nil
}

// fire flushes. One that races stop flushes a prefix of what the
// connection sends anyway: harmless.
func (f *lazyFlusher) fire() {
	f.mu.Lock()
	stopped := f.stopped
	f.armed = false
	f.mu.Unlock()
	if !stopped {
		f.w.Flush()
	}
}

func (f *lazyFlusher) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = true
	if f.timer != nil {
		f.timer.Stop()
	}
}

func (w *responseWriter) Flush() {
	w.cc.wmu.Lock()
	defer w.cc.wmu.Unlock()
	w.cc.bw.Flush()
}

func (w *responseWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if w.wrote || w.hijacked {
		return nil, nil, errors.New("response already started")
	}
	w.hijacked = true
	w.cc.wmu.Lock()
	err := w.cc.bw.Flush()
	w.cc.wmu.Unlock()
	if err != nil {
		return nil, nil, err
	}
	w.cc.conn.SetDeadline(time.Time{})
	return &bufferedConn{Conn: w.cc.conn, br: w.cc.br}, bufio.NewReadWriter(w.cc.br, w.cc.bw), nil
}

// finish ends the response (the last chunk) and flushes it.
func (w *responseWriter) finish() error {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	w.cc.wmu.Lock()
	defer w.cc.wmu.Unlock()
	if w.chunked {
		w.cc.bw.WriteString("0\r\n\r\n")
	}
	if w.remaining > 0 {
		w.closeAfter = true // the upstream sent less than it promised
	}
	return w.cc.bw.Flush()
}
