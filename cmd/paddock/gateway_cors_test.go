//go:build linux

package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeCORSOriginFlag: --cors-origin is checked before serve opens
// anything (a usage error naming what is wrong), a good one reaches the
// gateway's configuration in the form browsers send, and it is refused
// with --gateway=false, where no gateway would answer it.
func TestServeCORSOriginFlag(t *testing.T) {
	g := &globals{stateDir: t.TempDir()}
	socket := filepath.Join(g.stateDir, "hostd.sock")
	var ue usageError
	for _, c := range []struct {
		origins []string
		want    string
	}{
		{[]string{"*"}, "no wildcards"},
		{[]string{"null"}, "never allowed"},
		{[]string{"https://app.example.com/"}, "no path"},
		{[]string{"app.example.com"}, "scheme://host"},
		{[]string{"https://app.example.com", "https://*.example.com"}, "no wildcards"},
	} {
		_, _, err := serveListeners(g, true, "127.0.0.1:0", socket, "", gatewayFlags{corsOrigins: c.origins})
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "--cors-origin") {
			t.Errorf("--cors-origin %q: %v, want a usage error saying %q", c.origins, err, c.want)
		}
	}
	_, _, err := serveListeners(g, false, "127.0.0.1:0", socket, "", gatewayFlags{corsOrigins: []string{"https://app.example.com"}})
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--gateway") {
		t.Errorf("--cors-origin with --gateway=false: %v, want a usage error", err)
	}
	cfg, err := gatewayFlags{corsOrigins: []string{"HTTPS://App.Example.com:443"}}.config(g, "127.0.0.1:7788", socket)
	if err != nil {
		t.Fatal(err)
	}
	js, err := cfg.JSON()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(js), `"origins":["https://app.example.com"]`) {
		t.Errorf("the gateway's configuration lacks the origin: %s", js)
	}
}

// TestGatewayCORSOriginFlag: `paddock gateway` checks --cors-origin as
// serve does, before it starts anything.
func TestGatewayCORSOriginFlag(t *testing.T) {
	dir := t.TempDir()
	socket := filepath.Join(dir, "hostd.sock") // only its existence is checked first
	if err := os.WriteFile(socket, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := runMCP(t, "--state-dir", dir, "gateway", "--hostd-socket", socket, "--listen", "127.0.0.1:0", "--cors-origin", "https://app.example.com.evil.test/")
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "no path") {
		t.Errorf("gateway --cors-origin with a path: %v, want a usage error", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "gateway")); err == nil {
		t.Error("the gateway made its storage before refusing the flag")
	}
}
