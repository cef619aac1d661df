// Package daemon is hostd's composition root: it wires the store, the
// ledger, the policy engine, the egress host, the session manager and the
// API server from one Config, and owns them until Close. `paddock serve`
// turns its flags into a Config; every test harness that needs a daemon
// builds it here too (through hostd/daemon/daemontest), so the tests run
// the wiring the binary runs.
//
// The gateway (Caddy) is not part of it: it is a separate front door that
// can run in another process (`paddock gateway`) in front of the socket
// the daemon serves, so `paddock serve` starts it beside the daemon.
package daemon

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"paddock.dev/paddock/egress/ca"
	"paddock.dev/paddock/hostd/api"
	"paddock.dev/paddock/hostd/approvals"
	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/budgets"
	hegress "paddock.dev/paddock/hostd/egress"
	"paddock.dev/paddock/hostd/egresslog"
	"paddock.dev/paddock/hostd/grants"
	"paddock.dev/paddock/hostd/ledger"
	"paddock.dev/paddock/hostd/previews"
	"paddock.dev/paddock/hostd/promote"
	"paddock.dev/paddock/hostd/replay"
	"paddock.dev/paddock/hostd/rewind"
	"paddock.dev/paddock/hostd/sandboxes"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/speculate"
	"paddock.dev/paddock/hostd/store"
	"paddock.dev/paddock/hostd/terminals"
	"paddock.dev/paddock/hostd/tokens"
	"paddock.dev/paddock/hostd/workspace"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/mcp"
	"paddock.dev/paddock/policy"
)

// ErrNoTenantsFile is Reload's error when the daemon has no tenants file.
var ErrNoTenantsFile = errors.New("no --tenants file to read again")

// ErrConfig marks a Config that cannot work (a bad value, an unreadable
// tenants file); the caller's fault, not the host's. `paddock serve`
// turns it into its usage exit code.
var ErrConfig = errors.New("daemon configuration")

// configError is an error of the Config: its text is the problem alone
// (it names the flag), and errors.Is finds ErrConfig.
type configError struct{ err error }

func (e configError) Error() string        { return e.err.Error() }
func (e configError) Unwrap() error        { return e.err }
func (e configError) Is(target error) bool { return target == ErrConfig }

func configErr(format string, a ...any) error { return configError{fmt.Errorf(format, a...)} }

// ShutdownTimeout bounds how long Run waits for requests in flight once
// its context ends.
const ShutdownTimeout = 10 * time.Second

// Config is everything a daemon is made of.
type Config struct {
	// StateDir holds the database, the egress CA and sockets, and the
	// backends' state. One daemon per state dir: New locks it.
	StateDir string
	Logger   *slog.Logger
	// AdminToken is the admin token (PADDOCK_ADMIN_TOKEN), at least 16
	// characters. Empty: the token whose SHA-256 is kept in the state
	// dir, or, on a first start, a new one, handed once to
	// AdminTokenMade; only its hash is kept.
	AdminToken     string
	AdminTokenMade func(token string)

	// Backends opens the backends, the default first, the others those a
	// create may name (runtime.backend). New calls it once it holds the
	// state dir's lock, since a backend may adopt what an earlier daemon
	// left running. The daemon closes the ones that are io.Closer. No
	// backend at all is allowed (a daemon that refuses every create).
	Backends func() ([]hypervisor.Backend, error)
	// DefaultImage is the image of sessions that name none; ImagesDir the
	// backends' images directory, where the built-in image is built on
	// first use ("": nothing is built).
	DefaultImage string
	ImagesDir    string

	// Policy configures the policy engine New makes (and Run watches for
	// the operator's modules). PolicyEngine, when set, is used instead
	// and not watched: tests share one compiled engine.
	Policy       policy.Options
	PolicyEngine *policy.Engine

	// Egress, when set, gives sessions with a network policy a way out;
	// nil allows offline policies only.
	Egress *EgressConfig
	// TrustPEM is CA certificates every sandbox trusts besides its
	// image's and the egress CA.
	TrustPEM []byte
	// EgressLogRetention is how long the egress log is kept (0: the
	// default); see egresslog.CheckRetention.
	EgressLogRetention time.Duration

	// TenantsFile is the tenants file ("": no tenants), read by New and
	// again by Reload.
	TenantsFile string
	// DiskOvercommit is admission's disk overcommit ratio (0 means 1).
	DiskOvercommit float64
	// StreamLimits bounds the API's event streams (nil: the defaults).
	StreamLimits *api.StreamLimits
	// MCPAllowWrite offers the MCP server's write tools at /mcp (off: the
	// tools that read only, as paddock mcp serve without --allow-write).
	MCPAllowWrite bool
	// Version is the daemon's version as the MCP server reports it.
	Version string
	// PreviewDomain is the gateway's domain: requests for
	// <token>.preview.<domain> go to the preview proxy ("": none).
	PreviewDomain string
	// TestHooks slow lifecycle operations down (Paddock's own tests).
	TestHooks *session.TestHooks

	// Listeners opens what Run serves the API on. New calls it once it
	// holds the state dir's lock (a socket left by an earlier daemon may
	// be replaced) and before anything touches a sandbox: a daemon that
	// cannot serve must not adopt. Nil: Run serves nothing (tests that
	// use Handler alone).
	Listeners func() ([]net.Listener, error)

	// StopSandboxes makes Close stop every sandbox; by default Close
	// leaves them running for the next daemon on the state dir to adopt,
	// and hands what it left to LeftRunning.
	StopSandboxes bool
	LeftRunning   func([]session.LeftRunning)
}

