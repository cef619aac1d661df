package gateway_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"os"
	"path/filepath"
	"testing"
)

// TestReviewPreviewEdgeInformational: paddock_preview promises to remove
// Set-Cookie from every preview answer and add the safety headers where
// hostd did not (defence in depth), but guardedWriter skips every status
// below 200. A 1xx (103 Early Hints) and a 101 upgrade from hostd reach
// the client with Set-Cookie and without the CSP.
func TestReviewPreviewEdgeInformational(t *testing.T) {
	dir, err := os.MkdirTemp("", "pgwr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "hostd.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz":
			w.Write([]byte(`{"ok":true}`))
		case "/preview/x/early":
			w.Header().Set("Set-Cookie", "pwn=1; Path=/")
			w.Header().Set("Link", "</style.css>; rel=preload; as=style")
			w.WriteHeader(http.StatusEarlyHints)
			for k := range w.Header() {
				delete(w.Header(), k)
			}
			w.Header().Set("Content-Security-Policy", "sandbox")
			w.Write([]byte("ok"))
		case "/preview/x/ws":
			conn, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSet-Cookie: pwn=1; Path=/\r\n\r\n")
			brw.Flush()
			buf := make([]byte, 1)
			conn.Read(buf)
		default:
			http.NotFound(w, r)
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	g := startGateway(t, &fakeHostd{socket: sock}, nil)

	t.Run("103", func(t *testing.T) {
		var got []textproto.MIMEHeader
		req, _ := http.NewRequest("GET", g.base+"/preview/x/early", nil)
		req = req.WithContext(httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			Got1xxResponse: func(code int, h textproto.MIMEHeader) error { got = append(got, h); return nil },
		}))
		resp, err := g.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		// The 103 must reach the client (what is checked is what it
		// carries), with its Link.
		if len(got) != 1 || got[0].Get("Link") != "</style.css>; rel=preload; as=style" {
			t.Fatalf("1xx answers through the gateway: %v, want one 103 with the Link hostd sent", got)
		}
		for _, h := range got {
			if v := h.Values("Set-Cookie"); len(v) > 0 {
				t.Errorf("a 1xx on a preview route reached the client with Set-Cookie %q", v)
			}
		}
	})

	t.Run("101", func(t *testing.T) {
		conn, err := tls.Dial("tcp", g.addr, &tls.Config{RootCAs: g.roots, ServerName: "localhost", NextProtos: []string{"http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.Write([]byte("GET /preview/x/ws HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("status %d", resp.StatusCode)
		}
		if v := resp.Header.Values("Set-Cookie"); len(v) > 0 {
			t.Errorf("a 101 on a preview route reached the client with Set-Cookie %q", v)
		}
		if resp.Header.Get("Content-Security-Policy") == "" {
			t.Errorf("a 101 on a preview route has no Content-Security-Policy: %v", resp.Header)
		}
	})
}
