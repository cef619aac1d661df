package proxy

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"paddock.dev/paddock/egress"
	"paddock.dev/paddock/egress/ca"
)

const secret = "s3cr3t-grant-value-never-logged"

// seenRequest is what an upstream received.
type seenRequest struct {
	Method, Path, Host string
	Auth               []string
}

// recordingServer is an upstream that records every request it gets.
type recordingServer struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []seenRequest
}

func newRecordingServer(t *testing.T, tlsCert *tls.Certificate) *recordingServer {
	rs := &recordingServer{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rs.mu.Lock()
		rs.seen = append(rs.seen, seenRequest{Method: r.Method, Path: r.URL.Path, Host: r.Host, Auth: r.Header.Values("Authorization")})
		rs.mu.Unlock()
		fmt.Fprintf(w, "upstream %s %s", r.Method, r.URL.Path)
	})
	if tlsCert == nil {
		rs.srv = httptest.NewServer(h)
	} else {
		rs.srv = httptest.NewUnstartedServer(h)
		rs.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are what some tests expect
		rs.srv.TLS = &tls.Config{Certificates: []tls.Certificate{*tlsCert}}
		rs.srv.StartTLS()
	}
	t.Cleanup(rs.srv.Close)
	return rs
}

func (rs *recordingServer) requests() []seenRequest {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return append([]seenRequest(nil), rs.seen...)
}

func (rs *recordingServer) reset() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.seen = nil
}

// icptEnv is an env whose proxy intercepts with a CA of egress/ca, and
// whose 80 and 443 upstreams record what they get.
type icptEnv struct {
	*env
	ca     *ca.Authority
	caPool *x509.CertPool
	upPool *x509.CertPool // trusts the https upstream itself
	https  *recordingServer
	http   *recordingServer
	logs   *bytes.Buffer
}