// EgressConfig is the daemon's egress. The embedded host config's Logger
// defaults to the daemon's; its CA to the one kept in CADir.
type EgressConfig struct {
	hegress.Config
	// RequireLinks makes New fail when Links is set and the kernel cannot
	// make veth links (--egress-link veth); without it the sandboxes fall
	// back to their loopback redirect.
	RequireLinks bool
	// CADir is where the TLS interception CA is loaded from, or made, when
	// Config.CA is nil. Both empty: no interception.
	CADir string
}

// Daemon is a running hostd.
type Daemon struct {
	cfg      Config
	log      *slog.Logger
	lock     *os.File
	st       *store.Store
	led      *ledger.Ledger
	eng      *policy.Engine
	ownEng   bool
	eg       *hegress.Host
	backends []hypervisor.Backend
	mgr      *session.Manager
	appr     *approvals.Service
	grants   *grants.Service
	previews *previews.Service
	rewind   *rewind.Service
	sbx      *sandboxes.Service
	terms    *terminals.Service
	tokens   *tokens.Service
	ws       *workspace.Service
	promote  *promote.Service
	api      *api.Server
	handler  http.Handler
	lns      []net.Listener
	srv      *http.Server
	// self and mcp: the MCP server at /mcp and its pipe back into the API (mcp.go).
	self *selfListener
	mcp  *mcp.HTTPHandler

	stop    context.CancelFunc // ends Run
	stopCtx context.Context

	mu      sync.Mutex
	running bool
	runDone chan struct{}
	serving chan struct{} // closed once Run has adopted and serves

	closeOnce sync.Once
	closeErr  error
}

