package api

// Capabilities says what a backend can do, so callers can refuse with 409
// before trying.
type Capabilities struct {
	Isolation string `json:"isolation"` // "namespaces", "vm", or "none" (hypervisor/fake, tests only)
	Snapshot  bool   `json:"snapshot"`  // disk checkpoint and restore
	// MemoryCheckpoint: checkpoints can include memory and processes.
	MemoryCheckpoint       bool   `json:"memory_checkpoint"`
	MemoryCheckpointReason string `json:"memory_checkpoint_reason,omitempty"`
	Fork                   bool   `json:"fork"`
	PTY                    bool   `json:"pty"`
	Confinement            bool   `json:"confinement"` // Landlock + seccomp in the guest
	// Egress and HTTPPolicy are the daemon's, set on a session's record:
	// a network policy is enforced by the host's egress proxy and
	// resolver, and its method and path rules hold over HTTPS too (TLS
	// interception). A backend leaves them false.
	Egress     bool `json:"egress"`
	HTTPPolicy bool `json:"http_policy"`
	// ExecAllowlist is a session's: the guest kernel enforces its process
	// policy's execute list (process.enforce "exec"), checked at create.
	ExecAllowlist bool `json:"exec_allowlist"`
	// CPUMeter: the backend's machines report their CPU time
	// (CPUMeter) and can have their commands stopped (CommandStopper),
	// so the daemon can hold max_compute_seconds against processes left
	// in the background. A session with that budget is refused on a
	// backend without it.
	CPUMeter bool `json:"cpu_meter"`
	// Accelerator is a VM backend's: what its machines run under and
	// why, "kvm (…)" or "tcg (…)". Empty for other backends.
	Accelerator string `json:"accelerator,omitempty"`
	// Available is false when the backend is compiled in but cannot run on
	// this host (no KVM, not root, not macOS); Reason says why.
	Available bool   `json:"available"`
	Reason    string `json:"reason,omitempty"`
}
