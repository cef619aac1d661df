//go:build !linux

package main

import "github.com/spf13/cobra"

// The daemon, the gateway, image builds and one-off sandboxes run only on
// Linux (namespaces, cgroups, nftables, KVM). On another OS the CLI keeps
// their names, so `paddock help` shows them and calling one says where it
// runs instead of "unknown command".

func newServeCmd(*globals) *cobra.Command {
	return linuxOnly("serve", "Run the daemon (Linux only)")
}

func newGatewayCmd(*globals) *cobra.Command {
	return linuxOnly("gateway", "Run the gateway in front of a daemon's socket (Linux only)")
}

func newImageCmd(*globals) *cobra.Command {
	return linuxOnly("image", "Build and manage sandbox images (Linux only)")
}

func newSandboxCmd(*globals) *cobra.Command {
	return linuxOnly("sandbox", "Run commands in a one-off sandbox (Linux only)")
}

func newBackendsCmd(*globals) *cobra.Command {
	return linuxOnly("backends", "List the backends this host can run (Linux only)")
}
