package main

import (
	"path/filepath"
	"testing"

	"paddock.dev/paddock/gateway"
)

// TestGatewayRootCert holds the CLI's copy of where the gateway keeps its
// root (the CLI does not import the gateway, so that it builds without
// Caddy) to the gateway's own.
func TestGatewayRootCert(t *testing.T) {
	dir := t.TempDir()
	if got, want := gatewayRootCert(dir), gateway.RootCertPath(filepath.Join(dir, "gateway")); got != want {
		t.Fatalf("gatewayRootCert = %s, the gateway keeps it at %s", got, want)
	}
}