// New builds a daemon: everything is made and checked, nothing is served
// and no sandbox is touched until Run. On error whatever was made is
// released again.
func New(cfg Config) (d *Daemon, err error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.StateDir == "" {
		return nil, configErr("no state dir")
	}
	if cfg.DiskOvercommit == 0 {
		cfg.DiskOvercommit = 1
	}
	if cfg.DiskOvercommit < 1 || cfg.DiskOvercommit > session.MaxDiskOvercommit {
		return nil, configErr("--disk-overcommit %v: a ratio from 1 (none) to %d", cfg.DiskOvercommit, session.MaxDiskOvercommit)
	}
	if cfg.EgressLogRetention != 0 {
		if err := egresslog.CheckRetention(cfg.EgressLogRetention); err != nil {
			return nil, configErr("--egress-log-retention: %w", err)
		}
	}
	if cfg.StreamLimits != nil {
		if err := cfg.StreamLimits.Check(); err != nil {
			return nil, configErr("stream limits: %w", err)
		}
	}
	if cfg.AdminToken != "" && len(cfg.AdminToken) < 16 {
		return nil, configErr("PADDOCK_ADMIN_TOKEN must be at least 16 characters")
	}
	stopCtx, stop := context.WithCancel(context.Background())
	d = &Daemon{cfg: cfg, log: log, stop: stop, stopCtx: stopCtx, serving: make(chan struct{})}
	defer func() {
		if err != nil {
			d.Close()
			d = nil
		}
	}()
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return d, err
	}
	// One daemon per state dir: a second one would adopt (or mark lost)
	// what the first is running.
	if d.lock, err = os.OpenFile(filepath.Join(cfg.StateDir, "serve.lock"), os.O_RDWR|os.O_CREATE, 0o600); err != nil {
		return d, err
	}
	if err := unix.Flock(int(d.lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return d, fmt.Errorf("another paddock serve is running on %s (%s is locked): stop it first, or use another --state-dir", cfg.StateDir, d.lock.Name())
	}
	hash, fresh, err := adminToken(cfg.StateDir, cfg.AdminToken)
	if err != nil {
		return d, err
	}
	if fresh != "" && cfg.AdminTokenMade != nil {
		cfg.AdminTokenMade(fresh)
	}
	tenants, err := loadTenants(cfg.TenantsFile, hash)
	if err != nil {
		return d, err
	}
	if d.st, err = store.Open(filepath.Join(cfg.StateDir, "paddock.db")); err != nil {
		return d, err
	}
	d.led = ledger.New(d.st)
	if cfg.Backends != nil {
		if d.backends, err = cfg.Backends(); err != nil {
			return d, err
		}
	}
	for _, b := range d.backends[min(1, len(d.backends)):] {
		if c := b.Capabilities(); !c.Available {
			log.Info("backend not available on this host", "backend", b.Name(), "reason", c.Reason)
		}
	}
	// Every decision about a command, an approval or a proxied request is
	// made by OPA from the built-in Rego modules and the operator's.
	if d.eng = cfg.PolicyEngine; d.eng == nil {
		popts := cfg.Policy
		if popts.Logger == nil {
			popts.Logger = log
		}
		if d.eng, err = policy.New(popts); err != nil {
			return d, fmt.Errorf("policy: %w", err)
		}
		d.ownEng = true
	}
	trust := cfg.TrustPEM
	var eg session.Egress
	if cfg.Egress != nil {
		if err := d.newEgress(*cfg.Egress); err != nil {
			return d, err
		}
		eg = d.eg
		trust = append(d.eg.TrustPEM(), trust...)
	}
	var def hypervisor.Backend
	if len(d.backends) > 0 {
		def = d.backends[0]
	}
	var others []hypervisor.Backend
	if len(d.backends) > 1 {
		others = d.backends[1:]
	}
	d.mgr = session.New(session.Config{Store: d.st, Ledger: d.led, Backend: def, Backends: others, DefaultImage: cfg.DefaultImage,
		ImagesDir: cfg.ImagesDir, Logger: log, Egress: eg, EgressRoot: filepath.Join(cfg.StateDir, "egress"), TrustPEM: trust,
		Policy: d.eng})
	// The core's siblings, on the same manager.
	d.appr = approvals.New(d.mgr)
	d.mgr.SetApprovals(d.appr) // the judge and spend steps ask it
	d.mgr.SetBudgets(budgets.New(d.mgr))
	d.grants = grants.New(d.mgr)
	d.previews = previews.New(d.mgr)
	d.sbx = sandboxes.New(d.mgr) // the sweep and adoption hand it expired and adopted sandboxes
	d.terms = terminals.New(d.mgr)
	// Tokens after grants and previews: its stop hook ledgers
	// token.revoke after theirs, as the core did.
	d.tokens = tokens.New(d.mgr)
	d.mgr.SetEgressLog(egresslog.New(d.mgr, cfg.EgressLogRetention)) // where the proxy's decisions go
	d.ws = workspace.New(d.mgr)
	d.rewind = rewind.New(d.mgr) // its command hook takes the points
	d.promote = promote.New(d.mgr)
	if d.eg != nil {
		d.eg.SetGrants(d.grants) // the proxy's credential grants
	}
	if cfg.TestHooks != nil {
		d.mgr.SetTestHooks(*cfg.TestHooks)
	}
	d.api = api.New(d.mgr, hash, log)
	d.api.SetPolicy(d.eng)
	svc := api.Services{Approvals: d.appr, Grants: d.grants, Previews: d.previews, Sandboxes: d.sbx, Terminals: d.terms, Tokens: d.tokens, Workspace: d.ws,
		Promote: d.promote, Replay: replay.New(d.mgr), Rewind: d.rewind,
		Speculate: speculate.New(d.mgr, d.ws)} // its stop hook drops a deleted session's changesets
	if missing := append(d.mgr.Unwired(), svc.Missing()...); len(missing) > 0 {
		// A sibling left out fails closed, but silently turns its
		// feature off: a wiring mistake, not a configuration.
		return d, fmt.Errorf("daemon: the core's siblings are not all wired: %s", strings.Join(missing, ", "))
	}
	d.api.SetServices(svc)
	if err := d.api.Verifier().SetTenants(tenants); err != nil { // checked by loadTenants
		return d, configErr("%w", err)
	}
	if cfg.StreamLimits != nil {
		if err := d.api.SetStreamLimits(*cfg.StreamLimits); err != nil {
			return d, configErr("stream limits: %w", err)
		}
	}
	// What a create, fork, restore or checkpoint may take: the tenants
	// file's limits as they are at the time (Reload applies new ones to
	// what comes next).
	v := d.api.Verifier()
	if err := d.mgr.SetAdmission(session.AdmissionConfig{DiskOvercommit: cfg.DiskOvercommit, TenantLimits: func(t string) auth.Limits {
		return v.Tenants().LimitsOf(t)
	}}); err != nil {
		return d, configErr("%w", err)
	}
	logCapacity(log, d.backends, cfg.DiskOvercommit)
	d.handler = d.previews.Wrap(withConsole(d.withMCP(d.api, cfg.MCPAllowWrite, cfg.Version)), cfg.PreviewDomain)
	// The addresses last: New fails before Run adopts anything.
	if cfg.Listeners != nil {
		if d.lns, err = cfg.Listeners(); err != nil {
			return d, err
		}
	}
	d.srv = &http.Server{Handler: d.handler, ReadHeaderTimeout: 10 * time.Second}
	return d, nil
}

