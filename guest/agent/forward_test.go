package agent_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"paddock.dev/paddock/guest/agent"
	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
)

// echoServer accepts on addr and echoes each connection until its client
// half-closes, then half-closes too.
func echoServer(t *testing.T, network, addr string) (port int) {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
				c.(*net.TCPConn).CloseWrite()
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestForward: bytes go both ways through DialPort, and a half-close
// reaches the server, whose own half-close ends the client's reads.
func TestForward(t *testing.T) {
	t.Parallel()
	a := startAgent(t, nil)
	port := echoServer(t, "tcp", "127.0.0.1:0")
	conn, err := a.c.DialPort(ctxFor(t), port)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	payload := strings.Repeat("0123456789abcdef", 64<<10) // 1 MiB
	errc := make(chan error, 1)
	go func() {
		_, err := io.WriteString(conn, payload)
		if err == nil {
			err = conn.(interface{ CloseWrite() error }).CloseWrite()
		}
		errc <- err
	}()
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	got, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("write: %v", err)
	}
	if string(got) != payload {
		t.Errorf("echoed %d bytes, want %d equal ones", len(got), len(payload))
	}
}

// TestForwardIPv6: a server that took only ::1 is reached too.
func TestForwardIPv6(t *testing.T) {
	t.Parallel()
	if ln, err := net.Listen("tcp", "[::1]:0"); err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	} else {
		ln.Close()
	}
	a := startAgent(t, nil)
	port := echoServer(t, "tcp", "[::1]:0")
	conn, err := a.c.DialPort(ctxFor(t), port)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "six")
	conn.(interface{ CloseWrite() error }).CloseWrite()
	if got, _ := io.ReadAll(conn); string(got) != "six" {
		t.Errorf("got %q", got)
	}
}

// freePort is a port nothing listens on (it was free a moment ago).
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

// rawForward sends one request line and headers on a new stream to the
// agent and returns the answer and the stream.
func rawForward(t *testing.T, sock, query string, header string) (*http.Response, net.Conn) {
	t.Helper()
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(conn, "GET /v1/forward"+query+" HTTP/1.1\r\nHost: guest\r\n"+header+"\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	return resp, &readConn{conn, br}
}

type readConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *readConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// TestForwardRefusals: every refusal is a JSON api.Error before any
// upgrade, with the status that says why.
func TestForwardRefusals(t *testing.T) {
	t.Parallel()
	a := startAgent(t, nil)
	up := "Connection: Upgrade\r\nUpgrade: " + api.ForwardProtocol + "\r\n"
	closed := freePort(t)
	for _, tc := range []struct {
		name, query, header string
		status              int
		code, msg           string
	}{
		{"no port", "", up, 400, "invalid_argument", "port is required"},
		{"port 0", "?port=0", up, 400, "invalid_argument", "from 1 to 65535"},
		{"port too big", "?port=65536", up, 400, "invalid_argument", "from 1 to 65535"},
		{"port not a number", "?port=http", up, 400, "invalid_argument", "from 1 to 65535"},
		{"no upgrade", "?port=80", "", 400, "invalid_argument", "Upgrade: paddock-tcp"},
		{"another protocol", "?port=80", "Connection: Upgrade\r\nUpgrade: websocket\r\n", 400, "invalid_argument", "Upgrade: paddock-tcp"},
		{"nothing listening", "?port=" + strconv.Itoa(closed), up, 502, "bad_gateway", "nothing is listening on port " + strconv.Itoa(closed)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, _ := rawForward(t, a.sock, tc.query, tc.header)
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || !strings.Contains(string(body), `"code":"`+tc.code+`"`) || !strings.Contains(string(body), tc.msg) {
				t.Errorf("%d %s, want %d with code %s naming %q", resp.StatusCode, body, tc.status, tc.code, tc.msg)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
	// The client's view of the same refusal.
	_, err := a.c.DialPort(ctxFor(t), closed)
	if !client.IsStatus(err, http.StatusBadGateway) || !strings.Contains(err.Error(), "nothing is listening") {
		t.Errorf("DialPort to a closed port: %v, want a 502 saying nothing listens", err)
	}
	if _, err := a.c.DialPort(ctxFor(t), 0); err == nil {
		t.Error("DialPort(0) succeeded")
	}
}

// TestForwardEarlyBytes: bytes sent right behind the request, before the
// 101, still reach the port first.
func TestForwardEarlyBytes(t *testing.T) {
	t.Parallel()
	a := startAgent(t, nil)
	port := echoServer(t, "tcp", "127.0.0.1:0")
	resp, conn := rawForward(t, a.sock, "?port="+strconv.Itoa(port), "Connection: Upgrade\r\nUpgrade: "+api.ForwardProtocol+"\r\n\r\nearly")
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Upgrade") != api.ForwardProtocol {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "early" {
		t.Fatalf("read %q %v", buf, err)
	}
}

// TestForwardCap: api.MaxForwards forwards stay open at once; one more is
// 409 until one of them closes.
func TestForwardCap(t *testing.T) {
	t.Parallel()
	a := startAgent(t, nil)
	port := echoServer(t, "tcp", "127.0.0.1:0")
	ctx := ctxFor(t)
	conns := make([]net.Conn, api.MaxForwards)
	var wg sync.WaitGroup
	errs := make([]error, len(conns))
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conns[i], errs[i] = a.c.DialPort(ctx, port)
		}()
	}
	wg.Wait()
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("opening %d forwards: %v", api.MaxForwards, err)
	}
	_, err := a.c.DialPort(ctx, port)
	if !client.IsStatus(err, http.StatusConflict) || !strings.Contains(err.Error(), "close one") {
		t.Fatalf("forward %d: %v, want 409", api.MaxForwards+1, err)
	}
	conns[0].Close()
	conns[0] = nil
	// The agent notices the close when its copy ends; give it a moment.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := a.c.DialPort(ctx, port)
		if err == nil {
			conns[0] = c
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after closing one, a forward is still refused: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestForwardEndsWithAgent: stopping the agent ends the forwards it holds
// (they are hijacked, so the HTTP server's shutdown would not).
func TestForwardEndsWithAgent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv, err := agent.New(agent.Config{Root: dir, Home: dir, SpoolDir: filepath.Join(dir, "spool"), UploadDir: filepath.Join(dir, "uploads")})
	if err != nil {
		t.Fatal(err)
	}
	sockDir, err := os.MkdirTemp("", "pg")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(sockDir)
	ln, err := net.Listen("unix", filepath.Join(sockDir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	c := client.NewUnix(filepath.Join(sockDir, "s"))
	defer c.Close()
	port := echoServer(t, "tcp", "127.0.0.1:0")
	conn, err := c.DialPort(ctxFor(t), port)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serve: %v", err)
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("read after the agent stopped: %v, want the forward closed", err)
	}
}