func newIcptEnv(t *testing.T, grants []egress.Grant, tweak ...func(*Config)) *icptEnv {
	t.Helper()
	authority, err := ca.LoadOrCreate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	caPool := x509.NewCertPool()
	caPool.AppendCertsFromPEM(authority.CertPEM())
	upCert, upRoots := testCert(t, "limited.test", "allowed.test", "api.granted.test", "expired.test")
	logs := &bytes.Buffer{}
	var logMu sync.Mutex
	e := newEnv(t, append([]func(*Config){func(c *Config) {
		c.CA = authority
		c.UpstreamRoots = upRoots
		c.Grants = func(sb string) []egress.Grant {
			if sb != sandboxID {
				return nil
			}
			return grants
		}
		c.Logger = slog.New(slog.NewTextHandler(lockedWriter{&logMu, logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}}, tweak...)...)
	ie := &icptEnv{env: e, ca: authority, caPool: caPool, upPool: upRoots, logs: logs,
		https: newRecordingServer(t, &upCert), http: newRecordingServer(t, nil)}
	e.dialer.route(netip.AddrPortFrom(addrAllowed, 443), ie.https.srv.Listener.Addr().String())
	e.dialer.route(netip.AddrPortFrom(addrAllowed, 80), ie.http.srv.Listener.Addr().String())
	for _, h := range []string{"api.granted.test", "expired.test", "nocert.test"} {
		e.res.set(h, []netip.Addr{addrAllowed})
		e.pol.allowHost(h)
	}
	return ie
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// sandboxClient goes through the forward proxy and trusts only the
// interception CA, as a sandbox with it in its trust store would.
func (e *icptEnv) sandboxClient() *http.Client { return e.clientTrusting(e.caPool) }

func (e *icptEnv) clientTrusting(roots *x509.CertPool) *http.Client {
	u, _ := url.Parse("http://" + e.addr)
	tr := &http.Transport{Proxy: http.ProxyURL(u), TLSClientConfig: &tls.Config{RootCAs: roots}}
	e.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func do(t *testing.T, c *http.Client, method, rawURL, host string, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, rawURL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestInterceptConnect(t *testing.T) {
	e := newIcptEnv(t, nil)
	c := e.sandboxClient()

	status, body := do(t, c, "GET", "https://limited.test/ok", "", nil)
	if status != http.StatusOK || body != "upstream GET /ok" {
		t.Fatalf("GET /ok: %d %q", status, body)
	}
	ev := e.events.find(t, kindAllow, "limited.test")
	want := egress.Event{Sandbox: sandboxID, Kind: kindAllow, Host: "limited.test", Port: 443, Method: "GET", Path: "/ok", Rule: "test:limited.test"}
	if diff := cmp.Diff(want, ev); diff != "" {
		t.Errorf("event (-want +got):\n%s", diff)
	}
	if got := e.pol.decided(); len(got) == 0 || got[len(got)-1].Scheme != "https" {
		t.Errorf("the policy was not asked with scheme https: %+v", got)
	}

	for _, tc := range []struct {
		name, method, url, host string
		status                  int
		says                    string
	}{
		{"POST refused by policy", "POST", "https://limited.test/admin", "", http.StatusForbidden, "POST /admin is not allowed"},
		{"dot segments", "GET", "https://limited.test/ok/../x", "", http.StatusBadRequest, ""},
		{"Host names another host", "GET", "https://limited.test/ok", "evil.test", http.StatusForbidden, "does not name limited.test:443"},
		{"Host names another port", "GET", "https://limited.test/ok", "limited.test:8443", http.StatusForbidden, "does not name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.https.reset()
			status, body := do(t, c, tc.method, tc.url, tc.host, nil)
			if status != tc.status || !strings.Contains(body, tc.says) {
				t.Errorf("got %d %q, want %d saying %q", status, body, tc.status, tc.says)
			}
			if got := e.https.requests(); len(got) != 0 {
				t.Errorf("the upstream saw %+v", got)
			}
		})
	}
	// The upstream saw the canonical Host, on a connection to the checked
	// address only.
	for _, d := range e.dialer.all() {
		if d != netip.AddrPortFrom(addrAllowed, 443).String() {
			t.Errorf("dialled %s", d)
		}
	}
}

func TestInterceptTransparent(t *testing.T) {
	e := newIcptEnv(t, nil)
	conn := e.redirected(netip.AddrPortFrom(elsewhere, 443))
	tc := tls.Client(conn, &tls.Config{ServerName: "limited.test", RootCAs: e.caPool})
	br := bufio.NewReader(tc)
	send := func(host, path string) (int, string) {
		t.Helper()
		fmt.Fprintf(tc, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, host)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	if status, body := send("limited.test", "/one"); status != 200 || body != "upstream GET /one" {
		t.Fatalf("GET /one: %d %q", status, body)
	}
	if status, body := send("LIMITED.test.", "/two"); status != 200 || body != "upstream GET /two" {
		t.Fatalf("GET /two with a non-canonical Host: %d %q", status, body)
	}
	if status, body := send("allowed.test", "/three"); status != http.StatusForbidden || !strings.Contains(body, "does not name") {
		t.Fatalf("Host/SNI mismatch: %d %q", status, body)
	}
	got := e.https.requests()
	want := []seenRequest{{"GET", "/one", "limited.test", nil}, {"GET", "/two", "limited.test", nil}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("upstream saw (-want +got):\n%s", diff)
	}
}

// TestInterceptNeedsTrust: a sandbox that does not trust the CA gets no
// further than the handshake, and the ledger says why.
func TestInterceptNeedsTrust(t *testing.T) {
	e := newIcptEnv(t, nil)
	resp, err := e.client().Get("https://limited.test/ok") // trusts the upstream's cert, not the CA
	if err == nil {
		resp.Body.Close()
		t.Fatalf("went through without trusting the CA: %d", resp.StatusCode)
	}
	ev := e.events.find(t, kindDeny, "limited.test")
	if !strings.Contains(ev.Reason, "trust store") {
		t.Errorf("deny reason %q", ev.Reason)
	}
	if n := len(e.https.requests()); n != 0 {
		t.Errorf("upstream saw %d requests", n)
	}
}

func TestInterceptUpstreamUnverified(t *testing.T) {
	e := newIcptEnv(t, nil)
	e.pol.inspect["nocert.test"] = true // its upstream's certificate does not name it
	status, body := do(t, e.sandboxClient(), "GET", "https://nocert.test/ok", "", nil)
	if status != http.StatusBadGateway || !strings.Contains(body, "nocert.test") {
		t.Errorf("got %d %q, want 502", status, body)
	}
	if n := len(e.https.requests()); n != 0 {
		t.Errorf("upstream saw %d requests", n)
	}
	// Nor does an upstream verify against the system roots when the test
	// CA is not among them.
	e2 := newIcptEnv(t, nil, func(c *Config) { c.UpstreamRoots = x509.NewCertPool() })
	if status, _ := do(t, e2.sandboxClient(), "GET", "https://limited.test/ok", "", nil); status != http.StatusBadGateway {
		t.Errorf("untrusted upstream: %d, want 502", status)
	}
}

func TestGrants(t *testing.T) {
	grants := []egress.Grant{
		{ID: "g-expired", Hosts: []string{"expired.test"}, ExpiresAt: time.Now().Add(-time.Minute), Value: secret},
		{ID: "g-repo", Hosts: []string{"*.granted.test"}, Methods: []string{"GET"}, Paths: []string{"/repo/*"}, ExpiresAt: time.Now().Add(time.Hour), Value: "Bearer " + secret},
	}
	e := newIcptEnv(t, grants)
	c := e.sandboxClient()
	own := http.Header{"Authorization": {"Bearer sandbox-own"}}

	// The policy does not say Inspect for api.granted.test; the grant
	// makes the proxy intercept it.
	cases := []struct {
		name, method, url string
		header            http.Header
		status            int
		auth              []string
		relayed           bool // not intercepted: the client sees the upstream's own certificate
	}{
		{"matching", "GET", "https://api.granted.test/repo/x", nil, 200, []string{"Bearer " + secret}, false},
		{"sandbox's own header replaced", "GET", "https://api.granted.test/repo/y", own, 200, []string{"Bearer " + secret}, false},
		{"other path", "GET", "https://api.granted.test/other", nil, 200, nil, false},
		{"other path keeps the sandbox's header", "GET", "https://api.granted.test/other", own, 200, []string{"Bearer sandbox-own"}, false},
		{"other method", "DELETE", "https://api.granted.test/repo/x", nil, 200, nil, false},
		{"expired grant", "GET", "https://expired.test/x", nil, 200, nil, true},
		{"plain http never", "GET", "http://api.granted.test/repo/x", nil, 200, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e.https.reset()
			e.http.reset()
			client := c
			if tc.relayed {
				client = e.clientTrusting(e.upPool)
			}
			status, body := do(t, client, tc.method, tc.url, "", tc.header)
			if status != tc.status {
				t.Fatalf("got %d %q", status, body)
			}
			got := append(e.https.requests(), e.http.requests()...)
			if len(got) != 1 {
				t.Fatalf("upstreams saw %+v", got)
			}
			if diff := cmp.Diff(tc.auth, got[0].Auth); diff != "" {
				t.Errorf("Authorization upstream (-want +got):\n%s", diff)
			}
		})
	}

	var withGrant int
	for _, ev := range e.events.all() {
		if ev.Grant != "" {
			withGrant++
			if ev.Grant != "g-repo" || ev.Method != "GET" || !strings.HasPrefix(ev.Path, "/repo/") {
				t.Errorf("event with a grant: %+v", ev)
			}
		}
	}
	if withGrant != 2 {
		t.Errorf("%d events name a grant, want 2", withGrant)
	}
	if s := fmt.Sprintf("%+v", e.events.all()); strings.Contains(s, secret) {
		t.Errorf("the secret is in an event: %s", s)
	}
	if strings.Contains(e.logs.String(), secret) {
		t.Errorf("the secret is in the log")
	}
}

// TestGrantNeedsCA: without a CA, a host with a grant fails closed like
// one with path rules, rather than leaving the grant unused in a relayed
// tunnel.
func TestGrantNeedsCA(t *testing.T) {
	grants := []egress.Grant{{ID: "g", Hosts: []string{"allowed.test"}, ExpiresAt: time.Now().Add(time.Hour), Value: secret}}
	e := newEnv(t, func(c *Config) { c.Grants = func(string) []egress.Grant { return grants } })
	status, body := raw(t, e.addr, "CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n")
	if status != http.StatusForbidden || !strings.Contains(body, "credential grant") {
		t.Errorf("got %d %q", status, body)
	}
	if strings.Contains(body, secret) {
		t.Error("the secret is in the refusal")
	}
}

func TestHostMatches(t *testing.T) {
	for _, tc := range []struct {
		pattern, host string
		ip, want      bool
	}{
		{"api.example.com", "api.example.com", false, true},
		{"API.Example.com.", "api.example.com", false, true},
		{"api.example.com", "example.com", false, false},
		{"*.example.com", "api.example.com", false, true},
		{"*.example.com", "a.b.example.com", false, true},
		{"*.example.com", "example.com", false, false},
		{"*.example.com", "evilexample.com", false, false},
		{"203.0.113.10", "203.0.113.10", true, true},
		{"[2001:db8::1]", "2001:db8::1", true, true},
		{"*.113.10", "203.0.113.10", true, false},
		{"203.0.113.10", "203.0.113.10", false, false},
	} {
		if got := hostMatches(tc.pattern, tc.host, tc.ip); got != tc.want {
			t.Errorf("hostMatches(%q, %q, %v) = %v, want %v", tc.pattern, tc.host, tc.ip, got, tc.want)
		}
	}
}

// TestGrantCoversOnlyHTTPS: a grant is for the host's HTTPS service on
// 443; another port of the same name never gets the credential, nor does
// an expired grant.
func TestGrantCoversOnlyHTTPS(t *testing.T) {
	now := time.Now()
	g := egress.Grant{ID: "g", Hosts: []string{"api.test"}, ExpiresAt: now.Add(time.Hour)}
	if !grantCovers(g, "api.test", 443, false, now) {
		t.Error("443 not covered")
	}
	for _, port := range []int{80, 8443, 444} {
		if grantCovers(g, "api.test", port, false, now) {
			t.Errorf("port %d covered", port)
		}
	}
	if grantCovers(g, "api.test", 443, false, now.Add(2*time.Hour)) {
		t.Error("an expired grant covered")
	}
}