// newEgress makes the egress host: the interception CA, the veth links
// when asked for and possible, the backends told to attach them.
func (d *Daemon) newEgress(c EgressConfig) error {
	hc := c.Config
	if hc.Logger == nil {
		hc.Logger = d.log
	}
	if hc.CA == nil && c.CADir != "" {
		authority, err := ca.LoadOrCreate(c.CADir)
		if err != nil {
			return fmt.Errorf("egress CA: %w", err)
		}
		hc.CA = authority
	}
	d.eg = hegress.New(hc)
	if !hc.Links {
		return nil
	}
	if err := d.eg.Links(); err != nil {
		if c.RequireLinks {
			return fmt.Errorf("--egress-link veth: %w", err)
		}
		d.log.Info("egress: sandboxes reach the proxy through their loopback redirect", "reason", err.Error())
		return nil
	}
	for _, b := range d.backends {
		if na, ok := b.(hypervisor.NetAttacher); ok {
			na.SetNetAttach(d.eg.AttachLink)
		}
	}
	d.log.Info("egress: sandboxes reach the proxy through veth links")
	return nil
}

// Handler is the API (with the preview proxy's host form when the config
// names a preview domain).
func (d *Daemon) Handler() http.Handler { return d.handler }

// Manager, Store, Grants, Previews, Sandboxes, Terminals, Workspace, API, Egress and Policy are the daemon's parts, for
// tests that look into them.
func (d *Daemon) Manager() *session.Manager     { return d.mgr }
func (d *Daemon) Store() *store.Store           { return d.st }
func (d *Daemon) Grants() *grants.Service       { return d.grants }
func (d *Daemon) Previews() *previews.Service   { return d.previews }
func (d *Daemon) Sandboxes() *sandboxes.Service { return d.sbx }
func (d *Daemon) Terminals() *terminals.Service { return d.terms }
func (d *Daemon) Workspace() *workspace.Service { return d.ws }
func (d *Daemon) Ledger() *ledger.Ledger        { return d.led }
func (d *Daemon) API() *api.Server              { return d.api }
func (d *Daemon) Egress() *hegress.Host         { return d.eg }
func (d *Daemon) Policy() *policy.Engine        { return d.eng }

// Addrs are the addresses of the listeners Run serves on.
func (d *Daemon) Addrs() []net.Addr {
	out := make([]net.Addr, len(d.lns))
	for i, l := range d.lns {
		out[i] = l.Addr()
	}
	return out
}

