package proxy

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"paddock.dev/paddock/egress"
)

func TestAllowedHTTP(t *testing.T) {
	e := newEnv(t)
	status, body := e.get("http://allowed.test/hello")
	if status != http.StatusOK || body != "hello from plain GET /hello" {
		t.Fatalf("got %d %q", status, body)
	}
	if got := e.plainUp.lastHost(); got != "allowed.test" {
		t.Errorf("upstream saw Host %q, want allowed.test", got)
	}
	if diff := cmp.Diff([]string{netip.AddrPortFrom(addrAllowed, 80).String()}, e.dialer.all()); diff != "" {
		t.Errorf("dialled (-want +got):\n%s", diff)
	}
	ev := e.events.find(t, kindAllow, "allowed.test")
	want := egress.Event{Sandbox: sandboxID, Kind: kindAllow, Host: "allowed.test", Port: 80, Method: "GET", Path: "/hello", Rule: "test:allowed.test"}
	if diff := cmp.Diff(want, ev); diff != "" {
		t.Errorf("event (-want +got):\n%s", diff)
	}
}

func TestAllowedHTTPSThroughConnect(t *testing.T) {
	e := newEnv(t)
	status, body := e.get("https://allowed.test/hello")
	if status != http.StatusOK || body != "hello from tls GET /hello" {
		t.Fatalf("got %d %q", status, body)
	}
	ev := e.events.find(t, kindAllow, "allowed.test")
	want := egress.Event{Sandbox: sandboxID, Kind: kindAllow, Host: "allowed.test", Port: 443, Rule: "test:allowed.test"}
	if diff := cmp.Diff(want, ev); diff != "" {
		t.Errorf("event (-want +got):\n%s", diff)
	}
}

func TestKeepAliveAndBodies(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	for i, path := range []string{"/echo", "/stream", "/big", "/echo"} {
		resp, err := c.Post("http://allowed.test"+path, "text/plain", strings.NewReader("payload"))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := map[string]string{
			"/echo":   "payload",
			"/stream": "part 0\npart 1\npart 2\npart 3\npart 4\n",
			"/big":    strings.Repeat("x", 4096),
		}[path]
		if resp.StatusCode != 200 || string(b) != want {
			t.Fatalf("request %d %s: %d %q", i, path, resp.StatusCode, b)
		}
	}
	// HEAD keeps the upstream's Content-Length and sends no body.
	resp, err := c.Head("http://allowed.test/big")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.ContentLength != 4096 {
		t.Errorf("HEAD: %d, length %d", resp.StatusCode, resp.ContentLength)
	}
}

func TestDeniedHost(t *testing.T) {
	e := newEnv(t)
	for _, u := range []string{"http://evil.test/x", "https://evil.test/x"} {
		if u[4] == 's' {
			// An https URL through a proxy fails at CONNECT: read the
			// refusal raw instead.
			status, body := raw(t, e.addr, "CONNECT evil.test:443 HTTP/1.1\r\nHost: evil.test:443\r\n\r\n")
			if status != http.StatusForbidden || !strings.Contains(body, "evil.test") || !strings.Contains(body, "not on the test allow list") {
				t.Errorf("CONNECT evil.test: %d %q", status, body)
			}
			continue
		}
		status, body := e.get(u)
		if status != http.StatusForbidden || !strings.Contains(body, "evil.test:80") || !strings.Contains(body, "not on the test allow list") {
			t.Errorf("%s: %d %q", u, status, body)
		}
	}
	if n := e.res.lookups("evil.test"); n != 0 {
		t.Errorf("a denied name was looked up %d times", n)
	}
	if d := e.dialer.all(); len(d) != 0 {
		t.Errorf("dialled %v for a denied host", d)
	}
	ev := e.events.find(t, kindDeny, "evil.test")
	if ev.Reason != "evil.test is not on the test allow list" {
		t.Errorf("deny event %+v", ev)
	}
}

