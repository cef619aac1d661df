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
//   - BuildKit (vmimage.go): the VM boot kit for an image build. The kernel
//     is vmlinuz from Debian's cloud kernel (the package
//     linux-image-cloud-amd64 depends on, fetched with apt-get download and
//     unpacked with dpkg-deb -x into <cache>/kernel/<package>_<version>_m<hash of the module list>).
//     Its virtio drivers are modules without a modules.dep, so the boot
//     modules (virtio_mmio, virtio_pci, virtio_blk, virtio_console) and what
//     their modinfo "depends=" names are kept, uncompressed, in a load order
//     with dependencies first. The initramfs is an uncompressed cpio newc
//     written in Go. With a guest binary (every machine's kit) paddock-guest
//     itself is /init (guest/vminit.Initramfs): it loads the boot modules,
//     mounts /dev/vda (ext4), binds the initramfs's /paddock read-only at
//     the root's /.paddock, moves the root, chroots, prints RootUpMarker
//     with the build id and execs /.paddock/paddock-guest vm-init: one
//     process, no copies. Without one (the boot tests) busybox-static runs
//     a shell /init that does the same by switch_root and execs
//     paddock.init= from the kernel command line, if given. The root disk is
//     vm-root.ext4 next to the build's rootfs (mkfs.ext4 -d, sized to the
//     tree, with /etc/paddock-vm-build written by debugfs), read-only and
//     removed with the build when it is pruned.
//   - Boot (vm.go): a qcow2 overlay over that base (qemu-img create -f
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
// Adoption (adopt.go): a daemon's VMs outlive it and the next one adopts
// them. Not yet: a live run of the vsock channel (no /dev/vhost-vsock
// here).
package qemu