// Run adopts the sandboxes an earlier daemon left running, starts the
// TTL sweeper and the policy watch, and serves the API on the listeners
// until ctx ends (or Close is called, or a listener fails); then it lets
// the requests in flight finish (at most ShutdownTimeout) and returns.
// It runs once.
func (d *Daemon) Run(ctx context.Context) error {
	d.mu.Lock()
	if d.running || d.stopCtx.Err() != nil {
		d.mu.Unlock()
		return errors.New("daemon: Run called twice, or after Close")
	}
	d.running = true
	d.runDone = make(chan struct{})
	d.mu.Unlock()
	defer close(d.runDone)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(d.stopCtx, cancel)
	defer stop()
	var bg sync.WaitGroup
	defer bg.Wait()
	if d.ownEng {
		bg.Go(func() {
			if err := d.eng.Watch(ctx); err != nil {
				d.log.Error("policy: watching the operator's modules failed; they are not reloaded", "dir", d.cfg.Policy.ExtDir, "err", err)
			}
		})
	}
	d.mgr.Reattach(ctx)
	bg.Go(func() { d.mgr.RunSweeper(ctx) })
	lns := append(slices.Clone(d.lns), net.Listener(d.self))
	errc := make(chan error, len(lns))
	for _, ln := range lns {
		go func() { errc <- d.srv.Serve(ln) }()
	}
	close(d.serving)
	var err error
	select {
	case err = <-errc:
		cancel()
	case <-ctx.Done():
	}
	sctx, scancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer scancel()
	if serr := d.srv.Shutdown(sctx); err == nil {
		err = serr
	}
	return err
}

// Serving is closed once Run has adopted the sandboxes left running and
// serves the API (`paddock serve` starts the gateway then).
func (d *Daemon) Serving() <-chan struct{} { return d.serving }

// Reload reads the tenants file again: a file that no longer reads or
// checks is refused (the error says why) and the tenants in use stay. A
// tenant taken out loses its tokens at once and the terminals it opened.
// `paddock serve` calls it on SIGHUP.
func (d *Daemon) Reload() error {
	if d.cfg.TenantsFile == "" {
		return ErrNoTenantsFile
	}
	v := d.api.Verifier()
	t, err := auth.LoadTenants(d.cfg.TenantsFile)
	if err == nil {
		err = v.SetTenants(t)
	}
	if err != nil {
		return err
	}
	d.log.Info("tenants file read again", "path", d.cfg.TenantsFile, "tenants", t.Len())
	names := t.Names()
	if n := d.terms.CloseTerminalsOfTenants(func(tenant string) bool { return slices.Contains(names, tenant) }); n > 0 {
		d.log.Info("closed the terminals of tenants no longer in the tenants file", "terminals", n)
	}
	return nil
}

// Tenants is the number of tenants in force.
func (d *Daemon) Tenants() int { return d.api.Verifier().Tenants().Len() }

// Close ends Run (waiting for it), then stops the sandboxes or leaves
// them running (Config.StopSandboxes), stops the egress, closes the
// backends and the store and lets go of the state dir. What stays behind
// is only the sandboxes it was asked to leave running (and their
// backends' store, which they stand on). It is safe to call more than
// once and from any goroutine; later calls return the first's error.
func (d *Daemon) Close() error {
	d.closeOnce.Do(func() { d.closeErr = d.close() })
	return d.closeErr
}

func (d *Daemon) close() error {
	d.mu.Lock()
	d.stop()
	running, done := d.running, d.runDone
	d.mu.Unlock()
	if running {
		<-done
	} else {
		for _, l := range d.lns {
			l.Close()
		}
		if d.self != nil {
			d.self.Close()
		}
	}
	var errs []error
	if d.mgr != nil {
		if d.cfg.StopSandboxes {
			d.mgr.Shutdown(context.Background())
		} else if left := d.mgr.Detach(context.Background()); d.cfg.LeftRunning != nil {
			d.cfg.LeftRunning(left)
		}
	}
	if d.eg != nil {
		d.eg.Shutdown()
	}
	for _, b := range slices.Backward(d.backends) {
		if c, ok := b.(io.Closer); ok {
			if err := c.Close(); err != nil {
				errs = append(errs, fmt.Errorf("backend %s: %w", b.Name(), err))
			}
		}
	}
	if d.st != nil {
		if err := d.st.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if d.lock != nil {
		d.lock.Close() // the flock goes with the descriptor
	}
	return errors.Join(errs...)
}

// loadTenants reads the tenants file ("" means no tenants) and checks it
// against the admin token's hash, before the daemon touches anything.
func loadTenants(path string, adminHash [32]byte) (*auth.Tenants, error) {
	if path == "" {
		return nil, nil
	}
	t, err := auth.LoadTenants(path)
	if err != nil {
		return nil, configErr("%w", err)
	}
	if err := auth.NewVerifier(adminHash, nil).SetTenants(t); err != nil {
		return nil, configErr("%w", err)
	}
	return t, nil
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

// adminToken returns the admin token's hash: of token when given, else
// the hash kept in the state dir, else of a new token (returned once as
// fresh, its hash written down).
func adminToken(stateDir, token string) (hash [32]byte, fresh string, err error) {
	if token != "" {
		return sha256.Sum256([]byte(token)), "", nil
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
