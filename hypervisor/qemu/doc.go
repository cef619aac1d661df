// Package qemu is the start of the QEMU microVM backend (issue 7). It holds,
// so far, no backend: only a QMP client of its own (Dial, Client.Execute
// with typed *Error replies, events on a bounded channel, every message
// size-limited) and Probe, which finds qemu-system-x86_64 and its version
// and reports /dev/kvm (present, unverified) and /dev/vhost-vsock.
//
// Next, in order: the VM image (`paddock image build --vm`: Debian's cloud
// kernel, an initramfs loading the virtio modules in dependency order, an
// ext4 root disk, qcow2 overlays per VM); boot under TCG with
// `-machine microvm` (pit=on,rtc=on, tsc_early_khz=, ACPI on) and the serial
// console captured to a log; the usable-KVM check by booting that tiny guest
// once; the agent channel over a virtio-serial port backed by a unix socket
// with a stream multiplexer (vsock where /dev/vhost-vsock exists); memory
// checkpoints via QMP stop + migrate "exec:cat > FILE" and restore via
// -incoming "exec:cat FILE" (QEMU 7.2 has no file: target); then fork into
// children with their own overlays, and registration as a hypervisor backend.
package qemu
