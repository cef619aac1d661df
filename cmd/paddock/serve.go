//go:build linux

package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"paddock.dev/paddock/egress/addr"
	"paddock.dev/paddock/gateway"
	"paddock.dev/paddock/hostd/daemon"
	hegress "paddock.dev/paddock/hostd/egress"
	"paddock.dev/paddock/hostd/egresslog"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/hypervisor/image"
	"paddock.dev/paddock/policy"
)

func newServeCmd(g *globals) *cobra.Command {
	var listen, backend, img, policyExt string
	var backendsFlag []string
	var gateway, stopSandboxes, mcpAllowWrite bool
	var allowCIDRs []string
	var resolverAddr, egressLink, policyExtKey string
	var sandboxCAs []string
	var tenantsFile string
	var egressLogRetention time.Duration
	var diskReserve string
	var diskOvercommit float64
	var socket, socketGroup string
	var gwf gatewayFlags
	c := &cobra.Command{
		Use:   "serve",
		Short: "Run the Paddock daemon (the sessions API)",
		Long: `Run the daemon. Every API route needs a bearer token. The admin token is
PADDOCK_ADMIN_TOKEN, or one generated on first start, printed once and
kept only as its SHA-256 in the state dir.

The API is served on a unix socket (--socket, root's alone) and reached
through the gateway, Caddy run in the same process: HTTPS on --listen with
certificates from Caddy's internal CA (its root is printed on start; the
CLI on this machine trusts it by itself, others through PADDOCK_CA), or
from Let's Encrypt with a real --domain. --gateway=false serves the API
in plain HTTP on --listen instead, with no TLS: for development only, or
with --listen '' (the socket alone) behind a separate ` + "`paddock gateway`" + `.
docs/gateway.md has the limits, the timeouts and what is logged.

On SIGTERM or SIGINT the daemon finishes the requests in flight and exits,
leaving the sandboxes running: the next start on the same state dir adopts
them (a sandbox that died meanwhile is reported with state "lost").
--stop-sandboxes stops them instead. On exit the daemon names what it left
running; ` + "`paddock sandbox orphans --stop`" + ` finds and stops sandboxes
whose state dir was removed after that.

--tenants FILE gives tenants their own tokens (see paddock tenant): a
tenant token sees and creates only that tenant's sessions and sandboxes.
The file is read again on SIGHUP; one that does not read or check is
refused (logged) and the tenants in use stay. Session tokens, minted for
one session and some operations, need no configuration.

Every create, fork, restore and checkpoint is admitted first: memory_mb
and cpus no more than the host has, each tenant's sums within its limits
in the tenants file, and the disk promised to the sandboxes on a backend
within its disk less --disk-reserve (times --disk-overcommit). What does
not fit is refused with a code and the numbers (docs/tenants.md).`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, gwcfg, err := serveConfig(c, g, serveOpts{
				listen: listen, backend: backend, img: img, policyExt: policyExt, policyExtKey: policyExtKey, backends: backendsFlag,
				gateway: gateway, stopSandboxes: stopSandboxes, mcpAllowWrite: mcpAllowWrite, allowCIDRs: allowCIDRs, resolverAddr: resolverAddr, egressLink: egressLink,
				sandboxCAs: sandboxCAs, tenantsFile: tenantsFile, egressLogRetention: egressLogRetention, diskReserve: diskReserve,
				diskOvercommit: diskOvercommit, socket: socket, socketGroup: socketGroup, gw: gwf,
			})
			if err != nil {
				return err
			}
			log := cfg.Logger
			// Listening for SIGHUP from the start: unhandled, it would end
			// the process.
			reload := newTenantReloader(log)
			defer reload.stop()
			d, err := daemon.New(cfg)
			if errors.Is(err, daemon.ErrConfig) {
				return usageError{err}
			}
			if err != nil {
				return err
			}
			defer d.Close()
			reload.start(c.Context(), d)
			runCtx, stopRun := context.WithCancel(context.Background())
			defer stopRun()
			errc := make(chan error, 1)
			go func() { errc <- d.Run(runCtx) }()
			// The gateway is started beside the daemon, in front of its
			// socket, as `paddock gateway` would be from another process,
			// once the daemon serves.
			select {
			case err := <-errc:
				return err
			case <-c.Context().Done(): // while adopting
				stopRun()
				return <-errc
			case <-d.Serving():
			}
			stopGateway := func() {}
			if gateway {
				gw, err := startGateway(*gwcfg)
				if err != nil {
					stopRun()
					<-errc
					return err
				}
				stopGateway = func() { gw.Stop() }
				printTrust(c.ErrOrStderr(), gwf, gw, listen)
			}
			if socket == "" {
				socket = hostdSocketPath(g.stateDir)
			}
			log.Info("paddock serving", "listen", listen, "gateway", gateway, "socket", socket, "state_dir", g.stateDir, "backend", backend, "tenants", d.Tenants())
			select {
			case err := <-errc:
				stopGateway()
				return err
			case <-c.Context().Done():
			}
			log.Info("shutting down")
			stopGateway()
			stopRun()
			return <-errc
		},
	}
	c.Flags().StringVar(&listen, "listen", "127.0.0.1:7788", "address to serve on: the gateway's HTTPS, or with --gateway=false plain HTTP ('' for the socket alone)")
	c.Flags().BoolVar(&gateway, "gateway", true, "serve through the Caddy gateway (HTTPS); false serves plain HTTP on --listen, with no TLS (development, or a separate paddock gateway)")
	c.Flags().StringVar(&socket, "socket", "", "unix socket of the API, which the gateway proxies to (default <state-dir>/hostd.sock)")
	c.Flags().StringVar(&socketGroup, "socket-group", "", "make the socket 0660 for this group, for a paddock gateway running as another user (default: 0600, root only)")
	gwf.add(c.Flags())
	c.Flags().StringVar(&backend, "backend", "procbox", "default sandbox backend (paddock backends lists them)")
	c.Flags().StringSliceVar(&backendsFlag, "backends", nil, "the backends a session may ask for in runtime.backend, besides the default (default: every one built in; 'none' for the default alone)")
	c.Flags().StringArrayVar(&allowCIDRs, "egress-allow-cidr", nil, "a private range sandboxes may reach, e.g. an on-premises service (repeatable; never loopback or metadata)")
	c.Flags().StringVar(&egressLink, "egress-link", "auto", "how sandboxes' programs that ignore proxy settings reach the proxy: veth (a veth pair to the daemon's egress namespace, whose nftables redirect TCP 80/443 to the proxy and refuse the rest), loopback (nftables inside the sandbox redirect to its agent), or auto (veth when the kernel can make one)")
	c.Flags().StringVar(&resolverAddr, "egress-resolver", "", "DNS server (IP:PORT) that resolves the names sandboxes may reach (default: the host's resolver)")
	c.Flags().StringArrayVar(&sandboxCAs, "sandbox-ca", nil, "a PEM file of CA certificates every sandbox trusts besides its image's (repeatable), e.g. a company CA")
	c.Flags().BoolVar(&mcpAllowWrite, "mcp-allow-write", false, "offer the MCP server's write tools at /mcp (create, exec, write files, fork, promote, delete, …); without it /mcp offers the tools that read only")
	c.Flags().BoolVar(&stopSandboxes, "stop-sandboxes", false, "stop every sandbox on exit instead of leaving them for the next start to adopt")
	c.Flags().StringVar(&img, "image", image.DefaultName, "default image for new sessions (the built-in one, mini, is built on first use)")
	c.Flags().StringVar(&policyExtKey, "policy-ext-key", "", "a PEM public key (RSA, ECDSA P-256/P-384): --policy-ext must then be an OPA bundle signed with its private half (opa build --signing-key); a directory, an unsigned or altered bundle is refused")
	c.Flags().StringVar(&policyExt, "policy-ext", "", "the operator's Rego modules (a directory of .rego files or an OPA bundle .tar.gz) that narrow the built-in policy; reloaded when they change")
	c.Flags().DurationVar(&egressLogRetention, "egress-log-retention", egresslog.DefaultRetention, "how long the egress log keeps sandboxes' network decisions (from 1h to 87600h); older rows are pruned, the ledger's entries and summaries stay")
	c.Flags().StringVar(&tenantsFile, "tenants", os.Getenv("PADDOCK_TENANTS"), "tenants file (paddock tenant add), read again on SIGHUP; env PADDOCK_TENANTS")
	c.Flags().StringVar(&g.storeSize, "store-size", "", "size of procbox's btrfs layer store image when it is made (e.g. 200GiB; default half the state dir's free space, 2 GiB to 1 TiB); an existing image keeps its size")
	c.Flags().StringVar(&diskReserve, "disk-reserve", "", "disk each backend keeps for the daemon's own writes, never given to sandboxes: a percentage (5%) or a size (1GiB) (default 5%, at least 512 MiB, at most half)")
	c.Flags().Float64Var(&diskOvercommit, "disk-overcommit", 1, "let the disk_mb of the sandboxes on a backend add up to this many times what its disk holds less the reserve (1: no overcommit; a sandbox may then meet a full disk before its own limit)")
	return c
}

