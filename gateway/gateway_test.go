package gateway_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"paddock.dev/paddock/gateway"
	"paddock.dev/paddock/gateway/caddyfile"
	hauth "paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/daemon/daemontest"
	"paddock.dev/paddock/policy"
)

const adminToken = "pdk_gateway_test_admin_0123456789"

// fakeHostd is a real daemon's API handler (daemontest, no backend:
// admin and tenant tokens, every create refused) on a unix socket, with a recorder in front that keeps
// what reached it, and stand-ins for the preview and terminal routes.
type fakeHostd struct {
	socket      string
	tenantToken string
	srv         *http.Server
	d           *daemontest.Daemon

	mu   sync.Mutex
	seen []*http.Request
}

func (h *fakeHostd) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.seen = append(h.seen, r.Clone(context.Background()))
	h.mu.Unlock()
	switch {
	case strings.HasPrefix(r.URL.Path, "/preview/") || strings.Contains(r.Host, ".preview."):
		// What the guest would get, and a cookie it tries to set.
		w.Header().Set("Set-Cookie", "guest=1")
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"host": r.Host, "path": r.URL.Path, "headers": r.Header})
		return
	case strings.HasSuffix(r.URL.Path, "/pty"):
		fmt.Fprintf(w, "pty ticket=%s", r.URL.Query().Get("ticket"))
		return
	case strings.Contains(r.URL.Path, "/uploads/"):
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, `{"read": %d}`, n)
		return
	case r.URL.Path == "/slow":
		// A long answer that writes nothing for a while (a long exec).
		time.Sleep(3 * time.Second)
		io.WriteString(w, "done")
		return
	}
	h.api().ServeHTTP(w, r)
}

func (h *fakeHostd) api() http.Handler { return h.d.Handler() }

// testEngine is the policy engine of the tests' daemons, compiled once.
var testEngine = sync.OnceValues(func() (*policy.Engine, error) { return policy.New(policy.Options{}) })

// lastSeen returns the last request hostd got for path.
func (h *fakeHostd) lastSeen(path string) *http.Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := len(h.seen) - 1; i >= 0; i-- {
		if h.seen[i].URL.Path == path {
			return h.seen[i]
		}
	}
	return nil
}

func startHostd(t *testing.T) *fakeHostd {
	t.Helper()
	dir, err := os.MkdirTemp("", "pgw") // short: a socket path has at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	h := &fakeHostd{socket: filepath.Join(dir, "hostd.sock")}
	tok, sum := hauth.NewTenantToken()
	tenantsFile := filepath.Join(dir, "tenants.json")
	os.WriteFile(tenantsFile, []byte(`{"tenants":[{"name":"acme","token_sha256":"`+sum+`"}]}`), 0o600)
	eng, err := testEngine()
	if err != nil {
		t.Fatal(err)
	}
	h.d = daemontest.New(t, daemontest.WithoutBackend(), daemontest.WithoutRun(), daemontest.WithToken(adminToken),
		daemontest.WithTenants(tenantsFile), daemontest.WithPolicy(eng))
	h.tenantToken = tok
	ln, err := net.Listen("unix", h.socket)
	if err != nil {
		t.Fatal(err)
	}
	h.srv = &http.Server{Handler: h}
	go h.srv.Serve(ln)
	t.Cleanup(func() { h.srv.Close() })
	return h
}

// gw is a running gateway and a client that trusts its CA.
type gw struct {
	base   string
	addr   string
	client *http.Client
	roots  *x509.CertPool
	log    string
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func startGateway(t *testing.T, h *fakeHostd, tweak func(*caddyfile.Options)) *gw {
	return startGatewayWith(t, h, tweak, "")
}

func startGatewayFile(t *testing.T, h *fakeHostd, path string) *gw {
	return startGatewayWith(t, h, nil, path)
}

func startGatewayWith(t *testing.T, h *fakeHostd, tweak func(*caddyfile.Options), path string) *gw {
	t.Helper()
	// Not t.TempDir: Caddy may still be storing a certificate it was
	// issuing when the gateway stops, so the removal is retried for a while
	// rather than failing the test.
	dir, err := os.MkdirTemp("", "pdkgw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for i := 0; i < 40 && os.RemoveAll(dir) != nil; i++ {
			time.Sleep(50 * time.Millisecond)
		}
	})
	o := caddyfile.Options{
		Listen: freeAddr(t), HostdSocket: h.socket, StorageDir: filepath.Join(dir, "caddy"),
		AccessLog: filepath.Join(dir, "access.log"),
	}
	if tweak != nil {
		tweak(&o)
	}
	g, err := gateway.Start(gateway.Config{Options: o, CaddyfilePath: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Stop() })
	pem, err := os.ReadFile(g.RootCertPath())
	if err != nil {
		t.Fatalf("the internal CA's root is not where it should be: %v", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatal("root.crt holds no certificate")
	}
	c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	_, port, _ := net.SplitHostPort(o.Listen)
	out := &gw{base: "https://localhost:" + port, addr: o.Listen, client: c, roots: roots, log: o.AccessLog}
	// The certificates are issued as Caddy starts; wait for the first.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := c.Get(out.base + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway never answered over HTTPS: %v", err)
		}
	}
	return out
}

