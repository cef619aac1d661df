package proxy

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"paddock.dev/paddock/egress"
)

// Test addresses. The "public" ones are documentation prefixes that the
// default CheckAddr lets through; the test dialer routes them to loopback
// servers of the test's own, and refuses to dial anything else that is
// not loopback, so no test ever leaves the machine.
var (
	addrAllowed = netip.MustParseAddr("203.0.113.10") // allowed.test, limited.test, blocked.test's upstreams
	addrRebind  = netip.MustParseAddr("203.0.113.20")
	addrDead    = netip.MustParseAddr("203.0.113.99") // routed to a closed port
	loopback    = netip.MustParseAddr("127.0.0.1")
	elsewhere   = netip.MustParseAddr("198.51.100.7") // a redirected connection's original destination
)

const sandboxID = "sb-test"

// fakePolicy allows the hosts in allow on any port; hosts in inspect need
// interception for tunnels; POST /admin is denied everywhere.
type fakePolicy struct {
	allow   map[string]bool
	inspect map[string]bool

	mu   sync.Mutex
	seen []egress.Request
}

func newFakePolicy(allow ...string) *fakePolicy {
	p := &fakePolicy{allow: map[string]bool{}, inspect: map[string]bool{}}
	for _, h := range allow {
		p.allow[h] = true
	}
	return p
}

// allowHost adds hosts to the allow list while the proxy runs.
func (p *fakePolicy) allowHost(hosts ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, h := range hosts {
		p.allow[h] = true
	}
}

func (p *fakePolicy) AllowsName(host string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.allow[host]
}

func (p *fakePolicy) Tunnel(host string, port int) egress.Decision {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.allow[host] {
		return egress.Decision{Reason: host + " is not on the test allow list"}
	}
	return egress.Decision{Allow: true, Rule: "test:" + host, Inspect: p.inspect[host]}
}

func (p *fakePolicy) Decide(r egress.Request) egress.Decision {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = append(p.seen, r)
	if !p.allow[r.Host] {
		return egress.Decision{Reason: r.Host + " is not on the test allow list"}
	}
	if r.Method == http.MethodPost && r.Path == "/admin" {
		return egress.Decision{Rule: "test:no-post-admin", Reason: "POST /admin is not allowed"}
	}
	return egress.Decision{Allow: true, Rule: "test:" + r.Host}
}

func (p *fakePolicy) decided() []egress.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]egress.Request(nil), p.seen...)
}

// fakeResolver answers each name from a sequence: the n-th lookup gets the
// n-th answer (the last one repeats), and counts lookups.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][][]netip.Addr
	calls   map[string]int
}

func (r *fakeResolver) set(host string, answers ...[]netip.Addr) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answers[host] = answers
}

func (r *fakeResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !strings.HasSuffix(host, ".") {
		// The proxy asks for fully qualified names only.
		return nil, fmt.Errorf("asked for %q, not a fully qualified name", host)
	}
	host = strings.TrimSuffix(host, ".")
	n := r.calls[host]
	r.calls[host]++
	seq := r.answers[host]
	if len(seq) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return append([]netip.Addr(nil), seq[min(n, len(seq)-1)]...), nil
}

func (r *fakeResolver) lookups(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[host]
}

func (r *fakeResolver) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.calls {
		n += c
	}
	return n
}

// testDialer records every address the proxy dials and routes the test's
// "public" addresses to loopback servers. It never dials a non-loopback
// address.
type testDialer struct {
	mu      sync.Mutex
	routes  map[netip.AddrPort]string
	dialled []netip.AddrPort
}

func (d *testDialer) route(from netip.AddrPort, to string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.routes[from] = to
}

func (d *testDialer) Dial(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
	d.mu.Lock()
	d.dialled = append(d.dialled, addr)
	real, ok := d.routes[addr]
	d.mu.Unlock()
	if !ok {
		if !addr.Addr().IsLoopback() {
			return nil, fmt.Errorf("test dialer: %s is not routed, and tests never leave the machine", addr)
		}
		real = addr.String()
	}
	var nd net.Dialer
	return nd.DialContext(ctx, "tcp", real)
}

