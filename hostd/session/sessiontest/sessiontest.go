// Package sessiontest builds a session.Manager for tests, the one way
// every package's tests get one: a store and a ledger in the test's
// temporary directory, a backend, a policy engine and a clock, each
// closed when the test ends.
//
// By default the manager runs on the fake backend (hypervisor/fake: the
// real guest agent in the test's own process, no namespaces, no root),
// with the built-in policy engine and the real clock. Its commands run on
// the host as the test's user, so a test gives them relative paths only.
// Options change that: Procbox for real sandboxes (the test needs root),
// Policy for another engine or none, Now for a clock the test moves
// (Clock is one), StateDir to keep the state where the test says,
// Egress for a network service, WrapBackend to change what the backend
// does.
//
// Package session's own internal tests (package session) cannot import
// this package, which imports session; its external tests
// (package session_test) and the sibling packages can.
package sessiontest

import (
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"paddock.dev/paddock/hostd/ledger"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/store"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/hypervisor/fake"
	"paddock.dev/paddock/hypervisor/procbox"
	"paddock.dev/paddock/internal/testutil"
	"paddock.dev/paddock/policy"
)

// Option changes how New builds the manager.
type Option func(*options)

type options struct {
	procbox   bool
	policy    session.Decider
	policySet bool
	now       func() time.Time
	stateDir  string
	egress    session.Egress
	wrap      func(hypervisor.Backend) hypervisor.Backend
}

// Procbox runs the manager on procbox, with the test's guest binary and
// the minimal test image as the default image: real sandboxes, so the
// test needs root (testutil.RequiresRoot skips or fails it otherwise).
func Procbox() Option { return func(o *options) { o.procbox = true } }

// Policy gives the manager d as its policy engine; Policy(nil) gives it
// none (a session with process rules is then refused, 409).
func Policy(d session.Decider) Option {
	return func(o *options) { o.policy, o.policySet = d, true }
}

// Now gives the manager now as its clock.
func Now(now func() time.Time) Option { return func(o *options) { o.now = now } }

// StateDir keeps the store, the ledger and the backend's state under dir
// instead of a fresh temporary directory.
func StateDir(dir string) Option { return func(o *options) { o.stateDir = dir } }

// Egress gives the manager e as the service that serves its sandboxes'
// network, with its socket directories under the state directory. The
// manager still refuses a network policy until it has an egress log
// (SetEgressLog).
func Egress(e session.Egress) Option { return func(o *options) { o.egress = e } }

// WrapBackend gives the manager wrap(backend) instead of the backend: a
// test's wrapper that fails on purpose or changes what a create asks.
func WrapBackend(wrap func(hypervisor.Backend) hypervisor.Backend) Option {
	return func(o *options) { o.wrap = wrap }
}

// New returns a manager built as the options say, shut down (and its
// backend and store closed) when the test ends. Its store is m.Store();
// Ledger(m) reads its ledger.
func New(t testing.TB, opts ...Option) *session.Manager {
	t.Helper()
	var o options
	for _, f := range opts {
		f(&o)
	}
	if o.procbox {
		testutil.RequiresRoot(t)
	}
	state := o.stateDir
	if state == "" {
		state = t.TempDir()
	}
	st, err := store.Open(filepath.Join(state, "paddock.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var (
		b     hypervisor.Backend
		image = "any" // the fake backend runs on the host, whatever the image
	)
	if o.procbox {
		pb, err := procbox.New(hypervisor.Config{StateDir: state, GuestBinary: testutil.GuestBinary(t), ImagesDir: testutil.MiniImages(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pb.Close() })
		b, image = pb, testutil.MiniImageName
	} else {
		fb := fake.New(filepath.Join(state, "fake"))
		t.Cleanup(func() { fb.Close() })
		b = fb
	}
	pol := o.policy
	if !o.policySet {
		eng, err := policy.New(policy.Options{})
		if err != nil {
			t.Fatal(err)
		}
		pol = eng
	}
	if o.wrap != nil {
		b = o.wrap(b)
	}
	cfg := session.Config{Store: st, Ledger: ledger.New(st), Backend: b, DefaultImage: image, Policy: pol, Now: o.now}
	if o.egress != nil {
		cfg.Egress, cfg.EgressRoot = o.egress, filepath.Join(state, "egress")
	}
	m := session.New(cfg)
	// Cleanups run last added first: the manager stops its sandboxes
	// before the backend and the store close.
	t.Cleanup(func() { m.Shutdown(context.Background()) })
	return m
}

// Ledger is a reader of m's ledger (the same rows the manager writes).
func Ledger(m *session.Manager) *ledger.Ledger { return ledger.New(m.Store()) }

// Clock is a test's clock: the real time moved by an offset the test
// sets. Its Now goes to New with the Now option. The zero Clock is the
// real time.
type Clock struct{ off atomic.Int64 }

// Now is the real time plus the offset.
func (c *Clock) Now() time.Time { return time.Now().Add(c.Offset()) }

// Set moves the clock to the real time plus d.
func (c *Clock) Set(d time.Duration) { c.off.Store(int64(d)) }

// Offset is how far the clock is from the real time.
func (c *Clock) Offset() time.Duration { return time.Duration(c.off.Load()) }

// LedgerKinds is the kinds of session id's first 100 ledger entries, in
// order, joined with commas.
func LedgerKinds(t testing.TB, led *ledger.Ledger, id string) string {
	t.Helper()
	es, err := led.List(context.Background(), id, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	ks := make([]string, 0, len(es))
	for _, e := range es {
		ks = append(ks, e.Kind)
	}
	return strings.Join(ks, ",")
}
