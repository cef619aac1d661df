// Package gateway runs Paddock's front door: Caddy, embedded as a library,
// with Paddock's modules (gateway/auth, gateway/cors, gateway/limits,
// gateway/preview), in front of hostd's API on a unix socket. `paddock
// serve` runs it in the daemon's process; `paddock gateway` runs it
// alone, so the part facing the network can run without privileges.
//
//	client ──HTTPS──▶ Caddy (this package)
//	                    /preview/…, <token>.preview.<domain>  → paddock_preview ─┐
//	                    /healthz → [paddock_cors]                                ├─▶ reverse_proxy unix/<hostd socket>
//	                    everything else → [paddock_cors] → paddock_limits        │
//	                                      → paddock_auth ────────────────────────┘
//
// ([paddock_cors] only with listed origins.)
//
// The configuration is one of the Caddyfiles in gateway/caddyfile (or the
// operator's own), rendered and adapted to JSON, then loaded. Caddy keeps
// one running configuration per process, so one Gateway runs at a time.
package gateway

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"

	_ "paddock.dev/paddock/gateway/all" // Caddy's and Paddock's modules
	"paddock.dev/paddock/gateway/caddyfile"
)

// Config is one gateway.
type Config struct {
	caddyfile.Options
	// Variant is the shipped Caddyfile to use (default: local, or domain
	// when Domain is set to a name other than localhost).
	Variant caddyfile.Variant
	// CaddyfilePath is the operator's own Caddyfile, used instead of the
	// shipped one (rendered with the same values: see
	// caddyfile.RenderText).
	CaddyfilePath string
}

// variant is the shipped file c uses.
func (c Config) variant() caddyfile.Variant {
	if c.Variant != "" {
		return c.Variant
	}
	if c.Domain != "" && c.Domain != caddyfile.LocalDomain {
		return caddyfile.Domain
	}
	return caddyfile.Local
}

// Caddyfile returns the Caddyfile c runs.
func (c Config) Caddyfile() ([]byte, error) {
	if c.CaddyfilePath == "" {
		return caddyfile.Render(c.variant(), c.Options)
	}
	text, err := os.ReadFile(c.CaddyfilePath)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	return caddyfile.RenderText(c.CaddyfilePath, string(text), c.Options)
}

// JSON returns the Caddy configuration c runs.
func (c Config) JSON() ([]byte, error) {
	text, err := c.Caddyfile()
	if err != nil {
		return nil, err
	}
	return caddyfile.Adapt(text)
}

// RootCertPath is where Caddy keeps its internal CA's root certificate,
// the one clients trust, under the storage dir.
func RootCertPath(storageDir string) string {
	return filepath.Join(storageDir, "pki", "authorities", "local", "root.crt")
}

// Gateway is a running gateway.
type Gateway struct {
	cfg Config
}

var (
	runningMu sync.Mutex
	running   *Gateway
)

// Start loads c into Caddy and returns once it listens. The local
// variant's internal CA is made on first start (its root at
// RootCertPath); nothing is added to the host's trust store.
func Start(c Config) (*Gateway, error) {
	runningMu.Lock()
	defer runningMu.Unlock()
	if running != nil {
		return nil, errors.New("gateway: one is already running in this process")
	}
	cfg, err := c.JSON()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(c.StorageDir, 0o700); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	if err := caddy.Load(cfg, true); err != nil {
		return nil, fmt.Errorf("gateway: starting Caddy: %w", err)
	}
	g := &Gateway{cfg: c}
	if c.CaddyfilePath == "" && c.variant() == caddyfile.Local {
		// The internal CA issues the sites' certificates just after
		// Caddy starts: wait for them, so the first client does not meet
		// a handshake failure. Issuing takes milliseconds on an idle
		// machine; the bound is generous because a loaded one (a CI run
		// beside other work) has been seen to need more than 10 s.
		if err := g.waitCertificate(certificateWait); err != nil {
			caddy.Stop()
			return nil, err
		}
	}
	running = g
	return running, nil
}

// certificateWait bounds how long Start waits for the internal CA's
// first certificates.
const certificateWait = 45 * time.Second

// waitCertificate waits until the gateway completes TLS handshakes for
// its address and localhost, verified against its internal CA's root.
func (g *Gateway) waitCertificate(timeout time.Duration) error {
	host, port, err := net.SplitHostPort(g.cfg.Listen)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	if ip := net.ParseIP(host); host == "" || host == "localhost" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	addr := net.JoinHostPort(host, port)
	var last error
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		pem, err := os.ReadFile(g.RootCertPath())
		if err != nil {
			last = err
			continue
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(pem)
		// Each name's certificate is issued on its own: the host's and,
		// on loopback, localhost's.
		names := []string{host}
		if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
			names = append(names, "localhost")
		}
		last = nil
		for _, name := range names {
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{RootCAs: roots, ServerName: name})
			if err != nil {
				last = err
				break
			}
			conn.Close()
		}
		if last == nil {
			return nil
		}
	}
	return fmt.Errorf("gateway: no certificate from the internal CA after %v: %v", timeout, last)
}

// RootCertPath is where this gateway's internal CA root is (local variant).
func (g *Gateway) RootCertPath() string { return RootCertPath(g.cfg.StorageDir) }

// Stop stops the gateway: its listeners close and requests in flight are
// given Caddy's grace period. Stopping twice is fine.
func (g *Gateway) Stop() error {
	runningMu.Lock()
	defer runningMu.Unlock()
	if running != g {
		return nil
	}
	running = nil
	return caddy.Stop()
}