// all is every address dialled, in order, as text.
func (d *testDialer) all() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, a := range d.dialled {
		out = append(out, a.String())
	}
	return out
}

// eventLog collects recorded events.
type eventLog struct {
	mu     sync.Mutex
	events []egress.Event
}

func (l *eventLog) record(e egress.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *eventLog) all() []egress.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]egress.Event(nil), l.events...)
}

// find returns the last event of kind for host, waiting briefly for it
// (a tunnel's events are recorded by the proxy's goroutine).
func (l *eventLog) find(t testing.TB, kind, host string) egress.Event {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		evs := l.all()
		for i := len(evs) - 1; i >= 0; i-- {
			if evs[i].Kind == kind && evs[i].Host == host {
				return evs[i]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s event for %q; events: %+v", kind, host, evs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// allowAddrs is a CheckAddr that lets the given addresses through and
// judges the rest like the default; the real checker permits an operator's
// named CIDRs the same way.
func allowAddrs(allowed ...netip.Addr) func(netip.Addr) error {
	return func(a netip.Addr) error {
		for _, x := range allowed {
			if a == x {
				return nil
			}
		}
		return basicCheckAddr(a)
	}
}

// upstream records what an upstream server received.
type upstream struct {
	mu    sync.Mutex
	hosts []string
	hits  atomic.Int64
	// release lets /trickle send its second part.
	release chan struct{}
}

func (u *upstream) handler(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		u.mu.Lock()
		u.hosts = append(u.hosts, r.Host)
		u.mu.Unlock()
		switch r.URL.Path {
		case "/echo":
			b, _ := io.ReadAll(r.Body)
			w.Write(b)
		case "/trickle":
			// A stream whose second part waits until the client has the
			// first (or 5 s): a proxy that holds chunks back stalls here.
			io.WriteString(w, "first\n")
			w.(http.Flusher).Flush()
			select {
			case <-u.release:
			case <-time.After(5 * time.Second):
			case <-r.Context().Done():
			}
			io.WriteString(w, "second\n")
		case "/stream":
			for i := range 5 {
				fmt.Fprintf(w, "part %d\n", i)
				w.(http.Flusher).Flush()
			}
		case "/stall":
			w.Header().Set("Content-Length", "100")
			w.Write([]byte("0123456789"))
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		case "/big":
			w.Header().Set("Content-Length", "4096")
			w.Write([]byte(strings.Repeat("x", 4096)))
		default:
			fmt.Fprintf(w, "hello from %s %s %s", name, r.Method, r.URL.Path)
		}
	})
}

func (u *upstream) lastHost() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.hosts) == 0 {
		return ""
	}
	return u.hosts[len(u.hosts)-1]
}

// env is a proxy with a forward and a transparent listener for one
// sandbox, plain and TLS upstreams, and the fakes above.
type env struct {
	t       testing.TB
	p       *Proxy
	pol     *fakePolicy
	res     *fakeResolver
	dialer  *testDialer
	events  *eventLog
	addr    string // forward proxy
	taddr   string // transparent proxy
	plain   *httptest.Server
	secure  *httptest.Server
	plainUp *upstream
	tlsUp   *upstream
	roots   *x509.CertPool
}

