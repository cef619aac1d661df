// Package vmkit makes what a virtual machine boots from, for any VM
// backend (hypervisor/qemu uses it): a guest kernel with the modules the
// guest needs in their load order, an initramfs, and a read-only ext4
// root disk made from an image build. Everything is cached under a
// directory the caller gives (KitOptions.CacheDir) and keyed so that a
// changed kernel, module list or guest binary makes a new entry:
//
//	<cache>/kernel/<package>_<version>_m<hash of the module lists>/
//	    vmlinuz, modules/*.ko, modules.builtin, modules.order, <group>.order
//	<cache>/busybox/<version>/busybox
//	<cache>/initramfs/<hash>.cpio
//	<image build>/vm-root.v2.ext4 (RootDiskName, beside the rootfs)
//
// BuildKit makes the VM boot kit for an image build. The kernel
// is vmlinuz from Debian's cloud kernel (the package
// linux-image-cloud-amd64 depends on, fetched with apt-get download and
// unpacked with dpkg-deb -x into <cache>/kernel/<package>_<version>_m<hash of the module list>).
// Its virtio drivers are modules without a modules.dep, so the boot
// modules (virtio_mmio, virtio_pci, virtio_blk, virtio_console) and what
// their modinfo "depends=" names are kept, uncompressed, in a load order
// with dependencies first. The initramfs is an uncompressed cpio newc
// written in Go. With a guest binary (every machine's kit) paddock-guest
// itself is /init (guest/vminit.Initramfs): it loads the boot modules,
// mounts /dev/vda (ext4), binds the initramfs's /paddock read-only at
// the root's /.paddock, moves the root, chroots, prints RootUpMarker
// with the build id and execs /.paddock/paddock-guest vm-init: one
// process, no copies. Without one (the boot tests) busybox-static runs
// a shell /init that does the same by switch_root and execs
// paddock.init= from the kernel command line, if given. The root disk is
// RootDiskName next to the build's rootfs (mkfs.ext4 -d, sized to the
// tree, with /etc/paddock-vm-build written by debugfs), read-only and
// removed with the build when it is pruned.
//
// The apt-get, dpkg-deb, mkfs.ext4, e2fsck, resize2fs, debugfs and
// dumpe2fs of the host do the fetching and the disk; CPIOWriter writes the
// initramfs format (also used for QEMU's KVM probe).
package vmkit