func (g *gw) do(t *testing.T, method, path, token string, body io.Reader, hdr map[string]string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, g.base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := g.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func errorOf(t *testing.T, body []byte) string {
	t.Helper()
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error == "" {
		t.Errorf("body %q is not hostd's error shape {\"error\": ...}", body)
	}
	return e.Error
}

// TestGateway runs the embedded Caddy on loopback with its internal CA in
// front of hostd's real API handler, and a client that trusts only that
// CA. Caddy runs one configuration per process, so the cases share it.
func TestGateway(t *testing.T) {
	h := startHostd(t)
	g := startGateway(t, h, nil)

	t.Run("tokens", func(t *testing.T) {
		for _, c := range []struct{ name, token, kind, actor string }{
			{"admin", adminToken, "admin", "admin"},
			{"tenant", h.tenantToken, "tenant", "tenant:acme"},
		} {
			code, _, body := g.do(t, "GET", "/v1/whoami", c.token, nil, map[string]string{"Paddock-Identity": "admin", "X-Paddock-Actor": "admin", "X-Forwarded-User": "root"})
			var who hauth.WhoAmI
			json.Unmarshal(body, &who)
			if code != 200 || who.Kind != c.kind {
				t.Errorf("%s: %d %s", c.name, code, body)
			}
			// hostd saw the gateway's identity, not the client's, and the
			// token itself (it verifies it again).
			seen := h.lastSeen("/v1/whoami")
			if got := seen.Header.Get("Paddock-Identity"); got != c.actor {
				t.Errorf("%s: hostd saw Paddock-Identity %q, want %q", c.name, got, c.actor)
			}
			if seen.Header.Get("X-Paddock-Actor") != "" || seen.Header.Get("X-Forwarded-User") != "" {
				t.Errorf("%s: a client's identity header reached hostd: %v", c.name, seen.Header)
			}
			if seen.Header.Get("Authorization") != "Bearer "+c.token {
				t.Errorf("%s: hostd did not get the token to verify itself", c.name)
			}
		}
	})

	t.Run("refused", func(t *testing.T) {
		// hostd's own refusal, straight on its socket, for comparison.
		direct := unixClient(h.socket)
		resp, err := direct.Get("http://hostd/v1/whoami")
		if err != nil {
			t.Fatal(err)
		}
		want, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		n := len(h.seen)
		for _, tok := range []string{"", "pdk_not_a_token_of_this_daemon", "pdk_tok-0123456789abcdef_" + strings.Repeat("0", 64), strings.Repeat("x", 600)} {
			code, hdr, body := g.do(t, "GET", "/v1/agents/sessions", tok, nil, nil)
			if code != http.StatusUnauthorized || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
				t.Errorf("token %.20q: %d %s", tok, code, body)
			}
			if errorOf(t, body) != errorOf(t, want) {
				t.Errorf("token %.20q: the edge says %s, hostd says %s", tok, body, want)
			}
		}
		// Only the whoami questions reached hostd, never the route.
		h.mu.Lock()
		for _, r := range h.seen[n:] {
			if r.URL.Path != "/v1/whoami" {
				t.Errorf("a refused request reached hostd: %s", r.URL.Path)
			}
		}
		h.mu.Unlock()
	})

	t.Run("admin endpoint", func(t *testing.T) {
		if c, err := net.DialTimeout("tcp", "127.0.0.1:2019", time.Second); err == nil {
			c.Close()
			t.Error("something listens on Caddy's admin port 2019")
		}
		for _, p := range []string{"/config/", "/load", "/stop", "/pki/ca/local", "/reverse_proxy/upstreams"} {
			if code, _, body := g.do(t, "GET", p, "", nil, nil); code != http.StatusUnauthorized {
				t.Errorf("GET %s without a token: %d %s", p, code, body)
			}
			// With the admin token it is hostd's "no route", not Caddy's admin API.
			if code, _, body := g.do(t, "GET", p, adminToken, nil, nil); code != http.StatusNotFound || !strings.Contains(errorOf(t, body), "no route") {
				t.Errorf("GET %s as admin: %d %s", p, code, body)
			}
		}
	})

	t.Run("body limits", func(t *testing.T) {
		n := len(h.seen)
		big := bytes.Repeat([]byte("x"), 10<<20)
		code, _, body := g.do(t, "POST", "/v1/agents/sessions", adminToken, bytes.NewReader(big), map[string]string{"Content-Type": "application/json"})
		if code != http.StatusRequestEntityTooLarge || !strings.Contains(errorOf(t, body), "gateway: 413") {
			t.Errorf("10 MiB body: %d %s", code, body)
		}
		h.mu.Lock()
		for _, r := range h.seen[n:] {
			if r.URL.Path == "/v1/agents/sessions" {
				t.Error("a body declared oversized reached hostd")
			}
		}
		h.mu.Unlock()
		// The same body without a length (chunked) is cut off once 2 MiB
		// have been read (hostd gets at most that much, then an error).
		code, _, body = g.do(t, "POST", "/v1/agents/sessions", adminToken, io.MultiReader(bytes.NewReader(big)), nil)
		if code != http.StatusRequestEntityTooLarge {
			t.Errorf("10 MiB chunked body: %d %s", code, body)
		}
		// An upload's 4 MiB chunk passes.
		chunk := bytes.Repeat([]byte("y"), 4<<20)
		code, _, body = g.do(t, "PUT", "/v1/agents/sessions/s1/uploads/u1?offset=0", adminToken, bytes.NewReader(chunk), nil)
		if code != 200 || !strings.Contains(string(body), fmt.Sprint(4<<20)) {
			t.Errorf("4 MiB chunk: %d %s", code, body)
		}
	})

	t.Run("headers limit", func(t *testing.T) {
		code, _, _ := g.do(t, "GET", "/v1/whoami", adminToken, nil, map[string]string{"X-Big": strings.Repeat("z", 100<<10)})
		if code != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("100 KiB of headers: %d", code)
		}
	})

	t.Run("preview", func(t *testing.T) {
		tok := strings.Repeat("ab", 32)
		hdr := map[string]string{"Cookie": "paddock=secret", "Paddock-Identity": "admin", "Proxy-Authorization": "Basic eA=="}
		for _, p := range []string{"/preview/" + tok + "/", "/preview/" + tok + "/sub/page.html?q=1"} {
			code, rh, body := g.do(t, "GET", p, adminToken, nil, hdr)
			var seen struct {
				Path    string
				Headers http.Header
			}
			json.Unmarshal(body, &seen)
			if code != 200 || seen.Path != strings.SplitN(p, "?", 2)[0] {
				t.Errorf("%s: %d %s", p, code, body)
			}
			for _, name := range []string{"Cookie", "Authorization", "Paddock-Identity", "Proxy-Authorization"} {
				if seen.Headers.Get(name) != "" {
					t.Errorf("%s: %s reached hostd's preview handler", p, name)
				}
			}
			if rh.Get("Set-Cookie") != "" {
				t.Errorf("%s: Set-Cookie came back: %q", p, rh.Get("Set-Cookie"))
			}
			if !strings.HasPrefix(rh.Get("Content-Security-Policy"), "sandbox") || rh.Get("Referrer-Policy") != "no-referrer" || rh.Get("Cache-Control") != "no-store" {
				t.Errorf("%s: safety headers missing: %v", p, rh)
			}
		}
		// The host form: <token>.preview.localhost, any path.
		host := tok[:40] + ".preview.localhost"
		_, port, _ := net.SplitHostPort(g.addr)
		tr := &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: g.roots, ServerName: host},
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "tcp", g.addr)
			},
		}
		req, _ := http.NewRequest("GET", "https://"+host+":"+port+"/v1/whoami", nil)
		req.Header.Set("Cookie", "a=b")
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var seen struct {
			Host    string
			Path    string
			Headers http.Header
		}
		json.Unmarshal(body, &seen)
		if resp.StatusCode != 200 || seen.Path != "/v1/whoami" || !strings.HasPrefix(seen.Host, host) || seen.Headers.Get("Cookie") != "" || resp.Header.Get("Set-Cookie") != "" {
			t.Errorf("host form: %d %s", resp.StatusCode, body)
		}
	})

	t.Run("pty ticket", func(t *testing.T) {
		code, _, body := g.do(t, "GET", "/v1/agents/sessions/s1/pty?ticket=t1cket", "", nil, nil)
		if code != 200 || string(body) != "pty ticket=t1cket" {
			t.Errorf("pty with a ticket: %d %s", code, body)
		}
		if got := h.lastSeen("/v1/agents/sessions/s1/pty").Header.Get("Paddock-Identity"); got != "" {
			t.Errorf("a ticket request carried an identity: %q", got)
		}
		for _, p := range []string{"/v1/agents/sessions/s1/pty", "/v1/agents/sessions/s1/exec?ticket=x", "/v1/agents/sessions/s1/pty/x?ticket=x"} {
			if code, _, body := g.do(t, "GET", p, "", nil, nil); code != http.StatusUnauthorized {
				t.Errorf("%s without a token: %d %s", p, code, body)
			}
		}
	})

	t.Run("access log", func(t *testing.T) {
		g.do(t, "GET", "/preview/"+strings.Repeat("cd", 32)+"/x", "", nil, map[string]string{"Referer": "https://localhost/preview/" + strings.Repeat("cd", 32) + "/"})
		g.do(t, "GET", "/v1/agents/sessions/s1/pty?cols=80&ticket=secretticket1", "", nil, nil)
		time.Sleep(200 * time.Millisecond) // the log is written after the answer
		logs, err := os.ReadFile(g.log)
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range []string{adminToken, h.tenantToken, strings.Repeat("ab", 32), strings.Repeat("cd", 32), strings.Repeat("ab", 20), "secretticket1"} {
			if bytes.Contains(logs, []byte(secret)) {
				t.Errorf("the access log holds a secret (%.12s…): %s", secret, logs)
			}
		}
		for _, want := range []string{`/preview/REDACTED/x`, `ticket=REDACTED`, `"/v1/whoami"`, `REDACTED.preview.localhost`} {
			if !bytes.Contains(logs, []byte(want)) {
				t.Errorf("the access log lacks %s:\n%s", want, logs)
			}
		}
	})
}

