package qemu

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"sync"
	"testing"

	"github.com/hashicorp/yamux"

	"paddock.dev/paddock/guest/api"
)

// guestHealth is a stand-in agent on the far end of a machine's channel:
// it answers GET /v1/health with whatever health holds.
type guestHealth struct {
	mu     sync.Mutex
	health map[string]any
}

func (g *guestHealth) set(h map[string]any) {
	g.mu.Lock()
	g.health = h
	g.mu.Unlock()
}

// channelTo gives m a yamux session whose streams reach g, as connect
// does with the real agent.
func channelTo(t *testing.T, m *Machine, g *guestHealth) {
	t.Helper()
	hostEnd, guestEnd := net.Pipe()
	srv, err := yamux.Server(guestEnd, nil)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := yamux.Client(hostEnd, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		defer g.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(g.health)
	})}
	go hs.Serve(srv)
	t.Cleanup(func() { cl.Close(); hs.Close() })
	m.mu.Lock()
	m.sess = cl
	m.mu.Unlock()
}

// TestOOMKillsCount: the machine's count is the guest's, from where the
// current boot began: zero for a fresh boot, the guest's count for one
// loaded from memory (so a restore to a snapshot holding kills starts
// from zero). An agent older than VersionOOMKills, or one whose kernel
// does not count, is an error rather than a zero; so is a machine with
// no channel up.
func TestOOMKillsCount(t *testing.T) {
	ctx := context.Background()
	m := &Machine{done: make(chan struct{})}
	if _, err := m.OOMKills(); !errors.Is(err, errAgentDown) {
		t.Fatalf("no channel: %v", err)
	}
	g := &guestHealth{}
	channelTo(t, m, g)
	count := func(n int) map[string]any {
		return map[string]any{"version": api.Version, "oom_kills": n}
	}

	g.set(count(0))
	m.startOOMCount(ctx, false)
	g.set(count(2))
	if n, err := m.OOMKills(); err != nil || n != 2 {
		t.Errorf("a fresh boot with 2 kills: %d %v", n, err)
	}

	// Loaded from memory holding 5 kills: that is the start.
	g.set(count(5))
	m.startOOMCount(ctx, true)
	if n, err := m.OOMKills(); err != nil || n != 0 {
		t.Errorf("just loaded from memory: %d %v, want 0", n, err)
	}
	g.set(count(6))
	if n, err := m.OOMKills(); err != nil || n != 1 {
		t.Errorf("one kill after the load: %d %v, want 1", n, err)
	}

	// The read at the load failed: the first read later is the start.
	m.mu.Lock()
	sess := m.sess
	m.sess = nil
	m.mu.Unlock()
	m.startOOMCount(ctx, true)
	m.mu.Lock()
	m.sess = sess
	m.mu.Unlock()
	g.set(count(9))
	if n, err := m.OOMKills(); err != nil || n != 0 {
		t.Errorf("first read after a load whose own read failed: %d %v, want 0", n, err)
	}
	g.set(count(11))
	if n, err := m.OOMKills(); err != nil || n != 2 {
		t.Errorf("two kills later: %d %v, want 2", n, err)
	}

	for name, h := range map[string]map[string]any{
		"version 1 agent":          {"version": 1, "oom_kills": 3},
		"kernel without the count": {"version": api.Version},
	} {
		g.set(h)
		if n, err := m.OOMKills(); err == nil {
			t.Errorf("%s: %d, want an error", name, n)
		}
	}
}