func TestAddressChecks(t *testing.T) {
	t.Run("name resolving to loopback is refused", func(t *testing.T) {
		e := newEnv(t)
		status, body := e.get("http://loopy.test/")
		if status != http.StatusForbidden || !strings.Contains(body, "loopy.test resolves only to refused addresses: 127.0.0.1 is a loopback address") {
			t.Fatalf("got %d %q", status, body)
		}
		if d := e.dialer.all(); len(d) != 0 {
			t.Errorf("dialled %v", d)
		}
		if ev := e.events.find(t, kindDeny, "loopy.test"); !strings.Contains(ev.Reason, "loopback") {
			t.Errorf("event %+v", ev)
		}
	})
	t.Run("CONNECT to a name resolving to loopback is refused", func(t *testing.T) {
		e := newEnv(t)
		status, body := raw(t, e.addr, "CONNECT loopy.test:443 HTTP/1.1\r\nHost: loopy.test:443\r\n\r\n")
		if status != http.StatusForbidden || !strings.Contains(body, "127.0.0.1 is a loopback address") {
			t.Fatalf("got %d %q", status, body)
		}
	})
	t.Run("metadata and private answers are refused, with every reason", func(t *testing.T) {
		e := newEnv(t)
		e.res.set("allowed.test", []netip.Addr{netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("fd00::1")})
		status, body := e.get("http://allowed.test/")
		for _, want := range []string{"169.254.169.254 is a link-local", "10.1.2.3 is a private", "fd00::1 is a private"} {
			if status != http.StatusForbidden || !strings.Contains(body, want) {
				t.Errorf("got %d %q, want it to say %q", status, body, want)
			}
		}
	})
	t.Run("an operator-allowed loopback upstream is reached", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.CheckAddr = allowAddrs(loopback) })
		port := e.plain.Listener.Addr().(*net.TCPAddr).Port
		u := "http://local.test:" + strconv.Itoa(port) + "/hi"
		status, body := e.get(u)
		if status != http.StatusOK || body != "hello from plain GET /hi" {
			t.Fatalf("got %d %q", status, body)
		}
		want := []string{netip.AddrPortFrom(loopback, uint16(port)).String()}
		if diff := cmp.Diff(want, e.dialer.all()); diff != "" {
			t.Errorf("dialled (-want +got):\n%s", diff)
		}
	})
	t.Run("an unreachable upstream is a 502", func(t *testing.T) {
		e := newEnv(t)
		status, body := e.get("http://dead.test/")
		if status != http.StatusBadGateway || !strings.Contains(body, "dead.test:80") {
			t.Fatalf("got %d %q", status, body)
		}
	})
	t.Run("a name that does not resolve is a 502", func(t *testing.T) {
		e := newEnv(t)
		e.pol.allowHost("nowhere.test")
		status, body := e.get("http://nowhere.test/")
		if status != http.StatusBadGateway || !strings.Contains(body, "nowhere.test") {
			t.Fatalf("got %d %q", status, body)
		}
	})
}

