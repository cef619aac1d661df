package egress_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"

	"paddock.dev/paddock/hostd/daemon/daemontest"
	hegress "paddock.dev/paddock/hostd/egress"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/store"
	_ "paddock.dev/paddock/hypervisor/all"
	"paddock.dev/paddock/hypervisor/procbox"
	"paddock.dev/paddock/hypervisor/qemu"
	"paddock.dev/paddock/internal/testutil"
	"paddock.dev/paddock/policy"
)

// testNet is the "internet" of a test: 10.99.0.0/24, let through as an
// operator's range, in a network namespace the test makes (upstreamNS),
// joined to the host by a veth pair. Its DNS zone answers on 10.99.0.53,
// and each route's address:port there serves what one of the test's
// servers serves, so the proxy's dials are real dials to those
// addresses. A kernel that cannot make the namespace's veth falls back to
// loopback: the zone on 127.0.0.1 and each route's address:port dialled
// as the server's loopback address instead.
type testNet struct {
	zone   *zone
	routes map[netip.AddrPort]string
	ns     *upstreamNS // nil: the loopback fallback
	dialed sync.Map    // netip.AddrPort → true: every address the proxy dialled
}

// zoneAddr is the DNS zone's address in the upstream namespace.
var zoneAddr = netip.MustParseAddr("10.99.0.53")

func newTestNet(t *testing.T, names map[string]string, routes map[string]string) *testNet {
	t.Helper()
	n := &testNet{routes: map[netip.AddrPort]string{}}
	addrs := []netip.Addr{zoneAddr}
	for a, to := range routes {
		ap := netip.MustParseAddrPort(a)
		n.routes[ap] = to
		addrs = append(addrs, ap.Addr())
	}
	ns, err := newUpstreamNS(t, addrs)
	if err != nil {
		t.Logf("upstreams on loopback through the dial map: %v", err)
		n.zone = startZone(t, names, nil)
		return n
	}
	n.ns = ns
	n.zone = startZone(t, names, ns)
	for ap, to := range n.routes {
		ns.relay(t, ap, to)
	}
	return n
}

// testEngine is the policy engine (built-in Rego modules) the tests'
// daemons decide with, as paddock serve does: network requests through
// the session manager, grants through the egress host.
var testEngine = sync.OnceValues(func() (*policy.Engine, error) { return policy.New(policy.Options{}) })

func engine(t *testing.T) *policy.Engine {
	t.Helper()
	e, err := testEngine()
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// egressConfig is the host egress config for the test's net; tune it
// before daemonFor (the daemon makes the host from it).
func (n *testNet) egressConfig() hegress.Config {
	return hegress.Config{
		AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("10.99.0.0/24")},
		Links:      true,
		Resolver: &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, n.zone.addr)
		}},
		Dial: func(ctx context.Context, a netip.AddrPort) (net.Conn, error) {
			n.dialed.Store(a, true)
			var d net.Dialer
			if n.ns != nil {
				if !n.ns.prefix.Contains(a.Addr()) {
					return nil, fmt.Errorf("%s is outside this test's network", a)
				}
				return d.DialContext(ctx, "tcp", a.String()) // through the veth
			}
			to, ok := n.routes[a]
			if !ok {
				return nil, fmt.Errorf("no route to %s in this test", a)
			}
			return d.DialContext(ctx, "tcp", to)
		},
	}
}

// Backends the tests run on when PADDOCK_BACKENDS does not say.
var (
	procboxOnly = []string{procbox.Name}
	// allBackends: the qemu one is skipped, with its reason, where VMs
	// cannot run.
	allBackends = []string{procbox.Name, qemu.Name}
)

// loopbackSuffix on a backend's name (procbox-loopback) runs the test on
// that backend with Config.Links off: the sandbox's programs that ignore
// proxy settings take the loopback redirect instead of a veth link.
const loopbackSuffix = "-loopback"

func linksOn(backend string) bool { return !strings.HasSuffix(backend, loopbackSuffix) }

// onBackends runs fn as a subtest per backend: those PADDOCK_BACKENDS
// names (a comma list, as for the conformance suite), else dflt.
func onBackends(t *testing.T, dflt []string, fn func(t *testing.T, backend string)) {
	t.Helper()
	names := dflt
	if v := os.Getenv("PADDOCK_BACKENDS"); v != "" {
		names = nil
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				names = append(names, n)
			}
		}
	}
	for _, n := range names {
		t.Run(n, func(t *testing.T) { fn(t, n) })
	}
}

// daemonFor is a daemon (hostd/daemon through daemontest) on backend
// with the debian image (curl, python3, git), an egress host made from
// cfg (the proxy's grants are the manager's, as in paddock serve) and
// extra trusted certificates besides the egress CA; it returns the
// manager, the store and the egress host for tests that look into them.
// Everything stops with the test; a backend that cannot run here skips
// it with its reason.
func daemonFor(t *testing.T, backend string, cfg hegress.Config, trust []byte) (*session.Manager, *store.Store, *hegress.Host) {
	t.Helper()
	return daemonWith(t, backend, cfg, trust, engine(t))
}

// daemonWith is daemonFor deciding with eng.
func daemonWith(t *testing.T, backend string, cfg hegress.Config, trust []byte, eng *policy.Engine) (*session.Manager, *store.Store, *hegress.Host) {
	t.Helper()
	d := egressDaemon(t, backend, cfg, trust, eng)
	return d.Manager(), d.Store(), d.Egress()
}

// egressDaemon is daemonWith's daemon itself, with more options (its
// URL and client, for tests through the API).
func egressDaemon(t *testing.T, backend string, cfg hegress.Config, trust []byte, eng *policy.Engine, opts ...daemontest.Option) *daemontest.Daemon {
	t.Helper()
	testutil.RequiresRoot(t)
	images, _ := testutil.DebianImages(t)
	return daemontest.New(t, append([]daemontest.Option{daemontest.WithBackend(strings.TrimSuffix(backend, loopbackSuffix)),
		daemontest.WithImage(testutil.DebianImageName, images), daemontest.WithEgress(cfg), daemontest.WithTrust(trust),
		daemontest.WithPolicy(eng)}, opts...)...)
}
