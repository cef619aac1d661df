//go:build linux

package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"paddock.dev/paddock/egress"
	"paddock.dev/paddock/egress/addr"
	"paddock.dev/paddock/egress/ca"
	"paddock.dev/paddock/hostd/api"
	"paddock.dev/paddock/hostd/auth"
	hegress "paddock.dev/paddock/hostd/egress"
	"paddock.dev/paddock/hostd/ledger"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/store"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/hypervisor/image"
	"paddock.dev/paddock/policy"
)

func newServeCmd(g *globals) *cobra.Command {
	var listen, backend, img, policyExt string
	var backendsFlag []string
	var gateway, stopSandboxes bool
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
			log := g.logger()
			if err := os.MkdirAll(g.stateDir, 0o700); err != nil {
				return err
			}
			// One daemon per state dir: a second one would adopt (or
			// mark lost) what the first is running.
			lock, err := os.OpenFile(filepath.Join(g.stateDir, "serve.lock"), os.O_RDWR|os.O_CREATE, 0o600)
			if err != nil {
				return err
			}
			defer lock.Close()
			if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
				return fmt.Errorf("another paddock serve is running on %s (%s is locked): stop it first, or use another --state-dir", g.stateDir, lock.Name())
			}
			hash, fresh, err := adminToken(g.stateDir)
			if err != nil {
				return err
			}
			if fresh != "" {
				fmt.Fprintf(c.ErrOrStderr(), "paddock: admin token (shown once; only its hash is kept): %s\n", fresh)
			}
			tenants, err := loadTenants(tenantsFile, hash)
			if err != nil {
				return err
			}
			if g.diskReserve, err = hypervisor.ParseReserve(diskReserve); err != nil {
				return usageError{fmt.Errorf("--disk-reserve: %w", err)}
			}
			if diskOvercommit < 1 || diskOvercommit > session.MaxDiskOvercommit {
				return usageError{fmt.Errorf("--disk-overcommit %v: a ratio from 1 (none) to %d", diskOvercommit, session.MaxDiskOvercommit)}
			}
			if err := session.CheckEgressLogRetention(egressLogRetention); err != nil {
				return usageError{fmt.Errorf("--egress-log-retention: %w", err)}
			}
			reload := newTenantReloader(tenantsFile, log)
			defer reload.stop()
			st, err := store.Open(filepath.Join(g.stateDir, "paddock.db"))
			if err != nil {
				return err
			}
			defer st.Close()
			led := ledger.New(st)
			b, err := g.backendWith(backend, true)
			if err != nil {
				return err
			}
			if cl, ok := b.(io.Closer); ok {
				defer cl.Close()
			}
			// The other backends a create may name (runtime.backend).
			// One that cannot run here stays listed, so asking for it
			// is refused with its reason rather than "not enabled".
			var others []hypervisor.Backend
			for _, name := range enabledBackends(backend, backendsFlag) {
				ob, err := g.backendWith(name, true)
				if err != nil {
					return err
				}
				if cl, ok := ob.(io.Closer); ok {
					defer cl.Close()
				}
				if c := ob.Capabilities(); !c.Available {
					log.Info("backend not available on this host", "backend", name, "reason", c.Reason)
				}
				others = append(others, ob)
			}
			cidrs, err := addr.ParseCIDRs(allowCIDRs)
			if err != nil {
				return usageError{fmt.Errorf("--egress-allow-cidr: %w", err)}
			}
			// Every decision about a command, an approval or a proxied
			// request is made by OPA from the built-in Rego modules and
			// the operator's (--policy-ext, reloaded when they change).
			if policyExtKey != "" && policyExt == "" {
				return usageError{errors.New("--policy-ext-key checks the bundle --policy-ext names: give both")}
			}
			extKey, err := bundleKey(policyExtKey)
			if err != nil {
				return err
			}
			eng, err := policy.New(policy.Options{ExtDir: policyExt, BundleKey: extKey, Logger: log})
			if err != nil {
				return fmt.Errorf("policy: %w", err)
			}
			go func() {
				if err := eng.Watch(c.Context()); err != nil {
					log.Error("policy: watching the operator's modules failed; they are not reloaded", "dir", policyExt, "err", err)
				}
			}()
			switch egressLink {
			case "auto", "veth", "loopback":
			default:
				return usageError{fmt.Errorf("--egress-link %q: use auto, veth or loopback", egressLink)}
			}
			ecfg := hegress.Config{AllowCIDRs: cidrs, Logger: log, Links: egressLink != "loopback"}
			ecfg.GrantApplies = func(sandbox string, gr egress.Grant, r egress.Request) bool {
				ok, _, err := eng.GrantApplies(context.Background(), policy.GrantInput{Session: sandbox, Grant: gr.ID,
					Hosts: gr.Hosts, Methods: gr.Methods, Paths: gr.Paths,
					Scheme: r.Scheme, Host: r.Host, Port: r.Port, Method: r.Method, Path: r.Path})
				if err != nil {
					log.Warn("policy: a grant matches nothing", "sandbox", sandbox, "grant", gr.ID, "err", err)
				}
				return ok && err == nil
			}
			if resolverAddr != "" {
				if _, err := netip.ParseAddrPort(resolverAddr); err != nil {
					return usageError{fmt.Errorf("--egress-resolver %q: want IP:PORT", resolverAddr)}
				}
				ecfg.Resolver = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
					var d net.Dialer
					return d.DialContext(ctx, network, resolverAddr)
				}}
			}
			// The daemon's own CA, for TLS interception of hosts with
			// method or path rules; sandboxes trust it.
			authority, err := ca.LoadOrCreate(filepath.Join(g.stateDir, "egress-ca"))
			if err != nil {
				return fmt.Errorf("egress CA: %w", err)
			}
			ecfg.CA = authority
			// The proxy asks the session manager for a sandbox's
			// credential grants; the manager is made after the egress
			// host, so the closure reads it once it is set.
			var mgr *session.Manager
			ecfg.Grants = func(sandbox string) []egress.Grant {
				if mgr == nil {
					return nil
				}
				return mgr.GrantsFor(sandbox)
			}
			eg := hegress.New(ecfg)
			defer eg.Shutdown()
			if ecfg.Links {
				if err := eg.Links(); err != nil {
					if egressLink == "veth" {
						return fmt.Errorf("--egress-link veth: %w", err)
					}
					log.Info("egress: sandboxes reach the proxy through their loopback redirect", "reason", err.Error())
				} else {
					for _, be := range append([]hypervisor.Backend{b}, others...) {
						if na, ok := be.(hypervisor.NetAttacher); ok {
							na.SetNetAttach(eg.AttachLink)
						}
					}
					log.Info("egress: sandboxes reach the proxy through veth links")
				}
			}
			trust, err := readCAs(sandboxCAs)
			if err != nil {
				return usageError{err}
			}
			trust = append(eg.TrustPEM(), trust...)
			mgr = session.New(session.Config{Store: st, Ledger: led, Backend: b, Backends: others, DefaultImage: img, ImagesDir: g.imagesDir(), Logger: log,
				Egress: eg, EgressRoot: filepath.Join(g.stateDir, "egress"), TrustPEM: trust, Policy: eng, EgressLogRetention: egressLogRetention})
			defer func() {
				if stopSandboxes {
					mgr.Shutdown(context.Background())
				} else {
					reportLeftRunning(c.ErrOrStderr(), log, g.stateDir, mgr.Detach(context.Background()))
				}
			}()
			if err := applyTestHooks(mgr, log); err != nil {
				return err
			}
			// The addresses first: a daemon that cannot serve must not
			// touch the sandboxes.
			if socket == "" {
				socket = hostdSocketPath(g.stateDir)
			}
			lns, gwcfg, err := serveListeners(g, gateway, listen, socket, socketGroup, gwf)
			if err != nil {
				return err
			}
			mgr.Reattach(c.Context())
			go mgr.RunSweeper(c.Context())
			handler := api.New(mgr, hash, log)
			handler.SetPolicy(eng)
			handler.Verifier().SetTenants(tenants) // checked by loadTenants
			// What a create, fork, restore or checkpoint may take: the
			// tenants file's limits as they are at the time (SIGHUP
			// applies new ones to what comes next).
			if err := mgr.SetAdmission(session.AdmissionConfig{DiskOvercommit: diskOvercommit, TenantLimits: func(t string) auth.Limits {
				return handler.Verifier().Tenants().LimitsOf(t)
			}}); err != nil {
				return usageError{err}
			}
			logCapacity(log, append([]hypervisor.Backend{b}, others...), diskOvercommit)
			// A tenant taken out loses its tokens at once (the verifier)
			// and the terminals it opened.
			reload.start(c.Context(), handler.Verifier(), func(t *auth.Tenants) {
				names := t.Names()
				if n := mgr.CloseTerminalsOfTenants(func(tenant string) bool { return slices.Contains(names, tenant) }); n > 0 {
					log.Info("SIGHUP: closed the terminals of tenants no longer in the file", "terminals", n)
				}
			})
			srv := &http.Server{Handler: handler.WithPreviews(gwf.domain), ReadHeaderTimeout: 10 * time.Second}
			errc := make(chan error, len(lns))
			for _, ln := range lns {
				go func() { errc <- srv.Serve(ln) }()
			}
			stopGateway := func() {}
			if gateway {
				gw, err := startGateway(gwcfg)
				if err != nil {
					srv.Close()
					return err
				}
				stopGateway = func() { gw.Stop() }
				printTrust(c.ErrOrStderr(), gwf, gw, listen)
			}
			log.Info("paddock serving", "listen", listen, "gateway", gateway, "socket", socket, "state_dir", g.stateDir, "backend", backend, "tenants", tenants.Len())
			select {
			case err := <-errc:
				stopGateway()
				return err
			case <-c.Context().Done():
			}
			log.Info("shutting down")
			stopGateway()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			return srv.Shutdown(ctx)
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
	c.Flags().BoolVar(&stopSandboxes, "stop-sandboxes", false, "stop every sandbox on exit instead of leaving them for the next start to adopt")
	c.Flags().StringVar(&img, "image", image.DefaultName, "default image for new sessions (the built-in one, mini, is built on first use)")
	c.Flags().StringVar(&policyExtKey, "policy-ext-key", "", "a PEM public key (RSA, ECDSA P-256/P-384): --policy-ext must then be an OPA bundle signed with its private half (opa build --signing-key); a directory, an unsigned or altered bundle is refused")
	c.Flags().StringVar(&policyExt, "policy-ext", "", "the operator's Rego modules (a directory of .rego files or an OPA bundle .tar.gz) that narrow the built-in policy; reloaded when they change")
	c.Flags().DurationVar(&egressLogRetention, "egress-log-retention", session.DefaultEgressLogRetention, "how long the egress log keeps sandboxes' network decisions (from 1h to 87600h); older rows are pruned, the ledger's entries and summaries stay")
	c.Flags().StringVar(&tenantsFile, "tenants", os.Getenv("PADDOCK_TENANTS"), "tenants file (paddock tenant add), read again on SIGHUP; env PADDOCK_TENANTS")
	c.Flags().StringVar(&g.storeSize, "store-size", "", "size of procbox's btrfs layer store image when it is made (e.g. 200GiB; default half the state dir's free space, 2 GiB to 1 TiB); an existing image keeps its size")
	c.Flags().StringVar(&diskReserve, "disk-reserve", "", "disk each backend keeps for the daemon's own writes, never given to sandboxes: a percentage (5%) or a size (1GiB) (default 5%, at least 512 MiB, at most half)")
	c.Flags().Float64Var(&diskOvercommit, "disk-overcommit", 1, "let the disk_mb of the sandboxes on a backend add up to this many times what its disk holds less the reserve (1: no overcommit; a sandbox may then meet a full disk before its own limit)")
	return c
}

