package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/hypervisor/image"
	"paddock.dev/paddock/hypervisor/qemu"
	"paddock.dev/paddock/hypervisor/vmkit"
)

// benchQEMU measures the qemu backend: create of the mini image until the
// guest agent answers an exec, against a plain boot of the same kernel
// (`-kernel` with a tiny initramfs whose shell prints a marker: the probe
// initramfs) with the same machine type, accelerator, CPU model and
// memory, started the same way (qemu.Boot); then a memory checkpoint
// against cp of the memory file it wrote, restore and fork into 2 against
// create. The accelerator is the backend's (TCG unless its KVM probe
// found a usable KVM) and is said on every row. runs repetitions each
// (median); the boots are seconds each under TCG, so keep runs small.
func benchQEMU(ctx context.Context, dir, guest, cache string, imgs image.Store, runs int) {
	fmt.Println()
	b, err := qemu.New(hypervisor.Config{StateDir: dir, GuestBinary: guest, ImagesDir: imgs.Dir,
		Options: map[string]string{"cache": cache}})
	check(err)
	defer b.Close()
	if c := b.Capabilities(); !c.Available {
		fmt.Printf("qemu backend: skipped (%s)\n", c.Reason)
		return
	}
	// Warm up: the first create builds (or finds) the boot kit and runs
	// the KVM probe once.
	t0 := time.Now()
	m, err := b.Create(ctx, hypervisor.MachineSpec{Image: "mini"})
	check(err)
	check(m.Stop(ctx))
	warm := time.Since(t0)
	why := b.Capabilities().Accelerator
	accel, _, _ := strings.Cut(why, " ")
	label := strings.ToUpper(accel)
	fmt.Printf("qemu backend, %s figures (accelerator: %s)\n", label, why)
	fmt.Printf("(first create, building or finding the boot kit and deciding the accelerator: %v; median of %d runs below)\n",
		warm.Round(time.Millisecond), runs)

	rootfs, err := imgs.Rootfs("mini")
	check(err)
	kit, err := vmkit.BuildKit(ctx, rootfs, vmkit.KitOptions{CacheDir: cache, GuestBinary: guest})
	check(err)
	initrd, err := qemu.ProbeInitramfs(ctx, cache)
	check(err)

	// createExec times a create until the agent answers (its health
	// route: the "boot to agent answering") and until a first
	// command has run (fork and exec of a program in the guest on top).
	createExec := func() (hypervisor.Machine, *client.Client, time.Duration, time.Duration) {
		t0 := time.Now()
		m, err := b.Create(ctx, hypervisor.MachineSpec{Image: "mini"})
		check(err)
		cl := client.New(dialer(m))
		_, err = cl.Health(ctx)
		check(err)
		answered := time.Since(t0)
		_, err = cl.Exec(ctx, api.ExecRequest{Command: api.Command{Argv: []string{"true"}}})
		check(err)
		return m, cl, answered, time.Since(t0)
	}
	plain := func() time.Duration {
		run, err := os.MkdirTemp(filepath.Join(dir, "qemu"), "plain-")
		check(err)
		defer os.RemoveAll(run)
		d, console, err := qemu.BootToMarker(ctx, qemu.VMConfig{Kit: vmkit.Kit{Kernel: kit.Kernel, Initrd: initrd}, Dir: run,
			MemoryMB: qemu.DefaultMemoryMB, CPUs: qemu.DefaultCPUs, Accel: accel}, qemu.ProbeMarker)
		if err != nil {
			check(fmt.Errorf("plain boot: %w\n%s", err, console))
		}
		return d
	}
	// Alternated, so both see the same load on a shared machine.
	var answeredRuns, execRuns, peerRuns []time.Duration
	for range runs {
		m, _, a, d := createExec()
		check(m.Stop(ctx))
		answeredRuns, execRuns = append(answeredRuns, a), append(execRuns, d)
		peerRuns = append(peerRuns, plain())
	}
	answered, ours, peer := medianOf(answeredRuns), medianOf(execRuns), medianOf(peerRuns)
	row(fmt.Sprintf("qemu %s: create → agent answering vs plain boot", label), answered, peer, "-kernel, tiny initramfs, to a marker (goal ≤ 1.2×)")
	row(fmt.Sprintf("qemu %s: create + first exec vs plain boot", label), ours, peer, "the same, and a command run in the guest")

	m, cl, _, _ := createExec()
	defer m.Stop(ctx)
	var snap hypervisor.Snapshot
	ckpt := median(runs, func() time.Duration {
		t0 := time.Now()
		s, err := m.Checkpoint(ctx, "bench", true)
		check(err)
		d := time.Since(t0)
		if snap.ID != "" {
			check(m.DeleteSnapshot(ctx, snap))
		}
		snap = s
		return d
	})
	mem := filepath.Join(dir, "qemu", "snapshots", snap.ID, "memory")
	fi, err := os.Stat(mem)
	check(err)
	cp := median(runs, func() time.Duration {
		defer os.Remove(mem + ".copy")
		return timeCmd("cp", mem, mem+".copy")()
	})
	row(fmt.Sprintf("qemu %s: memory checkpoint vs cp of its file", label), ckpt, cp,
		fmt.Sprintf("cp of the %d MiB memory file (%d MiB RAM)", fi.Size()>>20, qemu.DefaultMemoryMB))
	rest := median(runs, func() time.Duration {
		t0 := time.Now()
		check(m.Restore(ctx, snap))
		_, err := cl.Exec(ctx, api.ExecRequest{Command: api.Command{Argv: []string{"true"}}})
		check(err)
		return time.Since(t0)
	})
	row(fmt.Sprintf("qemu %s: restore from memory + first exec", label), rest, ours, "create + first exec")
	fork := median(runs, func() time.Duration {
		t0 := time.Now()
		kids, err := m.Fork(ctx, snap, 2)
		check(err)
		for _, k := range kids {
			_, err := client.New(dialer(k)).Exec(ctx, api.ExecRequest{Command: api.Command{Argv: []string{"true"}}})
			check(err)
		}
		d := time.Since(t0)
		for _, k := range kids {
			check(k.Stop(ctx))
		}
		return d
	})
	row(fmt.Sprintf("qemu %s: fork of 2 from memory, both answering", label), fork, ours,
		fmt.Sprintf("create + first exec (%v per child)", (fork/2).Round(time.Millisecond)))
}

func medianOf(ds []time.Duration) time.Duration {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[len(ds)/2]
}