// TestRebinding: the name answers a public address, then loopback. Each
// request looks the name up exactly once and dials exactly the address
// that was checked; the transport never looks up again.
func TestRebinding(t *testing.T) {
	for _, scheme := range []string{"http", "https"} {
		t.Run(scheme, func(t *testing.T) {
			e := newEnv(t)
			port := uint16(80)
			upstream := e.plain.Listener.Addr().String()
			if scheme == "https" {
				port, upstream = 443, e.secure.Listener.Addr().String()
			}
			e.res.set("rebind.test", []netip.Addr{addrRebind}, []netip.Addr{loopback})
			e.dialer.route(netip.AddrPortFrom(addrRebind, port), upstream)

			status, body := e.get(scheme + "://rebind.test/first")
			if status != http.StatusOK {
				t.Fatalf("first request: %d %q", status, body)
			}
			if n := e.res.lookups("rebind.test"); n != 1 {
				t.Errorf("first request looked the name up %d times, want 1", n)
			}
			if scheme == "http" {
				status, body = e.get("http://rebind.test/second")
			} else {
				status, body = raw(t, e.addr, "CONNECT rebind.test:443 HTTP/1.1\r\nHost: rebind.test:443\r\n\r\n")
			}
			if status != http.StatusForbidden || !strings.Contains(body, "127.0.0.1 is a loopback address") {
				t.Errorf("second request (now loopback): %d %q", status, body)
			}
			if n := e.res.lookups("rebind.test"); n != 2 {
				t.Errorf("two requests looked the name up %d times, want 2", n)
			}
			want := []string{netip.AddrPortFrom(addrRebind, port).String()}
			if diff := cmp.Diff(want, e.dialer.all()); diff != "" {
				t.Errorf("dialled (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("first checked answer wins", func(t *testing.T) {
		e := newEnv(t)
		e.res.set("rebind.test", []netip.Addr{loopback, addrRebind, addrAllowed})
		e.dialer.route(netip.AddrPortFrom(addrRebind, 80), e.plain.Listener.Addr().String())
		if status, body := e.get("http://rebind.test/"); status != http.StatusOK {
			t.Fatalf("got %d %q", status, body)
		}
		want := []string{netip.AddrPortFrom(addrRebind, 80).String()}
		if diff := cmp.Diff(want, e.dialer.all()); diff != "" {
			t.Errorf("dialled (-want +got):\n%s", diff)
		}
	})
}

// TestIPLiteralSpellings: hosts go through CanonicalHost, which turns any
// spelling of an IP into the address; literals are never looked up and
// still go through CheckAddr.
func TestIPLiteralSpellings(t *testing.T) {
	spellings := map[string]string{
		"2130706433": "127.0.0.1", "0x7f000001": "127.0.0.1", "0177.0.0.1": "127.0.0.1", "127.1": "127.0.0.1",
		"3405803786": "203.0.113.10", "0xcb.0.0x71.10": "203.0.113.10",
	}
	canon := func(raw string) (string, netip.Addr, error) {
		if a, ok := spellings[raw]; ok {
			ip := netip.MustParseAddr(a)
			return ip.String(), ip, nil
		}
		return basicCanonicalHost(raw)
	}
	e := newEnv(t, func(c *Config) { c.CanonicalHost = canon })
	e.pol.allowHost("127.0.0.1", "::1", "::ffff:127.0.0.1")
	for _, h := range []string{"2130706433", "0x7f000001", "0177.0.0.1", "127.1", "127.0.0.1", "[::1]", "[::ffff:127.0.0.1]"} {
		status, body := raw(t, e.addr, "GET http://"+h+"/ HTTP/1.1\r\nHost: "+h+"\r\n\r\n")
		if status != http.StatusForbidden || !strings.Contains(body, "a loopback address") {
			t.Errorf("%s: %d %q", h, status, body)
		}
	}
	for _, h := range []string{"3405803786", "0xcb.0.0x71.10"} {
		status, body := raw(t, e.addr, "GET http://"+h+"/lit HTTP/1.1\r\nHost: "+h+"\r\n\r\n")
		if status != http.StatusOK || body != "hello from plain GET /lit" {
			t.Errorf("%s: %d %q", h, status, body)
		}
	}
	if n := e.res.total(); n != 0 {
		t.Errorf("IP literals were looked up %d times", n)
	}
	for _, r := range e.pol.decided() {
		if r.Path == "/lit" && r.Host != "203.0.113.10" {
			t.Errorf("policy saw host %q, want the canonical 203.0.113.10", r.Host)
		}
	}
	// Without a CanonicalHost that knows them, odd spellings are refused.
	d := newEnv(t)
	status, body := raw(t, d.addr, "GET http://2130706433/ HTTP/1.1\r\nHost: 2130706433\r\n\r\n")
	if status != http.StatusBadRequest || !strings.Contains(body, "unusual spelling") {
		t.Errorf("default CanonicalHost: %d %q", status, body)
	}
}

func TestMalformedRequestsRefused(t *testing.T) {
	cases := []struct {
		name, req string
		status    int
		says      string
	}{
		{"two Host headers, absolute", "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nHost: evil.test\r\n\r\n", 400, "Host"},
		{"two Host headers, origin-form", "GET / HTTP/1.1\r\nHost: allowed.test\r\nHost: evil.test\r\n\r\n", 400, "Host"},
		{"Host disagrees with URI", "GET http://allowed.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n", 400, `Host header "evil.test" does not match`},
		{"Host port disagrees with URI", "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test:8080\r\n\r\n", 400, "does not match"},
		{"CONNECT Host disagrees", "CONNECT allowed.test:443 HTTP/1.1\r\nHost: evil.test:443\r\n\r\n", 400, "does not match"},
		{"TRACE", "TRACE http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n", 405, "TRACE is refused"},
		{"TRACE origin-form", "TRACE / HTTP/1.1\r\nHost: allowed.test\r\n\r\n", 405, "TRACE is refused"},
		{"userinfo", "GET http://user:pw@allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n", 400, "credentials in the URL"},
		{"https absolute-form", "GET https://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n", 400, "CONNECT"},
		{"no host", "GET / HTTP/1.0\r\n\r\n", 400, "no host"},
		{"CONNECT without port", "CONNECT allowed.test HTTP/1.1\r\nHost: allowed.test\r\n\r\n", 400, "no port"},
		{"bad port", "GET http://allowed.test:99999/ HTTP/1.1\r\nHost: allowed.test:99999\r\n\r\n", 400, "out of range"},
		{"dot-dot", "GET http://allowed.test/a/../b HTTP/1.1\r\nHost: allowed.test\r\n\r\n", 400, "dot segment"},
		{"encoded dot-dot", "GET http://allowed.test/a/%2E%2e/b HTTP/1.1\r\nHost: allowed.test\r\n\r\n", 400, "ambiguous encoding"},
		{"encoded slash", "GET /a%2fb HTTP/1.1\r\nHost: allowed.test\r\n\r\n", 400, "ambiguous encoding"},
		{"double slash", "GET //evil.test/x HTTP/1.1\r\nHost: allowed.test\r\n\r\n", 400, "empty segment"},
		{"backslash", "GET /a\\..\\b HTTP/1.1\r\nHost: allowed.test\r\n\r\n", 400, "backslash"},
		{"websocket upgrade", "GET http://allowed.test/ws HTTP/1.1\r\nHost: allowed.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", 501, "upgrades"},
		{"asterisk", "OPTIONS * HTTP/1.1\r\nHost: allowed.test\r\n\r\n", 400, "not a path"},
		{"garbage", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 400, "malformed"},
	}
	e := newEnv(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body := raw(t, e.addr, c.req)
			if status != c.status || !strings.Contains(body, c.says) {
				t.Errorf("got %d %q, want %d saying %q", status, body, c.status, c.says)
			}
		})
	}
	if d := e.dialer.all(); len(d) != 0 {
		t.Errorf("malformed requests dialled %v", d)
	}
	if e.plainUp.hits.Load() != 0 {
		t.Errorf("malformed requests reached the upstream")
	}
}

func TestHostHeaderCanonicalMatch(t *testing.T) {
	e := newEnv(t)
	status, body := raw(t, e.addr, "GET http://allowed.test/ok HTTP/1.1\r\nHost: ALLOWED.Test.:80\r\n\r\n")
	if status != http.StatusOK {
		t.Fatalf("a Host header equal after canonicalisation was refused: %d %q", status, body)
	}
}

func TestOriginFormOnForwardListener(t *testing.T) {
	e := newEnv(t)
	status, body := raw(t, e.addr, "GET /origin HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
	if status != http.StatusOK || body != "hello from plain GET /origin" {
		t.Fatalf("got %d %q", status, body)
	}
}

func TestMethodAndPathRules(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	resp, err := c.Post("http://allowed.test/admin", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "POST /admin is not allowed") {
		t.Errorf("POST /admin: %d %q", resp.StatusCode, b)
	}
	ev := e.events.find(t, kindDeny, "allowed.test")
	want := egress.Event{Sandbox: sandboxID, Kind: kindDeny, Host: "allowed.test", Port: 80, Method: "POST", Path: "/admin", Rule: "test:no-post-admin", Reason: "POST /admin is not allowed"}
	if diff := cmp.Diff(want, ev); diff != "" {
		t.Errorf("event (-want +got):\n%s", diff)
	}
	if status, _ := e.get("http://allowed.test/admin"); status != http.StatusOK {
		t.Errorf("GET /admin: %d", status)
	}
}

// TestConnectDeniedRelaysNothing: a refused CONNECT, even with the client's
// first bytes in the same write, never reaches the upstream.
func TestConnectDeniedRelaysNothing(t *testing.T) {
	for _, host := range []string{"blocked.test", "limited.test"} {
		t.Run(host, func(t *testing.T) {
			e := newEnv(t)
			up := newCountingListener(t)
			e.dialer.route(netip.AddrPortFrom(addrAllowed, 443), up.addr())
			status, body := raw(t, e.addr, "CONNECT "+host+":443 HTTP/1.1\r\nHost: "+host+":443\r\n\r\n\x16\x03\x01\x00\x05hello")
			if status != http.StatusForbidden || !strings.Contains(body, host+":443") {
				t.Fatalf("got %d %q", status, body)
			}
			if host == "limited.test" && !strings.Contains(body, "TLS interception") {
				t.Errorf("an Inspect refusal should say why: %q", body)
			}
			time.Sleep(50 * time.Millisecond)
			if n, b := up.conns.Load(), up.bytes.Load(); n != 0 || b != 0 {
				t.Errorf("upstream saw %d connections, %d bytes", n, b)
			}
			if d := e.dialer.all(); len(d) != 0 {
				t.Errorf("dialled %v", d)
			}
			e.events.find(t, kindDeny, host)
		})
	}
}

// TestInspectAllowsPlainHTTP: a host with method/path rules is refused as a
// tunnel, but its plain HTTP requests are judged one by one.
func TestInspectAllowsPlainHTTP(t *testing.T) {
	e := newEnv(t)
	status, body := e.get("http://limited.test/x")
	if status != http.StatusOK {
		t.Fatalf("got %d %q", status, body)
	}
	resp, err := e.client().Get("https://limited.test/x")
	if err == nil {
		resp.Body.Close()
		t.Fatalf("https to a host with path rules went through: %d", resp.StatusCode)
	}
}

func TestTunnelLimit(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxTunnels = 2 })
	up := newCountingListener(t)
	e.dialer.route(netip.AddrPortFrom(addrAllowed, 443), up.addr())
	open := func() (net.Conn, int, string) {
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, "CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == 200 {
			return c, 200, ""
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return c, resp.StatusCode, string(b)
	}
	c1, s1, _ := open()
	defer c1.Close()
	c2, s2, _ := open()
	defer c2.Close()
	if s1 != 200 || s2 != 200 {
		t.Fatalf("first two tunnels: %d %d", s1, s2)
	}
	c3, s3, body := open()
	c3.Close()
	if s3 != http.StatusTooManyRequests || !strings.Contains(body, "2 open tunnels") {
		t.Fatalf("third tunnel: %d %q", s3, body)
	}
	if ev := e.events.find(t, kindDeny, "allowed.test"); !strings.Contains(ev.Reason, "open tunnels") {
		t.Errorf("event %+v", ev)
	}
	c1.Close()
	deadline := time.Now().Add(3 * time.Second)
	for {
		c, s, _ := open()
		c.Close()
		if s == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a closed tunnel's slot never came back (last status %d)", s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestHeaderLimit(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxHeaderBytes = 1024 })
	status, body := raw(t, e.addr, "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nX-Big: "+strings.Repeat("a", 8000)+"\r\n\r\n")
	if status != http.StatusRequestHeaderFieldsTooLarge || !strings.Contains(body, "1024") {
		t.Fatalf("got %d %q", status, body)
	}
	if e.plainUp.hits.Load() != 0 {
		t.Error("an oversized request reached the upstream")
	}
}

func TestTimeouts(t *testing.T) {
	t.Run("slow request head", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.HeaderTimeout = 200 * time.Millisecond })
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "GET http://allowed.test/ HTTP/1.1\r\n")
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		start := time.Now()
		if _, err := c.Read(make([]byte, 1)); !closedByProxy(err) {
			t.Fatalf("the proxy kept a slow head open: %v", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("closed after %v", d)
		}
	})
	t.Run("upstream stalled mid-response", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.IdleTimeout = 300 * time.Millisecond })
		start := time.Now()
		resp, err := e.client().Get("http://allowed.test/stall")
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil || string(b) != "0123456789" {
			t.Errorf("got %q, %v; want the first 10 bytes and an error", b, err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("a stalled upstream held the client %v", d)
		}
	})
	t.Run("idle tunnel", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.IdleTimeout = 300 * time.Millisecond })
		up := newCountingListener(t)
		e.dialer.route(netip.AddrPortFrom(addrAllowed, 443), up.addr())
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\nping")
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("CONNECT: %v %v", resp, err)
		}
		echo := make([]byte, 4)
		if _, err := io.ReadFull(br, echo); err != nil || string(echo) != "ping" {
			t.Fatalf("early bytes not relayed: %q %v", echo, err)
		}
		start := time.Now()
		if _, err := br.ReadByte(); !closedByProxy(err) {
			t.Fatalf("idle tunnel still open: %v", err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("idle tunnel closed after %v", d)
		}
	})
}

