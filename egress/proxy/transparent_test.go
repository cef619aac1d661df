package proxy

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// redirected opens a transparent-mode connection as the sandbox's agent
// would: the redirect line for dst, then the client's bytes.
func (e *env) redirected(dst netip.AddrPort) net.Conn {
	e.t.Helper()
	c, err := net.Dial("tcp", e.taddr)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, redirectPrefix+dst.String()+"\n"); err != nil {
		e.t.Fatal(err)
	}
	return c
}

func TestTransparentHTTP(t *testing.T) {
	e := newEnv(t)
	c := e.redirected(netip.AddrPortFrom(elsewhere, 80))
	br := bufio.NewReader(c)
	get := func(host, path string) (int, string) {
		t.Helper()
		io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: "+host+"\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	// Two requests on one connection, then a denied one.
	for _, path := range []string{"/one", "/two"} {
		if status, body := get("allowed.test", path); status != 200 || body != "hello from plain GET "+path {
			t.Fatalf("%s: %d %q", path, status, body)
		}
	}
	status, body := get("evil.test", "/")
	if status != http.StatusForbidden || !strings.Contains(body, "evil.test:80") {
		t.Fatalf("denied host: %d %q", status, body)
	}
	// The name's checked address was dialled, never the address the
	// client had connected to.
	want := []string{netip.AddrPortFrom(addrAllowed, 80).String()}
	if diff := cmp.Diff(want, e.dialer.all()); diff != "" {
		t.Errorf("dialled (-want +got):\n%s", diff)
	}
	if ev := e.events.find(t, kindAllow, "allowed.test"); ev.Port != 80 || ev.Path != "/two" {
		t.Errorf("allow event %+v", ev)
	}
	e.events.find(t, kindDeny, "evil.test")

	// A Host header naming another port than the connection's is refused.
	c2 := e.redirected(netip.AddrPortFrom(elsewhere, 80))
	io.WriteString(c2, "GET / HTTP/1.1\r\nHost: allowed.test:8080\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c2), nil)
	if err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("port mismatch: %v %v", resp, err)
	}
}

func TestTransparentTLS(t *testing.T) {
	handshake := func(e *env, serverName string) (*tls.Conn, error) {
		c := e.redirected(netip.AddrPortFrom(elsewhere, 443))
		cfg := &tls.Config{ServerName: serverName, RootCAs: e.roots}
		if serverName == "" {
			cfg.InsecureSkipVerify = true
		}
		tc := tls.Client(c, cfg)
		return tc, tc.Handshake()
	}

	t.Run("allowed SNI", func(t *testing.T) {
		e := newEnv(t)
		tc, err := handshake(e, "allowed.test")
		if err != nil {
			t.Fatalf("handshake: %v", err)
		}
		io.WriteString(tc, "GET /sni HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(b) != "hello from tls GET /sni" {
			t.Fatalf("got %d %q", resp.StatusCode, b)
		}
		want := []string{netip.AddrPortFrom(addrAllowed, 443).String()}
		if diff := cmp.Diff(want, e.dialer.all()); diff != "" {
			t.Errorf("dialled (-want +got):\n%s", diff)
		}
		if ev := e.events.find(t, kindAllow, "allowed.test"); ev.Port != 443 || ev.Method != "" {
			t.Errorf("allow event %+v", ev)
		}
	})
	for _, c := range []struct{ name, sni, says string }{
		{"denied SNI", "evil.test", "not on the test allow list"},
		{"SNI needing interception", "limited.test", "TLS interception"},
		{"no SNI", "", "no server name (SNI)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			if _, err := handshake(e, c.sni); err == nil {
				t.Fatal("handshake succeeded")
			}
			host := c.sni
			if host == "" {
				host = elsewhere.String()
			}
			if ev := e.events.find(t, kindDeny, host); !strings.Contains(ev.Reason, c.says) {
				t.Errorf("deny event %+v, want it to say %q", ev, c.says)
			}
			if d := e.dialer.all(); len(d) != 0 {
				t.Errorf("dialled %v", d)
			}
		})
	}
	t.Run("not TLS", func(t *testing.T) {
		e := newEnv(t)
		c := e.redirected(netip.AddrPortFrom(elsewhere, 443))
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
		if _, err := c.Read(make([]byte, 1)); !closedByProxy(err) {
			t.Errorf("plain HTTP on 443 was not closed: %v", err)
		}
		e.events.find(t, kindDeny, elsewhere.String())
	})
}

func TestTransparentOtherPortsAndBadLines(t *testing.T) {
	e := newEnv(t)
	c := e.redirected(netip.AddrPortFrom(elsewhere, 22))
	if _, err := c.Read(make([]byte, 1)); !closedByProxy(err) {
		t.Errorf("port 22 was not closed: %v", err)
	}
	if ev := e.events.find(t, kindDeny, elsewhere.String()); ev.Port != 22 {
		t.Errorf("event %+v", ev)
	}
	for _, line := range []string{"GET / HTTP/1.1\r\n\r\n", "PADDOCK-REDIRECT nonsense\n", "PADDOCK-REDIRECT " + strings.Repeat("1", 200) + "\n"} {
		c, err := net.Dial("tcp", e.taddr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, line)
		if _, err := c.Read(make([]byte, 1)); !closedByProxy(err) {
			t.Errorf("%q: not closed: %v", line, err)
		}
		c.Close()
	}
	if d := e.dialer.all(); len(d) != 0 {
		t.Errorf("dialled %v", d)
	}
}
