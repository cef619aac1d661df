package proxy

import (
	"bufio"
	"cmp"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// connectThrough opens a CONNECT tunnel to target through the forward
// proxy and returns the connection once the proxy answered 200.
func connectThrough(t *testing.T, e *env, target string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT %s: %d", target, resp.StatusCode)
	}
	return &bufferedConn{Conn: c, br: br} // a server that speaks first may already be in br
}

// getOverTLS runs a TLS handshake with serverName (none when "") over c
// and, when it succeeds, one GET; it returns the body or the error.
func getOverTLS(e *env, c net.Conn, serverName string) (string, error) {
	cfg := &tls.Config{ServerName: serverName, RootCAs: e.roots}
	if serverName == "" {
		cfg.InsecureSkipVerify = true // no name: nothing to verify against
	}
	tc := tls.Client(c, cfg)
	if err := tc.Handshake(); err != nil {
		return "", err
	}
	io.WriteString(tc, "GET /sni HTTP/1.1\r\nHost: "+cmp.Or(serverName, "allowed.test")+"\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestAttackConnectSNIMismatch: a CONNECT to an allowed host whose TLS
// ClientHello names another site the same server hosts (a path-limited
// one, or one on no list) must not be relayed: the served site would be
// the ClientHello's, not the one the policy judged. A real TLS client does
// the handshake through the tunnel; the upstream is a real TLS server
// whose certificate covers all the names, so without the check the
// handshake succeeds and the other site answers.
func TestAttackConnectSNIMismatch(t *testing.T) {
	for _, sni := range []string{"evil.test", "limited.test"} {
		t.Run("SNI "+sni+" through CONNECT allowed.test", func(t *testing.T) {
			e := newEnv(t)
			c := connectThrough(t, e, "allowed.test:443")
			body, err := getOverTLS(e, c, sni)
			if err == nil {
				t.Fatalf("the tunnel to allowed.test served %s: %q", sni, body)
			}
			if !strings.Contains(err.Error(), "access denied") {
				t.Errorf("handshake error %v, want the proxy's access_denied alert", err)
			}
			if n := e.tlsUp.hits.Load(); n != 0 {
				t.Errorf("the upstream served %d requests", n)
			}
			ev := e.events.find(t, kindDeny, "allowed.test")
			if ev.Port != 443 || !strings.Contains(ev.Reason, `"`+sni+`"`) || !strings.Contains(ev.Reason, "is not allowed.test") {
				t.Errorf("deny event %+v, want it to name %s and allowed.test", ev, sni)
			}
		})
	}

	t.Run("nothing reaches upstream", func(t *testing.T) {
		e := newEnv(t)
		up := newCountingListener(t)
		e.dialer.route(netip.AddrPortFrom(addrAllowed, 443), up.addr())
		c := connectThrough(t, e, "allowed.test:443")
		if _, err := getOverTLS(e, c, "evil.test"); err == nil {
			t.Fatal("handshake succeeded")
		}
		time.Sleep(50 * time.Millisecond)
		if b := up.bytes.Load(); b != 0 {
			t.Errorf("upstream got %d bytes of the refused ClientHello", b)
		}
	})

	t.Run("a ClientHello the proxy cannot read is refused", func(t *testing.T) {
		e := newEnv(t)
		up := newCountingListener(t)
		e.dialer.route(netip.AddrPortFrom(addrAllowed, 443), up.addr())
		c := connectThrough(t, e, "allowed.test:443")
		// A handshake record that is not a ClientHello at all.
		io.WriteString(c, "\x16\x03\x01\x00\x05hello")
		if _, err := c.Read(make([]byte, 64)); err == nil {
			// The alert; then the proxy closes.
			if _, err := c.Read(make([]byte, 64)); !closedByProxy(err) {
				t.Errorf("the tunnel stayed open: %v", err)
			}
		}
		time.Sleep(50 * time.Millisecond)
		if b := up.bytes.Load(); b != 0 {
			t.Errorf("upstream got %d bytes", b)
		}
		if ev := e.events.find(t, kindDeny, "allowed.test"); !strings.Contains(ev.Reason, "could not be checked") {
			t.Errorf("deny event %+v", ev)
		}
	})

	// What still passes.
	for _, tc := range []struct{ name, sni string }{
		{"the same name", "allowed.test"},
		{"the same name in capitals", "ALLOWED.test"},
		// No SNI: the server's default site at the address checked for
		// allowed.test; the sandbox chooses nothing (docs/egress.md).
		{"no server name", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			c := connectThrough(t, e, "allowed.test:443")
			body, err := getOverTLS(e, c, tc.sni)
			if err != nil || body != "hello from tls GET /sni" {
				t.Fatalf("got %q, %v", body, err)
			}
			for _, ev := range e.events.all() {
				if ev.Kind == kindDeny {
					t.Errorf("denied: %+v", ev)
				}
			}
		})
	}

	t.Run("a server that speaks first is answered", func(t *testing.T) {
		// Not TLS: the first bytes come from upstream, and the check of
		// the sandbox's first bytes must not hold them back.
		e := newEnv(t)
		banner := listen(t)
		go func() {
			for {
				c, err := banner.Accept()
				if err != nil {
					return
				}
				io.WriteString(c, "220 hello\r\n")
				// Read the whole line: the proxy may relay the
				// sandbox's first bytes in more than one write.
				line, _ := bufio.NewReader(c).ReadString('\n')
				io.WriteString(c, line)
				c.Close()
			}
		}()
		t.Cleanup(func() { banner.Close() })
		e.dialer.route(netip.AddrPortFrom(addrAllowed, 443), banner.Addr().String())
		c := connectThrough(t, e, "allowed.test:443")
		br := bufio.NewReader(c)
		line, err := br.ReadString('\n')
		if err != nil || line != "220 hello\r\n" {
			t.Fatalf("banner %q, %v", line, err)
		}
		io.WriteString(c, "EHLO sandbox\r\n")
		if line, err := br.ReadString('\n'); err != nil || line != "EHLO sandbox\r\n" {
			t.Fatalf("echo %q, %v", line, err)
		}
	})
}
