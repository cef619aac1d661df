// Package vminit is the guest side of a Paddock virtual machine (the qemu
// backend). The VM's initramfs mounts the root disk, puts this binary at
// /.paddock/paddock-guest and execs `paddock-guest vm-init`, which becomes
// PID 1: it mounts the kernel's filesystems, brings up lo and starts
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

// GuestDir is where the initramfs puts the guest binary (a tmpfs).
const GuestDir = "/.paddock"
