// Package sandboxinit is the first process of a namespace sandbox
// (procbox). The host starts `paddock-guest sandbox-init` in new mount, PID,
// UTS, IPC and network namespaces with the Config on fd 3; it builds the
// root filesystem (overlayfs, /proc, /sys, /dev), sets the hostname, brings
// up lo, pivots into the new root and becomes the guest's PID 1 (see
// agent.RunInit), all in one process so a sandbox costs one exec of the
// guest, not two.
//
// It lives in the guest binary because it is what a VM's init does too:
// mount the guest's own filesystems before serving.
package sandboxinit

// Subcommand is the paddock-guest subcommand that runs Main.
const Subcommand = "sandbox-init"

// File descriptors the host passes. The listener is at 3, where serve
// expects it, so nothing needs to be moved: a dup2 onto a low fd could
// clobber a descriptor the Go runtime has opened (its epoll fd).
const (
	FDListener = 3 // the agent's listening unix socket, inherited by serve
	FDConfig   = 4 // Config JSON, read to EOF
	FDGuest    = 5 // the sealed memfd this binary was executed from
)

// MaxConfigBytes bounds the config read from FDConfig.
const MaxConfigBytes = 1 << 20

// Config is what the host tells sandbox-init.
type Config struct {
	Merged    string   `json:"merged"` // where to mount the overlay (a host path)
	Lower     []string `json:"lower"`  // top first, image rootfs last
	Upper     string   `json:"upper"`
	Work      string   `json:"work"`
	Hostname  string   `json:"hostname"`
	MachineID string   `json:"machine_id,omitempty"` // 32 hex; random when empty
	// IdentityDir is a host directory (on the machine's writable tmpfs,
	// outside the overlay) where per-machine files such as machine-id are
	// written before being bind-mounted into place.
	IdentityDir string   `json:"identity_dir"`
	GuestUser   string   `json:"guest_user"`
	GuestHome   string   `json:"guest_home"`
	Env         []string `json:"env"`
	LogJSON     bool     `json:"log_json"`
	// Overlays are copy-on-write directory views mounted in the new root
	// before anything runs there.
	Overlays []Overlay `json:"overlays,omitempty"`
	// TrustPEM is extra CA certificates (PEM) added to the system bundle
	// (api.TrustBundle, and alone at api.TrustExtra: read-only binds both).
	TrustPEM string `json:"trust_pem,omitempty"`
	// Egress, when set, gives the sandbox its way out (see
	// guest/egressfwd).
	Egress *Egress `json:"egress,omitempty"`
}

// Egress is where the host's egress sockets for this sandbox are, and
// whether programs that ignore proxy settings are redirected too.
type Egress struct {
	Dir         string `json:"dir"` // host directory with the sockets
	Transparent bool   `json:"transparent,omitempty"`
}

// EgressMount is where the sandbox sees the egress sockets: root-only,
// read-only, reachable by the agent and not by commands.
const EgressMount = "/run/paddock/egress"

// Overlay is one directory view: overlayfs at Target (a path in the new
// root) over Layers (host paths, top first) and Lower (a path in the new
// root), with Upper and Work on the host.
type Overlay struct {
	Target string   `json:"target"`
	Lower  string   `json:"lower"`
	Layers []string `json:"layers,omitempty"`
	Upper  string   `json:"upper"`
	Work   string   `json:"work"`
}