// closedByProxy reports whether a read error means the proxy closed the
// connection, not that the test's own deadline ran out.
func closedByProxy(err error) bool {
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// TestEventsCarryNoSecrets: headers, query strings and bodies never reach
// the ledger.
func TestEventsCarryNoSecrets(t *testing.T) {
	e := newEnv(t)
	req, _ := http.NewRequest(http.MethodPost, "http://allowed.test/echo?token=SECRET-Q", strings.NewReader("SECRET-B"))
	req.Header.Set("Authorization", "Bearer SECRET-H")
	req.Header.Set("Cookie", "s=SECRET-C")
	resp, err := e.client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	raw(t, e.addr, "GET http://evil.test/p?k=SECRET-Q HTTP/1.1\r\nHost: evil.test\r\nAuthorization: SECRET-H\r\n\r\n")
	raw(t, e.addr, "GET http://u:SECRET-P@allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
	raw(t, e.addr, "GET / HTTP/1.1\r\nHost: allowed.test\r\nBad Header: SECRET-H\r\n\r\n")
	evs := e.events.all()
	if len(evs) < 4 {
		t.Fatalf("expected four events, got %+v", evs)
	}
	b, _ := json.Marshal(evs)
	if strings.Contains(string(b), "SECRET") {
		t.Errorf("a secret reached the ledger: %s", b)
	}
}

func TestCloseEndsEverything(t *testing.T) {
	p := New(Config{Resolver: &fakeResolver{answers: map[string][][]netip.Addr{}, calls: map[string]int{}}})
	l := listen(t)
	served := make(chan error, 1)
	go func() { served <- p.Serve(l, sandboxID, newFakePolicy()) }()

	// An open, idle client connection.
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET http://allowed.test/ HTTP/1.1\r\n")
	time.Sleep(50 * time.Millisecond)

	done := make(chan struct{})
	go func() { p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	if err := <-served; !errors.Is(err, ErrClosed) {
		t.Errorf("Serve returned %v", err)
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !closedByProxy(err) {
		t.Errorf("client connection still open after Close: %v", err)
	}
	if err := p.ServeTransparent(listen(t), sandboxID, newFakePolicy()); !errors.Is(err, ErrClosed) {
		t.Errorf("ServeTransparent after Close: %v", err)
	}
}

func TestCloseEndsTunnels(t *testing.T) {
	e := newEnv(t)
	up := newCountingListener(t)
	e.dialer.route(netip.AddrPortFrom(addrAllowed, 443), up.addr())
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n")
	br := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect}); err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	e.p.Close()
	if _, err := br.ReadByte(); !closedByProxy(err) {
		t.Errorf("tunnel still open after Close: %v", err)
	}
}

// TestExpectContinue: the proxy answers 100 Continue when the body is
// wanted, and a refused request does not wait for a body it never asked
// for.
func TestExpectContinue(t *testing.T) {
	e := newEnv(t)
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	io.WriteString(c, "POST http://allowed.test/echo HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
		t.Fatalf("wanted 100 Continue, got %q %v", line, err)
	}
	br.ReadString('\n')
	io.WriteString(c, "hello")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != "hello" {
		t.Fatalf("got %d %q", resp.StatusCode, b)
	}

	// Refused before the body: 403 at once, and the connection closes.
	io.WriteString(c, "POST http://allowed.test/admin HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !resp.Close {
		t.Errorf("refused Expect request: %d, close %v", resp.StatusCode, resp.Close)
	}
}

// TestHTTP10Client: a response of unknown length to an HTTP/1.0 client is
// delimited by closing the connection.
func TestHTTP10Client(t *testing.T) {
	e := newEnv(t)
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET http://allowed.test/stream HTTP/1.0\r\n\r\n")
	all, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	s := string(all)
	if !strings.HasPrefix(s, "HTTP/1.1 200") || !strings.Contains(s, "Connection: close") || !strings.HasSuffix(s, "part 4\n") || strings.Contains(s, "chunked") {
		t.Errorf("got %q", s)
	}
}

// TestCloseSandboxEndsItsTunnels: CloseSandbox ends the open tunnels of one
// sandbox (a policy replaced or a sandbox let go stops applying at once)
// and leaves another sandbox's alone.
func TestCloseSandboxEndsItsTunnels(t *testing.T) {
	e := newEnv(t)
	up := newCountingListener(t)
	e.dialer.route(netip.AddrPortFrom(addrAllowed, 443), up.addr())
	other := listen(t)
	go e.p.Serve(other, "other-sandbox", e.pol)
	open := func(addr string) (*bufio.Reader, net.Conn) {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		io.WriteString(c, "CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n")
		br := bufio.NewReader(c)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect}); err != nil || resp.StatusCode != 200 {
			t.Fatalf("CONNECT: %v %v", resp, err)
		}
		return br, c
	}
	mine, _ := open(e.addr)
	theirs, tc := open(other.Addr().String())
	e.p.CloseSandbox(sandboxID)
	if _, err := mine.ReadByte(); !closedByProxy(err) {
		t.Errorf("the sandbox's tunnel is still open: %v", err)
	}
	tc.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := theirs.ReadByte(); closedByProxy(err) {
		t.Errorf("another sandbox's tunnel was closed: %v", err)
	}
}

