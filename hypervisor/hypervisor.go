// Package hypervisor defines what a sandbox backend is (Backend, Machine),
// keeps a registry of the backends built into this binary, and holds the
// conformance suite every registered backend must pass.
//
// A backend turns a MachineSpec into a running Machine whose guest agent is
// reachable through Dial. Everything above this package (hostd, the CLI)
// talks to the guest agent through that stream and never to the backend's
// internals.
package hypervisor

import (
	"context"
	"net"
	"paddock.dev/paddock/errdefs"
	"time"

	apiv1 "paddock.dev/paddock/api"
)

// Sentinel errors. Backends wrap them with %w; each is of an errdefs kind,
// whose status and code the API answers with.
var (
	// ErrNotSupported: the backend cannot do this (409 at the API).
	ErrNotSupported = errdefs.New(errdefs.ErrConflict, "not supported by this backend")
	// ErrInvalidSpec: the spec asks for something impossible (400).
	ErrInvalidSpec = errdefs.New(errdefs.ErrInvalidArgument, "invalid machine spec")
	// ErrNotFound: no such image, snapshot or machine (404).
	ErrNotFound = errdefs.New(errdefs.ErrNotFound, "not found")
	// ErrStopped: the machine is not running (409).
	ErrStopped = errdefs.New(errdefs.ErrConflict, "machine is stopped")
	// ErrUnknownBackend: Lookup of a name nobody registered (400).
	ErrUnknownBackend = errdefs.New(errdefs.ErrInvalidArgument, "unknown backend")
)

// Capabilities is the public wire type api.Capabilities, kept under this name here.
type Capabilities = apiv1.Capabilities

// Network modes.
const (
	NetworkOffline = "offline" // loopback only
	// NetworkProxy: loopback only, plus the guest agent's proxy
	// (127.0.0.1:3128) and resolver (127.0.0.1:53), which carry traffic
	// to the host's egress for this machine (MachineSpec.EgressDir).
	NetworkProxy = "proxy"
	// NetworkTransparent is NetworkProxy where TCP to ports 80 and 443 of
	// any address is also redirected there, for programs that ignore
	// proxy settings; everything else is refused.
	NetworkTransparent = "transparent"
)

// MachineSpec is what to create.
type MachineSpec struct {
	// ID names the machine; unique per backend (letters, digits, - and _,
	// at most 64). Empty: the backend picks one.
	ID       string
	Image    string // image name, as built by `paddock image build`
	Hostname string // default: the ID
	// MachineID is the machine's /etc/machine-id (32 lowercase hex).
	// Empty: a new random one. A fork whose children keep their parent's
	// identity sets it (see IdentityForker).
	MachineID string
	CPUs      float64
	MemoryMB  int64
	DiskMB    int64 // writable layer size
	PIDs      int64 // process limit
	Network   string
	// EgressDir is the host directory for the unix sockets of this
	// machine's egress (proxy.sock, dns.sock, redirect.sock; see
	// guest/egressfwd); required by NetworkProxy and NetworkTransparent.
	// The backend makes it (mode 0700) if missing; the caller serves the
	// sockets. A fork child gets the sibling directory named after its
	// own id, so each sandbox's traffic arrives on its own sockets.
	EgressDir string
	// GuestUser is the uid:gid commands run as (default 1000:1000).
	GuestUser string
	// Env is added to every command's environment.
	Env []string
	// From, when set, starts the machine from this snapshot instead of
	// the image (used by Restore and Fork).
	From *Snapshot
	// TrustPEM holds extra CA certificates (PEM) programs in the machine
	// trust besides the image's: the egress interception CA, an
	// operator's own. At most MaxTrustPEM bytes.
	TrustPEM []byte
	// Overlays put a copy-on-write view of an image directory at another
	// path: the machine writes there freely, the directory it shows stays
	// as it was. Kept by checkpoints, restores and forks like the rest of
	// the machine's state.
	Overlays []Overlay
}

// Overlay is one copy-on-write directory view (see MachineSpec.Overlays).
type Overlay struct {
	Lower  string `json:"lower"`  // a directory in the image, absolute
	Target string `json:"target"` // where the view appears, absolute
}

// MaxTrustPEM bounds MachineSpec.TrustPEM.
const MaxTrustPEM = 256 << 10