// logCapacity logs what each backend's sandboxes can be given (or why it
// cannot be measured yet).
func logCapacity(log *slog.Logger, backends []hypervisor.Backend, overcommit float64) {
	for _, b := range backends {
		cr, ok := b.(hypervisor.CapacityReporter)
		if !ok || !b.Capabilities().Available {
			continue
		}
		c, err := cr.Capacity()
		if err != nil {
			log.Warn("backend capacity", "backend", b.Name(), "err", err)
			continue
		}
		log.Info("backend capacity", "backend", b.Name(), "disk", c.Disk, "disk_mib", c.DiskBytes>>20, "reserve_mib", c.DiskReserveBytes>>20,
			"disk_overcommit", overcommit, "memory_mib", c.MemoryMB, "cpus", c.CPUs)
	}
}

// adminToken returns the admin token's hash: from PADDOCK_ADMIN_TOKEN, or
// the hash kept in the state dir, or a new token (returned once as fresh).
func adminToken(stateDir string) (hash [32]byte, fresh string, err error) {
	if t := os.Getenv("PADDOCK_ADMIN_TOKEN"); t != "" {
		if len(t) < 16 {
			return hash, "", usageError{errors.New("PADDOCK_ADMIN_TOKEN must be at least 16 characters")}
		}
		return sha256.Sum256([]byte(t)), "", nil
	}
	path := filepath.Join(stateDir, "admin-token.sha256")
	if b, err := os.ReadFile(path); err == nil {
		raw, err := hex.DecodeString(strings.TrimSpace(string(b)))
		if err != nil || len(raw) != 32 {
			return hash, "", fmt.Errorf("%s is corrupt: remove it to generate a new token", path)
		}
		copy(hash[:], raw)
		return hash, "", nil
	}
	var b [24]byte
	rand.Read(b[:])
	fresh = "pdk_" + hex.EncodeToString(b[:])
	hash = sha256.Sum256([]byte(fresh))
	if err := os.WriteFile(path, []byte(hex.EncodeToString(hash[:])+"\n"), 0o600); err != nil {
		return hash, "", err
	}
	return hash, fresh, nil
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
