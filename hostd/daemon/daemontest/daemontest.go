// Package daemontest builds a daemon for tests and benchmarks: the one
// composition root (hostd/daemon) with test defaults, served over HTTP on
// loopback (and on a unix socket when asked), an admin token and an SDK
// client. Every harness that needs a daemon uses it, so the tests run the
// wiring `paddock serve` runs.
//
// By default the daemon runs procbox sandboxes of the mini image (root
// needed: New skips the test otherwise) with the built-in policy, no
// egress and no tenants, and stops every sandbox when the test ends.
// Options change each part; WithBackends takes any backend, such as the
// fake one (hypervisor/fake), which needs no root.
package daemontest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"

	"paddock.dev/paddock/client"
	"paddock.dev/paddock/hostd/api"
	"paddock.dev/paddock/hostd/daemon"
	hegress "paddock.dev/paddock/hostd/egress"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/hypervisor/procbox"
	"paddock.dev/paddock/internal/testutil"
	"paddock.dev/paddock/policy"
)

// NoImage is the default image of a daemon given its backends
// (WithBackends) and no WithImage.
const NoImage = "none"

// Token is the admin token of a daemon made without WithToken.
const Token = "pdk_test_token_0123456789"

// Daemon is a running test daemon.
type Daemon struct {
	*daemon.Daemon
	StateDir string
	Token    string // the admin token
	URL      string // http://127.0.0.1:PORT, the API in plain HTTP
	Socket   string // the API's unix socket (WithSocket), else ""
	Client   *client.Client

	unwrapped hypervisor.Backend // the default backend under WrapBackend's wrappers
}

// Close closes the daemon (see daemon.Daemon.Close), then the default
// backend under WrapBackend's wrappers. It is idempotent.
func (d *Daemon) Close() error {
	err := d.Daemon.Close()
	if d.unwrapped != nil {
		closeAll([]hypervisor.Backend{d.unwrapped})
	}
	return err
}

// Option changes one part of the test daemon.
type Option func(*options)

type options struct {
	stateDir      string
	token         string
	backendNames  []string
	openBackends  func(stateDir string) ([]hypervisor.Backend, error)
	noBackend     bool
	wrap          []func(hypervisor.Backend) hypervisor.Backend
	image, images string
	engine        *policy.Engine
	policyOpts    policy.Options
	tenantsFile   string
	egress        *daemon.EgressConfig
	trust         []byte
	log           *slog.Logger
	socket        bool
	keep          bool
	previewDomain string
	mcpAllowWrite bool
	streamLimits  *api.StreamLimits
	guest         string
	socketPath    string
	noRun         bool
}

// WithBackend runs the daemon on the named registered backends, the
// default first, each opened on the state dir with the test guest. A
// backend that cannot run here skips the test with its reason.
func WithBackend(names ...string) Option { return func(o *options) { o.backendNames = names } }

// WithBackends opens the daemon's backends, the default first (any
// hypervisor.Backend: a fake one needs neither root nor images). The
// daemon closes those that are io.Closer. Without WithImage the daemon
// has no images directory, so it builds no image on first use, and its
// default image is NoImage, a name only (the fake has no images).
func WithBackends(open func(stateDir string) ([]hypervisor.Backend, error)) Option {
	return func(o *options) { o.openBackends = open }
}

// WithoutBackend makes a daemon with no backend: every create is refused,
// the rest of the API (identities, access, the gateway's view) works.
func WithoutBackend() Option { return func(o *options) { o.noBackend = true } }

// WrapBackend wraps the default backend (a test that needs it to fail on
// purpose).
func WrapBackend(w func(hypervisor.Backend) hypervisor.Backend) Option {
	return func(o *options) { o.wrap = append(o.wrap, w) }
}

// WithGuest is the guest binary for backends opened by name (default:
// testutil.GuestBinary).
func WithGuest(path string) Option { return func(o *options) { o.guest = path } }

// WithImage is the default image and the images directory it is in
// (default: the cached mini image).
func WithImage(name, imagesDir string) Option {
	return func(o *options) { o.image, o.images = name, imagesDir }
}

