package hypervisor_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/internal/testutil"
)

// TestConformancePortForward: a server started inside a real sandbox (on
// its loopback, with no network at all) is reached through the agent's
// port forward: HTTP requests over the forwarded stream, two streams at
// once, a half-close passed on. A port nothing listens on is a 502 naming
// it, and so is a port only the host listens on: the forward reaches the
// sandbox's loopback, never the host's. Stopping the machine ends an open
// forward.
func TestConformancePortForward(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e backendEnv) {
		m, c := e.create(t, hypervisor.MachineSpec{})
		ctx := ctxT(t)
		bin, err := os.ReadFile(testutil.EchoServerBinary(t))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.WriteFile(ctx, api.FileContent{Path: "/tmp/echoserver", Content: bin, Mode: "0755"}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.StartJob(ctx, api.JobRequest{Command: api.Command{Shell: "exec /tmp/echoserver -addr 127.0.0.1:8080"}}); err != nil {
			t.Fatal(err)
		}
		// roundTrip sends one HTTP request over a fresh forward.
		roundTrip := func(path string) (int, string, error) {
			conn, err := c.DialPort(ctx, 8080)
			if err != nil {
				return 0, "", err
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(20 * time.Second))
			req, _ := http.NewRequest("GET", "http://sandbox"+path, nil)
			req.Close = true
			if err := req.Write(conn); err != nil {
				return 0, "", err
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), req)
			if err != nil {
				return 0, "", err
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b), err
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			code, body, err := roundTrip("/sub/x?y=1")
			if err == nil {
				if code != 200 || body != "sub:/sub/x?y=1" {
					t.Fatalf("through the forward: %d %q", code, body)
				}
				break
			}
			if !client.IsStatus(err, http.StatusBadGateway) || time.Now().After(deadline) {
				t.Fatalf("the server in the sandbox never answered: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		// Two forwards at once, each its own stream.
		a, err := c.DialPort(ctx, 8080)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		code, body, err := roundTrip("/two")
		if err != nil || code != 200 || body != "sub:/two?" {
			t.Errorf("a second forward while one is open: %d %q %v", code, body, err)
		}
		// A half-close reaches the server: a request with no
		// Connection: close is answered, then the server sees EOF and
		// ends the stream.
		io.WriteString(a, "GET /half HTTP/1.1\r\nHost: sandbox\r\n\r\n")
		if err := a.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
			t.Fatalf("half-close: %v", err)
		}
		a.SetReadDeadline(time.Now().Add(20 * time.Second))
		rest, err := io.ReadAll(a)
		if err != nil || !strings.Contains(string(rest), "sub:/half?") {
			t.Errorf("after a half-close: %q %v", rest, err)
		}

		// Nothing listening, in the sandbox or only on the host.
		hostLn, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer hostLn.Close()
		hostPort := hostLn.Addr().(*net.TCPAddr).Port
		for _, port := range []int{8081, hostPort} {
			_, err := c.DialPort(ctx, port)
			if !client.IsStatus(err, http.StatusBadGateway) || !strings.Contains(err.Error(), "nothing is listening on port "+strconv.Itoa(port)) {
				t.Errorf("port %d: %v, want 502 nothing is listening", port, err)
			}
		}

		// Stopping the machine ends an open forward.
		open, err := c.DialPort(ctx, 8080)
		if err != nil {
			t.Fatal(err)
		}
		defer open.Close()
		stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := m.Stop(stopCtx); err != nil {
			t.Fatal(err)
		}
		open.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := open.Read(make([]byte, 1)); err == nil || os.IsTimeout(err) {
			t.Errorf("a forward outlived its machine: %v", err)
		}
	})
}
