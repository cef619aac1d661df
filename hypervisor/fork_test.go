package hypervisor

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// fakeMachine is the edge of this test: ForkN is under test, not a
// backend (the conformance suite forks real machines through it).
type fakeMachine struct {
	Unsupported
	spec    MachineSpec
	stopped *atomic.Int32
}

func (f *fakeMachine) ID() string                             { return f.spec.ID }
func (f *fakeMachine) Dial(context.Context) (net.Conn, error) { return nil, ErrNotSupported }
func (f *fakeMachine) Wait(context.Context) error             { return nil }
func (f *fakeMachine) Stop(context.Context) error             { f.stopped.Add(1); return nil }

// TestForkN: n children from their own specs, all or nothing.
func TestForkN(t *testing.T) {
	ctx := context.Background()
	parent := MachineSpec{ID: "parent", EgressDir: "/e/parent"}
	var stopped, made atomic.Int32
	create := func(fail int32) func(context.Context, MachineSpec) (*fakeMachine, error) {
		return func(_ context.Context, spec MachineSpec) (*fakeMachine, error) {
			if made.Add(1) == fail {
				return nil, errors.New("no room")
			}
			return &fakeMachine{spec: spec, stopped: &stopped}, nil
		}
	}
	kids, err := ForkN(ctx, parent, Snapshot{ID: "s"}, 4, create(0))
	if err != nil || len(kids) != 4 {
		t.Fatalf("fork of 4: %v %d", err, len(kids))
	}
	ids := map[string]bool{}
	for _, k := range kids {
		f := k.(*fakeMachine)
		ids[f.spec.ID] = true
		if f.spec.From == nil || f.spec.From.ID != "s" || f.spec.EgressDir != "/e/"+f.spec.ID {
			t.Errorf("child spec %+v", f.spec)
		}
	}
	if len(ids) != 4 || stopped.Load() != 0 {
		t.Errorf("ids %v, stopped %d", ids, stopped.Load())
	}
	made.Store(0)
	if _, err := ForkN(ctx, parent, Snapshot{ID: "s"}, 3, create(2)); err == nil || !strings.Contains(err.Error(), "no room") {
		t.Errorf("a failed child: %v", err)
	}
	if stopped.Load() != 2 {
		t.Errorf("%d children stopped after one failed, want the other 2", stopped.Load())
	}
	for _, n := range []int{0, MaxForkChildren + 1} {
		if _, err := ForkN(ctx, parent, Snapshot{}, n, create(0)); !errors.Is(err, ErrInvalidSpec) {
			t.Errorf("n=%d: %v", n, err)
		}
	}
}

func TestChildSpec(t *testing.T) {
	parent := MachineSpec{ID: strings.Repeat("p", 40), Hostname: "parent", EgressDir: "/run/egress/" + strings.Repeat("p", 40), Image: "mini"}
	s := Snapshot{ID: "snap-1"}
	a, b := ChildSpec(parent, s), ChildSpec(parent, s)
	if a.ID == b.ID || !strings.HasPrefix(a.ID, strings.Repeat("p", 32)+"-f") || !IDPattern.MatchString(a.ID) {
		t.Errorf("child ids %q %q", a.ID, b.ID)
	}
	if a.Hostname != "" || a.Image != "mini" || a.From == nil || a.From.ID != "snap-1" {
		t.Errorf("child spec %+v", a)
	}
	if a.EgressDir != filepath.Join("/run/egress", a.ID) {
		t.Errorf("child egress dir %q", a.EgressDir)
	}
	if parent.From != nil || parent.Hostname != "parent" {
		t.Error("the parent's spec changed")
	}
	if c := ChildSpec(MachineSpec{ID: "x"}, s); c.EgressDir != "" {
		t.Errorf("an offline parent's child has egress dir %q", c.EgressDir)
	}
}

// TestConfigCheck: no state dir is refused; a logger and the images dir
// are filled in, and what was set is kept.
func TestConfigCheck(t *testing.T) {
	if _, err := (Config{}).Check("x"); err == nil || !strings.HasPrefix(err.Error(), "x: ") {
		t.Errorf("no state dir: %v", err)
	}
	c, err := Config{StateDir: "/s"}.Check("x")
	if err != nil || c.Logger == nil || c.ImagesDir != "/s/images" {
		t.Errorf("defaults: %+v %v", c, err)
	}
	if c, _ := (Config{StateDir: "/s", ImagesDir: "/i"}).Check("x"); c.ImagesDir != "/i" {
		t.Errorf("images dir replaced: %q", c.ImagesDir)
	}
}

// TestForkNAs: children take the identity given, else their own (no
// host name, no machine id: the backend makes them), whatever the
// parent's spec carried; a bad machine id is refused by Normalize.
func TestForkNAs(t *testing.T) {
	ctx := context.Background()
	parent := MachineSpec{ID: "parent", Hostname: "parent-host", MachineID: "0123456789abcdef0123456789abcdef"}
	var stopped atomic.Int32
	create := func(_ context.Context, spec MachineSpec) (*fakeMachine, error) {
		return &fakeMachine{spec: spec, stopped: &stopped}, nil
	}
	same := ForkIdentity{Hostname: "parent-host", MachineID: "0123456789abcdef0123456789abcdef"}
	kids, err := ForkNAs(ctx, parent, Snapshot{ID: "s"}, 2, same, create)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kids {
		if f := k.(*fakeMachine); f.spec.Hostname != same.Hostname || f.spec.MachineID != same.MachineID || f.spec.ID == parent.ID {
			t.Errorf("preserved child spec %+v", f.spec)
		}
	}
	kids, err = ForkN(ctx, parent, Snapshot{ID: "s"}, 1, create)
	if err != nil {
		t.Fatal(err)
	}
	if f := kids[0].(*fakeMachine); f.spec.Hostname != "" || f.spec.MachineID != "" {
		t.Errorf("a child of its own inherited the parent's identity: %+v", f.spec)
	}
	if _, err := Normalize(MachineSpec{ID: "x", Image: "i", MachineID: "NOT-HEX"}, Limits{CPUs: 1, MaxCPUs: 2, MemoryMB: 64, MaxMemoryMB: 128, DiskMB: 64, MaxDiskMB: 128, PIDs: 10, MaxPIDs: 20}); !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), "machine id") {
		t.Errorf("a machine id that is not 32 hex: %v, want ErrInvalidSpec", err)
	}
}
