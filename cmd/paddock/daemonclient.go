package main

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"paddock.dev/paddock/client"
)

// This file is the CLI's side of talking to a daemon. It builds on every
// OS the CLI does: it never imports the gateway (Caddy) or the daemon.

// gatewayRootCert is where the gateway started by `paddock serve` on
// stateDir keeps its internal CA's root (gateway.RootCertPath of
// <state-dir>/gateway; a test holds the two together).
func gatewayRootCert(stateDir string) string {
	return filepath.Join(stateDir, "gateway", "pki", "authorities", "local", "root.crt")
}

// daemonClient is the SDK client for the CLI's daemon verbs. An https
// daemon is trusted through PADDOCK_CA (a PEM file) when it is set; else,
// for a daemon on this machine, through the gateway root in the state dir
// when this user can read it; else through the system's roots.
func daemonClient(g *globals, base, token string) (*client.Client, error) {
	roots, err := daemonRoots(g, base)
	if err != nil {
		return nil, err
	}
	if roots == nil {
		return client.New(base, token), nil
	}
	return client.New(base, token, client.WithRootCAs(roots)), nil
}

func daemonRoots(g *globals, base string) (*x509.CertPool, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageError{fmt.Errorf("--url %q: want https://HOST:PORT (or http:// for a daemon run with --gateway=false)", base)}
	}
	if u.Scheme != "https" {
		return nil, nil
	}
	if ca := os.Getenv("PADDOCK_CA"); ca != "" {
		roots, err := client.TrustPEM(ca)
		if err != nil {
			return nil, usageError{fmt.Errorf("PADDOCK_CA: %w", err)}
		}
		return roots, nil
	}
	if !isLoopbackHost(u.Hostname()) {
		return nil, nil
	}
	roots, err := client.TrustPEM(gatewayRootCert(g.stateDir))
	if err != nil {
		return nil, nil // not readable here: the system's roots, and the hint if they fail
	}
	return roots, nil
}

func isLoopbackHost(h string) bool {
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// trustHint explains an HTTPS failure of the CLI that is the daemon's
// certificate not being trusted.
func trustHint(err error, stateDir string) string {
	var ua x509.UnknownAuthorityError
	if !errors.As(err, &ua) {
		return ""
	}
	return fmt.Sprintf("the daemon's certificate is signed by a CA this machine does not trust. For a daemon run with its internal CA, "+
		"set PADDOCK_CA to a copy of its root (as root: cat %s)", gatewayRootCert(stateDir))
}

// rootStateDir is the --state-dir the command line gave (for hints).
func rootStateDir(root *cobra.Command) string {
	if f := root.PersistentFlags().Lookup("state-dir"); f != nil {
		return f.Value.String()
	}
	return ""
}