func newEnv(t testing.TB, tweak ...func(*Config)) *env {
	t.Helper()
	e := &env{
		t:       t,
		pol:     newFakePolicy("allowed.test", "limited.test", "loopy.test", "local.test", "rebind.test", "dead.test", "203.0.113.10"),
		res:     &fakeResolver{answers: map[string][][]netip.Addr{}, calls: map[string]int{}},
		dialer:  &testDialer{routes: map[netip.AddrPort]string{}},
		events:  &eventLog{},
		plainUp: &upstream{release: make(chan struct{}, 1)},
		tlsUp:   &upstream{release: make(chan struct{}, 1)},
	}
	e.pol.inspect["limited.test"] = true

	e.plain = httptest.NewServer(e.plainUp.handler("plain"))
	t.Cleanup(e.plain.Close)
	cert, roots := testCert(t, "allowed.test", "limited.test", "rebind.test", "evil.test")
	e.roots = roots
	e.secure = httptest.NewUnstartedServer(e.tlsUp.handler("tls"))
	e.secure.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	e.secure.StartTLS()
	t.Cleanup(e.secure.Close)

	for _, h := range []string{"allowed.test", "limited.test", "evil.test", "blocked.test"} {
		e.res.set(h, []netip.Addr{addrAllowed})
	}
	e.res.set("loopy.test", []netip.Addr{loopback})
	e.res.set("local.test", []netip.Addr{loopback})
	e.res.set("dead.test", []netip.Addr{addrDead})
	e.dialer.route(netip.AddrPortFrom(addrAllowed, 80), e.plain.Listener.Addr().String())
	e.dialer.route(netip.AddrPortFrom(addrAllowed, 443), e.secure.Listener.Addr().String())
	e.dialer.route(netip.AddrPortFrom(addrDead, 80), closedPort(t))

	cfg := Config{
		Resolver:      e.res,
		Dial:          e.dialer.Dial,
		Record:        e.events.record,
		HeaderTimeout: 2 * time.Second,
		IdleTimeout:   5 * time.Second,
	}
	for _, f := range tweak {
		f(&cfg)
	}
	e.p = New(cfg)

	l := listen(t)
	tl := listen(t)
	e.addr, e.taddr = l.Addr().String(), tl.Addr().String()
	served := make(chan error, 2)
	go func() { served <- e.p.Serve(l, sandboxID, e.pol) }()
	go func() { served <- e.p.ServeTransparent(tl, sandboxID, e.pol) }()
	t.Cleanup(func() {
		e.p.Close()
		for range 2 {
			select {
			case err := <-served:
				if !errors.Is(err, ErrClosed) {
					t.Errorf("Serve returned %v, want ErrClosed", err)
				}
			case <-time.After(5 * time.Second):
				t.Errorf("Serve did not return after Close")
			}
		}
	})
	return e
}

func listen(t testing.TB) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// closedPort is a loopback address nothing listens on.
func closedPort(t testing.TB) string {
	l := listen(t)
	a := l.Addr().String()
	l.Close()
	return a
}

// client is an http.Client that uses the forward proxy and trusts the TLS
// upstream.
func (e *env) client() *http.Client {
	u, _ := url.Parse("http://" + e.addr)
	tr := &http.Transport{
		Proxy:           http.ProxyURL(u),
		TLSClientConfig: &tls.Config{RootCAs: e.roots},
	}
	e.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// get fetches url through the proxy and returns the status and body.
func (e *env) get(rawURL string) (int, string) {
	e.t.Helper()
	resp, err := e.client().Get(rawURL)
	if err != nil {
		e.t.Fatalf("GET %s: %v", rawURL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// raw writes raw to addr and reads one response.
func raw(t testing.TB, addr, raw string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the response to %q: %v", raw, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// testCert is a self-signed certificate for names, and a pool trusting it.
func testCert(t testing.TB, names ...string) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: names[0]},
		DNSNames:              names,
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// countingListener is a raw TCP upstream that counts connections and the
// bytes they carried, and echoes them.
type countingListener struct {
	l     net.Listener
	conns atomic.Int64
	bytes atomic.Int64
}

func newCountingListener(t testing.TB) *countingListener {
	c := &countingListener{l: listen(t)}
	t.Cleanup(func() { c.l.Close() })
	go func() {
		for {
			conn, err := c.l.Accept()
			if err != nil {
				return
			}
			c.conns.Add(1)
			go func() {
				defer conn.Close()
				buf := make([]byte, 4096)
				for {
					n, err := conn.Read(buf)
					c.bytes.Add(int64(n))
					if n > 0 {
						conn.Write(buf[:n])
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return c
}

func (c *countingListener) addr() string { return c.l.Addr().String() }
