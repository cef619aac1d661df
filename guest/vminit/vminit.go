// Package vminit is the guest side of a Paddock virtual machine (the qemu
// backend). The kernel runs this binary as the initramfs's /init
// (Initramfs): it mounts the root disk, shows the initramfs's /paddock at
// /.paddock in it and execs `/.paddock/paddock-guest vm-init`, which is
// PID 1 from then on: it mounts the kernel's filesystems, brings up lo and starts
// `paddock-guest vm-serve` as its one child (agent.RunInit reaps the rest).
//
// vm-serve owns the agent channel (guest/vmchan): it opens the virtio
// serial port, waits for the host's hello and applies it: the first hello
// of a boot configures the machine (the guest user, environment, trust
// bundle, egress forwarders; in transparent mode it first has PID 1
// install the redirect's route and nftables rules); every hello with a
// new identity (a fork child, a restored machine) sets the hostname,
// machine-id and a fresh random seed; every hello sets the clock. It then serves the guest API
// (guest/agent) on the streams the host opens, and carries the guest's
// egress (guest/egressfwd) on streams it opens to the host. When the host
// goes away (a restore, a daemon restart) it opens the port again and
// waits for the next hello.
package vminit

// Subcommands of paddock-guest.
const (
	InitSubcommand  = "vm-init"
	ServeSubcommand = "vm-serve"
)

// GuestDir is where the guest binary is: the initramfs's InitramfsDir,
// bound read-only into the root disk.
const GuestDir = "/.paddock"

// Layout of a guest kit's initramfs (hypervisor/qemu writes it): the
// kernel runs /init, a link to InitramfsDir/paddock-guest, which is this
// binary; InitramfsDir also holds modules/ (modules.order: loaded here;
// <group>.order: left for PID 1) and an empty dev/.
const (
	InitramfsDir = "/paddock"
	// RootUpMarker is printed on the console once the root disk is the
	// root (the qemu backend and its tests wait for it).
	RootUpMarker = "paddock-vm: root up"
	// RootDevice is the root disk, the machine's first virtio disk.
	RootDevice = "/dev/vda"
)