// readCAs reads PEM files of CA certificates, refusing anything else.
func readCAs(files []string) ([]byte, error) {
	var out []byte
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("--sandbox-ca: %w", err)
		}
		rest, n := raw, 0
		for {
			var b *pem.Block
			b, rest = pem.Decode(rest)
			if b == nil {
				break
			}
			if b.Type != "CERTIFICATE" {
				return nil, fmt.Errorf("--sandbox-ca %s: a %s block; only certificates belong there", f, b.Type)
			}
			cert, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil, fmt.Errorf("--sandbox-ca %s: %w", f, err)
			}
			if !cert.IsCA {
				return nil, fmt.Errorf("--sandbox-ca %s: %q is not a CA certificate", f, cert.Subject)
			}
			out = append(out, pem.EncodeToMemory(b)...)
			n++
		}
		if n == 0 {
			return nil, fmt.Errorf("--sandbox-ca %s: no PEM certificate in it", f)
		}
	}
	if len(out) > hypervisor.MaxTrustPEM {
		return nil, fmt.Errorf("--sandbox-ca: %d bytes of certificates, at most %d", len(out), hypervisor.MaxTrustPEM)
	}
	return out, nil
}

// enabledBackends is the backends besides def that sessions may ask for:
// the --backends list, or every registered one; "none" means none.
func enabledBackends(def string, list []string) []string {
	if len(list) == 1 && list[0] == "none" {
		return nil
	}
	if len(list) == 0 {
		list = hypervisor.List()
	}
	var out []string
	seen := map[string]bool{def: true}
	for _, n := range list {
		if n = strings.TrimSpace(n); n != "" && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// serveOpts are serve's flags.
type serveOpts struct {
	listen, backend, img, policyExt, policyExtKey string
	backends                                      []string
	gateway, stopSandboxes, mcpAllowWrite         bool
	allowCIDRs, sandboxCAs                        []string
	resolverAddr, egressLink, tenantsFile         string
	egressLogRetention                            time.Duration
	diskReserve                                   string
	diskOvercommit                                float64
	socket, socketGroup                           string
	gw                                            gatewayFlags
}

// serveConfig turns serve's flags into the daemon's Config (and the
// gateway's, when it runs beside the daemon). A flag that does not parse
// is a usage error.
func serveConfig(c *cobra.Command, g *globals, o serveOpts) (daemon.Config, *gateway.Config, error) {
	log := g.logger()
	gwcfg := new(gateway.Config) // set when the daemon opens its listeners
	var err error
	if g.diskReserve, err = hypervisor.ParseReserve(o.diskReserve); err != nil {
		return daemon.Config{}, gwcfg, usageError{fmt.Errorf("--disk-reserve: %w", err)}
	}
	if err := egresslog.CheckRetention(o.egressLogRetention); err != nil {
		return daemon.Config{}, gwcfg, usageError{fmt.Errorf("--egress-log-retention: %w", err)}
	}
	cidrs, err := addr.ParseCIDRs(o.allowCIDRs)
	if err != nil {
		return daemon.Config{}, gwcfg, usageError{fmt.Errorf("--egress-allow-cidr: %w", err)}
	}
	// Every decision about a command, an approval or a proxied request is
	// made by OPA from the built-in Rego modules and the operator's
	// (--policy-ext, reloaded when they change).
	if o.policyExtKey != "" && o.policyExt == "" {
		return daemon.Config{}, gwcfg, usageError{errors.New("--policy-ext-key checks the bundle --policy-ext names: give both")}
	}
	extKey, err := bundleKey(o.policyExtKey)
	if err != nil {
		return daemon.Config{}, gwcfg, err
	}
	eg := &daemon.EgressConfig{Config: hegress.Config{AllowCIDRs: cidrs}, CADir: filepath.Join(g.stateDir, "egress-ca")}
	switch o.egressLink {
	case "auto":
		eg.Links = true
	case "veth":
		eg.Links, eg.RequireLinks = true, true
	case "loopback":
	default:
		return daemon.Config{}, gwcfg, usageError{fmt.Errorf("--egress-link %q: use auto, veth or loopback", o.egressLink)}
	}
	if o.resolverAddr != "" {
		if _, err := netip.ParseAddrPort(o.resolverAddr); err != nil {
			return daemon.Config{}, gwcfg, usageError{fmt.Errorf("--egress-resolver %q: want IP:PORT", o.resolverAddr)}
		}
		eg.Resolver = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, o.resolverAddr)
		}}
	}
	trust, err := readCAs(o.sandboxCAs)
	if err != nil {
		return daemon.Config{}, gwcfg, usageError{err}
	}
	hooks, err := testHooks(log)
	if err != nil {
		return daemon.Config{}, gwcfg, err
	}
	socket := o.socket
	if socket == "" {
		socket = hostdSocketPath(g.stateDir)
	}
	errw := c.ErrOrStderr()
	cfg := daemon.Config{
		StateDir: g.stateDir, Logger: log, AdminToken: os.Getenv("PADDOCK_ADMIN_TOKEN"),
		AdminTokenMade: func(tok string) {
			fmt.Fprintf(errw, "paddock: admin token (shown once; only its hash is kept): %s\n", tok)
		},
		// The default backend, then the others a create may name
		// (runtime.backend). One that cannot run here stays listed, so
		// asking for it is refused with its reason rather than "not
		// enabled".
		Backends: func() ([]hypervisor.Backend, error) {
			var out []hypervisor.Backend
			for _, name := range append([]string{o.backend}, enabledBackends(o.backend, o.backends)...) {
				b, err := g.backendWith(name, true)
				if err != nil {
					for _, ob := range out {
						if cl, ok := ob.(io.Closer); ok {
							cl.Close()
						}
					}
					return nil, err
				}
				out = append(out, b)
			}
			return out, nil
		},
		DefaultImage: o.img, ImagesDir: g.imagesDir(),
		Policy: policy.Options{ExtDir: o.policyExt, BundleKey: extKey},
		Egress: eg, TrustPEM: trust, EgressLogRetention: o.egressLogRetention,
		TenantsFile: o.tenantsFile, DiskOvercommit: o.diskOvercommit, PreviewDomain: o.gw.domain, TestHooks: hooks,
		Listeners: func() ([]net.Listener, error) {
			lns, gc, err := serveListeners(g, o.gateway, o.listen, socket, o.socketGroup, o.gw)
			*gwcfg = gc
			return lns, err
		},
		StopSandboxes: o.stopSandboxes,
		// The MCP server at /mcp (docs/mcp.md): read-only unless asked.
		MCPAllowWrite: o.mcpAllowWrite, Version: version,
		LeftRunning: func(left []session.LeftRunning) {
			reportLeftRunning(errw, log, g.stateDir, left)
		},
	}
	if o.diskOvercommit < 1 || o.diskOvercommit > session.MaxDiskOvercommit {
		return cfg, gwcfg, usageError{fmt.Errorf("--disk-overcommit %v: a ratio from 1 (none) to %d", o.diskOvercommit, session.MaxDiskOvercommit)}
	}
	return cfg, gwcfg, nil
}