// WithPolicy decides with eng (tests share a compiled engine); the
// daemon neither owns nor watches it.
func WithPolicy(eng *policy.Engine) Option { return func(o *options) { o.engine = eng } }

// WithPolicyOptions has the daemon make its engine with opts (an
// operator's modules), as --policy-ext does.
func WithPolicyOptions(opts policy.Options) Option { return func(o *options) { o.policyOpts = opts } }

// WithTenants gives the daemon a tenants file (--tenants).
func WithTenants(path string) Option { return func(o *options) { o.tenantsFile = path } }

// WithEgress gives sessions with a network policy a way out through an
// egress host made from cfg: with Links set, veth links when the kernel
// can make them (--egress-link auto), else the loopback redirect. The
// interception CA is cfg.CA (none: TLS to hosts with method or path rules
// is refused), and the proxy's grants are the session manager's.
func WithEgress(cfg hegress.Config) Option {
	return func(o *options) { o.egress = &daemon.EgressConfig{Config: cfg} }
}

// WithTrust adds CA certificates every sandbox trusts (--sandbox-ca).
func WithTrust(pem []byte) Option { return func(o *options) { o.trust = pem } }

// WithLogger is the daemon's logger (default: discarded).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithSocket serves the API on a unix socket too (Daemon.Socket), for a
// gateway in front of it.
func WithSocket() Option { return func(o *options) { o.socket = true } }

// WithToken is the admin token (default Token).
func WithToken(tok string) Option { return func(o *options) { o.token = tok } }

// WithStateDir runs the daemon on dir (a restart test runs a second
// daemon where the first ran); default a fresh temporary directory.
func WithStateDir(dir string) Option { return func(o *options) { o.stateDir = dir } }

// KeepSandboxes makes Close leave the sandboxes running for the next
// daemon on the state dir to adopt, as `paddock serve` does without
// --stop-sandboxes; by default Close stops them.
func KeepSandboxes() Option { return func(o *options) { o.keep = true } }

// WithoutRun builds the daemon without running it: nothing is served
// (URL and Client are empty), nothing adopted and no sweeper runs; the
// test drives the manager itself (a restart test calls Reattach).
func WithoutRun() Option { return func(o *options) { o.noRun = true } }

// WithPreviewDomain serves preview URLs' host form for domain.
func WithPreviewDomain(domain string) Option { return func(o *options) { o.previewDomain = domain } }

// WithMCPAllowWrite offers the write tools at /mcp (paddock serve --mcp-allow-write).
func WithMCPAllowWrite() Option { return func(o *options) { o.mcpAllowWrite = true } }

// WithStreamLimits sets the API's stream limits.
func WithStreamLimits(l api.StreamLimits) Option { return func(o *options) { o.streamLimits = &l } }

// New starts a daemon for t and closes it when t ends. It skips t when
// the daemon's backends need root (or a backend cannot run here).
func New(t testing.TB, opts ...Option) *Daemon {
	t.Helper()
	o := options{}
	for _, opt := range opts {
		opt(&o)
	}
	if o.stateDir == "" {
		o.stateDir = t.TempDir()
	}
	if !o.noBackend && o.openBackends == nil {
		testutil.RequiresRoot(t)
		if o.guest == "" {
			o.guest = testutil.GuestBinary(t)
		}
		if o.images == "" {
			o.image, o.images = testutil.MiniImageName, testutil.MiniImages(t)
		}
	}
	if o.socket {
		dir, err := os.MkdirTemp("", "pdd") // short: a socket path has at most 107 bytes
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		o.socketPath = filepath.Join(dir, "hostd.sock")
	}
	d, err := start(o)
	var skip *unavailableError
	if errors.As(err, &skip) {
		t.Skip(skip.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("closing the daemon: %v", err)
		}
	})
	return d
}

