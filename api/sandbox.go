package api

import (
	"encoding/json"
	"time"
)

// Sandbox limits and defaults.
const (
	// SandboxIDPrefix starts every sandbox id and no session id.
	SandboxIDPrefix          = "sbx-"
	DefaultSandboxTTLSeconds = 600
	// MaxSandboxFileBytes bounds one fs/read or fs/write.
	MaxSandboxFileBytes = 32 << 20
	MaxSandboxEnvVars   = 128
	MaxSandboxEnvBytes  = 64 << 10
	// MaxSandboxAllowHosts bounds a sandbox's allow_hosts.
	MaxSandboxAllowHosts = 64
)

// SandboxRequest is the body of POST /v1/sandboxes.
type SandboxRequest struct {
	TTLSeconds int    `json:"ttl_seconds,omitempty"`
	Image      string `json:"image,omitempty"`
	// Backend is the backend to run on ("" is the daemon's default).
	Backend  string  `json:"backend,omitempty"`
	Offline  *bool   `json:"offline,omitempty"`
	CPUs     float64 `json:"cpus,omitempty"`
	MemoryMB int64   `json:"memory_mb,omitempty"`
	// AllowHosts and Volumes are accepted by the decoder only so that
	// asking for them gets a clear refusal instead of "unknown field".
	AllowHosts []string          `json:"allow_hosts,omitempty"`
	Volumes    []json.RawMessage `json:"volumes,omitempty"`
}

// Sandbox is what the sandbox routes answer.
type Sandbox struct {
	ID      string `json:"id"`
	Backend string `json:"backend"`
	// Status is "running"; "gone" or "lost" when the daemon restarted
	// without its machine (commands are refused; delete it).
	Status string `json:"status"`
	Image  string `json:"image"`
	// CPUs and MemoryMB are what was asked for; absent means the
	// backend's default.
	CPUs     float64 `json:"cpus,omitempty"`
	MemoryMB int64   `json:"memory_mb,omitempty"`
	// Offline is always true: the only interface is loopback.
	Offline bool `json:"offline"`
	// AllowHosts are the hosts it may reach through the host's egress.
	AllowHosts []string `json:"allow_hosts,omitempty"`
	// Workdir is where commands start unless they give cwd.
	Workdir    string    `json:"workdir"`
	TTLSeconds int       `json:"ttl_seconds"`
	CreatedAt  time.Time `json:"created_at"`
	ExpiresAt  time.Time `json:"expires_at"`
}

// ProcessRequest is the body of POST /v1/sandboxes/{id}/process.
type ProcessRequest struct {
	Command        string            `json:"command"`
	TimeoutSeconds int               `json:"timeout_seconds,omitempty"`
	Cwd            string            `json:"cwd,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
}

// ProcessResult answers POST .../process. Result is always "exec".
type ProcessResult struct {
	Result string `json:"result"`
	ExecResult
}

// SandboxPath is the body of POST .../fs/read.
type SandboxPath struct {
	Path string `json:"path"`
}

// SandboxFile answers POST .../fs/read.
type SandboxFile struct {
	Path          string `json:"path"`
	ContentBase64 string `json:"content_base64"`
	Size          int64  `json:"size"`
	Mode          string `json:"mode"`
}

// SandboxWrite is the body of POST .../fs/write: content_base64 for bytes,
// or content for UTF-8 text (not both; neither writes an empty file).
type SandboxWrite struct {
	Path          string `json:"path"`
	ContentBase64 string `json:"content_base64,omitempty"`
	Content       string `json:"content,omitempty"`
	Mode          string `json:"mode,omitempty"`
}

// SandboxWritten answers POST .../fs/write.
type SandboxWritten struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
	Mode string `json:"mode,omitempty"`
}
