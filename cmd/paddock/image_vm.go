//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"paddock.dev/paddock/hypervisor/image"
	"paddock.dev/paddock/hypervisor/qemu"
	"paddock.dev/paddock/hypervisor/vmkit"
)

// vmKitInfo is what `paddock image vm` (and build --vm) report.
type vmKitInfo struct {
	Image         string  `json:"image"`
	Build         string  `json:"build"`
	KernelVersion string  `json:"kernel_version"`
	Kernel        string  `json:"kernel"`
	Initrd        string  `json:"initrd"`
	RootDisk      string  `json:"root_disk"`
	RootDiskBytes int64   `json:"root_disk_bytes"`
	RootFreeBytes int64   `json:"root_free_bytes"`
	Seconds       float64 `json:"seconds"`
}

// buildVMKit makes (or finds) the qemu boot kit of a built image, showing
// each step on stderr.
func (g *globals) buildVMKit(c *cobra.Command, name string) (*vmKitInfo, error) {
	if err := image.ValidName(name); err != nil {
		return nil, usageError{err}
	}
	rootfs, err := image.Store{Dir: g.imagesDir()}.Rootfs(name)
	if err != nil {
		return nil, notFoundError{err}
	}
	guest, err := g.vmTools(c)
	if err != nil {
		return nil, err
	}
	prog := newProgress(c.ErrOrStderr(), g.json)
	start := time.Now()
	k, err := vmkit.BuildKit(c.Context(), rootfs, vmkit.KitOptions{CacheDir: g.vmCacheDir(), GuestBinary: guest,
		Progress: func(step string) { prog.update(step, 0, -1) }})
	prog.finish()
	if err != nil {
		return nil, err
	}
	info := &vmKitInfo{Image: name, Build: k.Build, KernelVersion: k.KernelVersion, Kernel: k.Kernel, Initrd: k.Initrd,
		RootDisk: k.RootDisk, RootFreeBytes: k.RootFree, Seconds: time.Since(start).Seconds()}
	if fi, err := os.Stat(k.RootDisk); err == nil {
		info.RootDiskBytes = fi.Size()
	}
	if !g.json {
		fmt.Fprintf(c.OutOrStdout(), "vm kit for image %s: kernel %s, root disk %.1f MiB (%.1f MiB free) in %s\n", name, k.KernelVersion,
			float64(info.RootDiskBytes)/(1<<20), float64(k.RootFree)/(1<<20), time.Since(start).Round(time.Millisecond))
	}
	return info, nil
}

// vmTools checks what a VM kit needs before any work: the guest binary
// and a QEMU that runs. It returns the guest binary's path.
func (g *globals) vmTools(c *cobra.Command) (string, error) {
	guest, err := g.guestBinary()
	if err != nil {
		return "", err
	}
	if _, err := qemu.Probe(c.Context(), qemu.ProbeOptions{}); err != nil {
		if errors.Is(err, qemu.ErrNoQEMU) {
			return "", fmt.Errorf("%w (install qemu-system-x86 and qemu-utils: make deps)", err)
		}
		return "", err
	}
	return guest, nil
}
