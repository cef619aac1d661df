// Package qemu is the QEMU microVM backend (registered as "qemu"; see
// backend.go and machine.go, and docs/ARCHITECTURE.md "Virtual machines").
// Its parts:
//
//   - QMP: a client of its own (Dial, Client.Execute with typed *Error
//     replies, events on a bounded channel, every message size-limited).
//   - Probe: finds qemu-system-x86_64 and its version and reports /dev/kvm
//     and /dev/vhost-vsock. ProbeKVM decides whether KVM is usable by
//     booting the kit's kernel with a tiny initramfs under -accel kvm to a
//     marker only userspace can print (cached per guest kernel, QEMU and
//     host kernel); machines run under kvm only then, else tcg.
//   - The boot kit (kernel, initramfs, root disk) comes from
//     hypervisor/vmkit, which a second VM backend can use as it is.
//   - Boot (vm.go): a qcow2 overlay over the kit's base disk (qemu-img create -f
//     qcow2 -b base -F raw), then `-machine microvm,pit=on,rtc=on,acpi=on`
//     (microvm hangs calibrating the TSC without pit/rtc and tsc_early_khz=
//     on the command line; without ACPI poweroff never exits), -accel tcg,
//     -nodefaults, the disk as virtio-blk-device (virtio-mmio), the serial
//     console to console.log and QMP on a unix socket. VM.Stop sends QMP
//     quit (SIGKILL to the process group after 5 s) and removes the overlay
//     and socket; it is idempotent. Under TCG on these machines the boot to
//     the root disk's userspace takes about 3 s.
//
// Egress: offline (no NIC), proxy and transparent modes; the initramfs
// carries the netfilter modules and PID 1 loads them and installs
// transparent mode's route and nftables rules once per boot (a memory
// restore keeps them).
//
// Directory overlays: mounted by the guest's PID 1 at each boot, their
// writes on the machine's disk.
//
// OOM kills (oom.go): the guest's kernel kills commands where the host
// cannot see it, so the machine reads the count the agent reports in its
// health answer, from the start of the current boot or memory restore.
//
// Adoption (adopt.go): a daemon's VMs outlive it and the next one adopts
// them. Not yet: a live run of the vsock channel (no /dev/vhost-vsock
// here).
package qemu
