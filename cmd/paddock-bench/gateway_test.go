package main

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"paddock.dev/paddock/gateway"
)

// TestBenchGatewayIsQuiet: the benchmark's gateway discards Caddy's own
// log, and a run of it (start, a request, stop) writes nothing to the
// process's stderr, so no JSON line lands between the benchmark's rows.
// stderr is caught at the descriptor: Caddy's first logger holds fd 2
// from before any configuration.
func TestBenchGatewayIsQuiet(t *testing.T) {
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cfg := benchGatewayConfig(dir, addr, filepath.Join(dir, "hostd.sock"), 0)
	raw, err := cfg.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Logging struct {
			Logs map[string]struct {
				Writer struct{ Output string }
			}
		}
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	if out := c.Logging.Logs["default"].Writer.Output; out != "discard" {
		t.Errorf("the bench's Caddy log goes to %q, want discard", out)
	}

	caught, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	saved, err := unix.Dup(2)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Dup2(int(caught.Fd()), 2); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if !restored {
			unix.Dup2(saved, 2)
			unix.Close(saved)
			restored = true
		}
	}
	defer restore()
	quietCaddy()
	gw, err := gateway.Start(cfg)
	if err != nil {
		restore()
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := client.Get("https://" + addr + "/healthz")
	if err == nil {
		resp.Body.Close()
	}
	stopErr := gw.Stop()
	restore()
	if err != nil {
		t.Fatalf("a request through the gateway: %v", err)
	}
	if stopErr != nil {
		t.Fatal(stopErr)
	}
	f, err := os.Open(caught.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(strings.TrimSpace(sc.Text()), "{") {
			t.Errorf("the gateway wrote a JSON line to stderr: %s", sc.Text())
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "access.log")); !strings.Contains(string(b), "/healthz") {
		t.Errorf("the access log file did not get the request (so the test saw no logging at all): %q", b)
	}
}