// TestTwoHostHeadersAnyForm: more than one Host header is refused in every
// request form, CONNECT and absolute URIs included.
func TestTwoHostHeadersAnyForm(t *testing.T) {
	e := newEnv(t)
	for _, req := range []string{
		"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\nHost: other.test\r\n\r\n",
		"GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nHost: allowed.test\r\n\r\n",
	} {
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, req)
		line, _ := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if !strings.Contains(line, " 400 ") {
			t.Errorf("%q: %q, want 400", strings.SplitN(req, "\r\n", 2)[0], line)
		}
	}
}

// TestUpstreamPoolPerSandbox: two sandboxes asking for the same upstream
// get connections of their own; one sandbox's requests reuse its own.
func TestUpstreamPoolPerSandbox(t *testing.T) {
	e := newEnv(t)
	other := listen(t)
	go e.p.Serve(other, "other-sandbox", e.pol)
	via := func(addr string) *http.Client {
		u, _ := url.Parse("http://" + addr)
		c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u)}}
		t.Cleanup(c.CloseIdleConnections)
		return c
	}
	get := func(c *http.Client) {
		t.Helper()
		resp, err := c.Get("http://allowed.test/")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	before := len(e.dialer.all())
	mine, theirs := via(e.addr), via(other.Addr().String())
	get(mine)
	get(mine)
	if n := len(e.dialer.all()) - before; n != 1 {
		t.Errorf("one sandbox's two requests made %d upstream connections, want 1 (reused)", n)
	}
	get(theirs)
	if n := len(e.dialer.all()) - before; n != 2 {
		t.Errorf("another sandbox's request made %d connections in all, want 2 (its own)", n)
	}
}

// A chunked response is a stream: each piece the upstream flushes reaches
// the client before the upstream sends the next (the upstream here waits
// for the client to have the first piece).
func TestStreamedChunksArriveAsSent(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	for i := range 2 { // twice: the connection stays usable
		resp, err := c.Get("http://allowed.test/trickle")
		if err != nil {
			t.Fatal(err)
		}
		first := make(chan string, 1)
		go func() {
			line, _ := bufio.NewReader(io.LimitReader(resp.Body, 6)).ReadString('\n')
			first <- line
		}()
		select {
		case line := <-first:
			if line != "first\n" {
				t.Fatalf("request %d: first piece %q", i, line)
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("request %d: the first piece was held back while the upstream waited", i)
		}
		e.plainUp.release <- struct{}{}
		rest, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(rest) != "second\n" || resp.TransferEncoding == nil {
			t.Fatalf("request %d: rest %q, transfer encoding %v", i, rest, resp.TransferEncoding)
		}
	}
}