// MaxOverlays bounds MachineSpec.Overlays.
const MaxOverlays = 4

// Snapshot is a checkpoint of a machine.
type Snapshot struct {
	ID        string    `json:"id"`
	Tag       string    `json:"tag"`
	Machine   string    `json:"machine"`
	Backend   string    `json:"backend"`
	Image     string    `json:"image"`
	Memory    bool      `json:"memory"`
	CreatedAt time.Time `json:"created_at"`
	// Layers are backend-specific references (procbox: layer directories,
	// oldest first).
	Layers []string `json:"layers,omitempty"`
	// Bytes is the most the snapshot can come to take on the backend's
	// disk: what it copied, or (procbox on btrfs, whose snapshots share
	// data with the machine until it writes over it) what its layer
	// refers to. Admission control counts it while the snapshot lives.
	Bytes int64 `json:"bytes"`
}

// Backend creates machines.
type Backend interface {
	Name() string
	Capabilities() Capabilities
	Create(ctx context.Context, spec MachineSpec) (Machine, error)
}

// Machine is one running sandbox.
type Machine interface {
	ID() string
	// Dial opens a new stream to the guest agent.
	Dial(ctx context.Context) (net.Conn, error)
	// Checkpoint records the machine's state; memory asks for memory and
	// processes too (ErrNotSupported when the backend cannot).
	Checkpoint(ctx context.Context, tag string, memory bool) (Snapshot, error)
	// Restore puts the machine back to s; running commands end.
	Restore(ctx context.Context, s Snapshot) error
	// Fork starts n running machines from s, each with its own writable
	// state, hostname and identity.
	Fork(ctx context.Context, s Snapshot, n int) ([]Machine, error)
	// DeleteSnapshot removes a snapshot this machine took.
	DeleteSnapshot(ctx context.Context, s Snapshot) error
	// Stop ends the machine and removes everything it held. Idempotent.
	Stop(ctx context.Context) error
	// Wait blocks until the machine has stopped.
	Wait(ctx context.Context) error
}

// NetAttacher is a backend whose machines live in a network namespace on
// this host (procbox): with a hook set, every machine with
// NetworkTransparent calls it with its id and the path of its network
// namespace once its init is up, after every boot (create, fork, restore)
// and adoption, before anything of the sandbox runs; a hook that fails
// fails the boot. The daemon's egress uses it to link the namespace to
// the proxy (hostd/egress.Host.AttachLink).
type NetAttacher interface {
	SetNetAttach(hook func(id, netnsPath string) error)
}

// Adopter is a backend whose machines can outlive the process that
// created them: a daemon that stops (or dies) leaves them running, and the
// next process on the same state directory takes them over.
type Adopter interface {
	// Adopt takes over the machine id that an earlier process left
	// running. ErrNotFound: there is no such machine, or it is not running
	// any more (it is then left for SweepLeftovers).
	Adopt(ctx context.Context, id string) (Machine, error)
	// Detach lets go of every machine without stopping it, so a later
	// process can adopt them. The backend must not be used afterwards.
	Detach()
	// SweepLeftovers removes what earlier processes left and nobody
	// adopted: processes, writable layers, sockets, directories.
	SweepLeftovers()
}

// ForkIdentity is the identity fork children are given instead of one of
// their own each: the parent's host name and machine-id, for a fork that
// preserves them.
type ForkIdentity struct {
	Hostname  string
	MachineID string
}

// IdentityForker is a Machine whose fork children can share one given
// identity. Fork (each child its own) is ForkAs with a zero ForkIdentity.
type IdentityForker interface {
	ForkAs(ctx context.Context, s Snapshot, n int, id ForkIdentity) ([]Machine, error)
}

// MaxForkChildren bounds Fork's n.
const MaxForkChildren = 32

// Unsupported can be embedded by a Machine to answer ErrNotSupported for
// what it does not implement.
type Unsupported struct{}

func (Unsupported) Checkpoint(context.Context, string, bool) (Snapshot, error) {
	return Snapshot{}, ErrNotSupported
}
func (Unsupported) Restore(context.Context, Snapshot) error { return ErrNotSupported }
func (Unsupported) Fork(context.Context, Snapshot, int) ([]Machine, error) {
	return nil, ErrNotSupported
}
func (Unsupported) DeleteSnapshot(context.Context, Snapshot) error { return ErrNotSupported }