// Start starts a daemon outside a test (the benchmark). It must be given
// its backends (WithBackends, or WithBackend with WithGuest and
// WithImage), or WithoutBackend. The caller calls Close, and removes the
// state dir (a new temporary one unless WithStateDir).
func Start(opts ...Option) (*Daemon, error) {
	o := options{}
	for _, opt := range opts {
		opt(&o)
	}
	if o.stateDir == "" {
		dir, err := os.MkdirTemp("", "pdd")
		if err != nil {
			return nil, err
		}
		o.stateDir = dir
	}
	if !o.noBackend && o.openBackends == nil && o.guest == "" {
		return nil, errors.New("daemontest.Start: give the backends (WithBackends), or WithGuest for backends opened by name")
	}
	if o.socket {
		o.socketPath = filepath.Join(o.stateDir, "hostd.sock")
	}
	return start(o)
}

// unavailableError: a backend the daemon was asked for cannot run here.
type unavailableError struct{ name, reason string }

func (e *unavailableError) Error() string {
	return fmt.Sprintf("backend %s cannot run here: %s", e.name, e.reason)
}

func start(o options) (*Daemon, error) {
	if o.token == "" {
		o.token = Token
	}
	if o.openBackends != nil && o.image == "" && o.images == "" {
		o.image = NoImage
	}
	names := o.backendNames
	if len(names) == 0 {
		names = []string{procbox.Name}
	}
	open := o.openBackends
	if o.noBackend {
		open = nil
	} else if open == nil {
		open = func(state string) ([]hypervisor.Backend, error) {
			var out []hypervisor.Backend
			for _, n := range names {
				ctor, err := hypervisor.Lookup(n)
				if err != nil {
					return out, err
				}
				b, err := ctor(hypervisor.Config{StateDir: state, GuestBinary: o.guest, ImagesDir: o.images, AdoptLeftovers: true})
				if err != nil {
					return out, err
				}
				out = append(out, b)
				if c := b.Capabilities(); !c.Available {
					return out, &unavailableError{n, c.Reason}
				}
			}
			return out, nil
		}
	}
	cfg := daemon.Config{
		StateDir: o.stateDir, Logger: o.log, AdminToken: o.token,
		DefaultImage: o.image, ImagesDir: o.images,
		Policy: o.policyOpts, PolicyEngine: o.engine,
		Egress: o.egress, TrustPEM: o.trust, TenantsFile: o.tenantsFile,
		PreviewDomain: o.previewDomain, MCPAllowWrite: o.mcpAllowWrite, StreamLimits: o.streamLimits, StopSandboxes: !o.keep,
	}
	// A wrapped backend may hide its Close from the daemon: the
	// unwrapped one is closed after the daemon (closing twice is fine).
	var unwrapped hypervisor.Backend
	if open != nil {
		cfg.Backends = func() ([]hypervisor.Backend, error) {
			bs, err := open(o.stateDir)
			if err != nil {
				closeAll(bs)
				return nil, err
			}
			if len(bs) > 0 && len(o.wrap) > 0 {
				unwrapped = bs[0]
				for _, w := range o.wrap {
					bs[0] = w(bs[0])
				}
			}
			return bs, nil
		}
	}
	listen := func() ([]net.Listener, error) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns := []net.Listener{l}
		if o.socketPath != "" {
			s, err := net.Listen("unix", o.socketPath)
			if err != nil {
				l.Close()
				return nil, err
			}
			lns = append(lns, s)
		}
		return lns, nil
	}
	if !o.noRun {
		cfg.Listeners = listen
	}
	d, err := daemon.New(cfg)
	if err != nil {
		return nil, err
	}
	td := &Daemon{Daemon: d, StateDir: o.stateDir, Token: o.token, Socket: o.socketPath, unwrapped: unwrapped}
	if !o.noRun {
		td.URL = "http://" + d.Addrs()[0].String()
		td.Client = client.New(td.URL, o.token)
		go d.Run(context.Background()) // Close ends it
	}
	return td, nil
}

func closeAll(bs []hypervisor.Backend) {
	for _, b := range bs {
		if c, ok := b.(interface{ Close() error }); ok {
			c.Close()
		}
	}
}
