package hypervisor

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
)

// ChildSpec is the spec of one fork child of a machine with spec parent,
// started from snapshot s: a new id (the parent's, cut to 32 characters,
// then "-f" and random hex), no hostname of its own (the backend gives it
// one from the id), its egress directory beside the parent's and named
// after the child, so the host serves it separately, and From s.
func ChildSpec(parent MachineSpec, s Snapshot) MachineSpec {
	base := parent.ID
	if len(base) > 32 {
		base = base[:32]
	}
	spec := parent
	spec.ID = randomID(base + "-f")
	spec.Hostname = ""
	if spec.EgressDir != "" {
		spec.EgressDir = filepath.Join(filepath.Dir(spec.EgressDir), spec.ID)
	}
	snap := s
	spec.From = &snap
	return spec
}

// ForkN makes n fork children of a machine with spec parent from s, all
// at once, with create (the backend's own create from a spec). Either all
// n are returned running or none: when one fails, the others are stopped
// and the errors joined.
func ForkN[M Machine](ctx context.Context, parent MachineSpec, s Snapshot, n int, create func(context.Context, MachineSpec) (M, error)) ([]Machine, error) {
	return ForkNAs(ctx, parent, s, n, ForkIdentity{}, create)
}

// ForkNAs is ForkN where every child takes the host name and machine-id
// of id that are set, instead of its own.
func ForkNAs[M Machine](ctx context.Context, parent MachineSpec, s Snapshot, n int, id ForkIdentity, create func(context.Context, MachineSpec) (M, error)) ([]Machine, error) {
	if n < 1 || n > MaxForkChildren {
		return nil, fmt.Errorf("%w: fork count %d must be between 1 and %d", ErrInvalidSpec, n, MaxForkChildren)
	}
	children := make([]M, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			spec := ChildSpec(parent, s)
			spec.MachineID = ""
			if id.Hostname != "" {
				spec.Hostname = id.Hostname
			}
			if id.MachineID != "" {
				spec.MachineID = id.MachineID
			}
			children[i], errs[i] = create(ctx, spec)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for i, c := range children {
			if errs[i] == nil {
				c.Stop(context.Background())
			}
		}
		return nil, err
	}
	out := make([]Machine, n)
	for i, c := range children {
		out[i] = c
	}
	return out, nil
}