// TestGatewaySlowClient: a client that sends its headers a byte at a time
// is cut off once read_header has passed.
func TestGatewaySlowClient(t *testing.T) {
	h := startHostd(t)
	g := startGateway(t, h, func(o *caddyfile.Options) {
		o.ReadHeaderTimeout = time.Second
		o.ReadBodyTimeout = time.Second
	})
	// An answer that takes longer than every read timeout still arrives
	// (a long exec, a long poll): the timeouts bound what the client
	// sends, not what hostd answers.
	code, _, body := g.do(t, "POST", "/slow", adminToken, strings.NewReader(`{"command": "sleep 3"}`), nil)
	if code != 200 || string(body) != "done" {
		t.Errorf("slow answer: %d %s", code, body)
	}

	conn, err := tls.Dial("tcp", g.addr, &tls.Config{RootCAs: g.roots, ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	line := "GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: "
	var werr error
	for i := 0; i < 100 && werr == nil; i++ {
		_, werr = conn.Write([]byte{line[i%len(line)]})
		time.Sleep(100 * time.Millisecond)
	}
	if werr == nil {
		// The server may close without our writes failing yet: a read tells.
		conn.SetReadDeadline(time.Now().Add(time.Second))
		_, werr = conn.Read(make([]byte, 1))
	}
	if werr == nil || time.Since(start) > 8*time.Second {
		t.Fatalf("a slowloris client was not cut off (after %v: %v)", time.Since(start), werr)
	}
	t.Logf("cut off after %v: %v", time.Since(start).Round(100*time.Millisecond), werr)
}

// TestGatewayHostdDown: with nothing on hostd's socket the gateway answers
// 502 in hostd's error shape.
func TestGatewayHostdDown(t *testing.T) {
	h := startHostd(t)
	g := startGateway(t, h, nil)
	h.srv.Close()
	code, _, body := g.do(t, "GET", "/v1/whoami", adminToken, nil, nil)
	if code != http.StatusBadGateway || !strings.Contains(errorOf(t, body), "hostd") {
		t.Errorf("hostd down: %d %s", code, body)
	}
}

func unixClient(socket string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}}
}

var _ = hex.EncodeToString
