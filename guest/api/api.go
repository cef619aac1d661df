// Package api holds the wire types of the guest agent protocol: HTTP with JSON
// bodies over one byte stream per sandbox (a unix socket for procbox, vsock or
// virtio-serial for VMs). The host side (guest/client) and the agent
// (guest/agent) both use these types, so the two cannot drift apart.
//
// Byte slices marshal as base64 in JSON, so command output and file content
// are binary-safe.
package api

import (
	"paddock.dev/paddock/errdefs"
	"strconv"
	"time"
)

// Version is the protocol version the agent reports from /v1/health.
const Version = 2

// VersionOOMKills is the first version whose health answer carries
// OOMKills; a host treats the field as absent from an older agent.
const VersionOOMKills = 2

// Limits the agent enforces on whatever the host sends.
const (
	DefaultMaxOutputBytes = 16 << 20  // per stream, exec and jobs
	MaxMaxOutputBytes     = 256 << 20 // the largest max_output_bytes accepted
	MaxWaitMillis         = 25000     // long poll on job reads
	MaxRangeBytes         = 4 << 20   // one ranged read
	MaxPartBytes          = 4 << 20   // one upload chunk
	MaxUploadBytes        = 2 << 30   // one assembled upload
	MaxFileWriteBytes     = 8 << 20   // one PUT /v1/files/content
	MaxFileReadBytes      = 8 << 20   // one GET /v1/files/content (use ranges above)
	MaxStdinWriteBytes    = 48 << 10  // one POST /v1/jobs/{id}/stdin
	MaxExecStdinBytes     = 8 << 20   // stdin given inline to exec
	MaxTimeoutSeconds     = 24 * 3600 // any command timeout
	MaxManifestFiles      = 200000    // entries in one manifest
	MaxListEntries        = 10000     // entries in one directory listing
	MaxArgvBytes          = 256 << 10 // argv + env of one command
	MaxJobs               = 256       // jobs the supervisor remembers at once
)

// Error is the body of every non-2xx answer from the agent.
type Error struct {
	Error string `json:"error"`
	// Code is a stable machine-readable reason: a kind's code of errdefs
	// (invalid_argument, not_found, conflict, too_large, forbidden,
	// bad_gateway, internal), or one of the Code* refusals of the files
	// routes below.
	Code string `json:"code"`
}

// Refusals of the files routes (403), beside the generic "forbidden"
// (errdefs lists every code).
const (
	// CodeSystemPath: the path lies under one of SystemDirs (or would
	// replace or remove one).
	CodeSystemPath = errdefs.CodeSystemPath
	// CodeExecProgram: the path is a program the call's Exec list names
	// (the session's execute allow-list), a link leading to one, or a
	// directory holding one.
	CodeExecProgram = errdefs.CodeExecProgram
	// CodePermission: the guest user may not do this (file permissions);
	// the files routes act with the guest user's rights.
	CodePermission = errdefs.CodePermissionDenied
	// CodeAgentProcess: the path is the guest agent's own /proc entry
	// (/proc/self, /proc/thread-self, /proc/<agent pid> or one of its
	// threads'), or leads there through a link.
	CodeAgentProcess = errdefs.CodeAgentProcess
)

// SystemDirs are the image's system directories. The files routes (write,
// delete, upload complete, workspace setup) never create, replace or
// remove anything in them, whatever the permissions say: they hold the
// programs an execute allow-list names, the shell every command starts
// with, the dynamic loader and the agent itself (/.paddock in a VM).
// Checked on the path as given, on the path once its links are followed,
// and by the identity of the directory the call writes in.
var SystemDirs = []string{"/bin", "/boot", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/sbin", "/sys", "/usr", "/.paddock"}

// MaxExecList bounds the Exec list of one write, delete (query "exec",
// repeated) or upload complete: the files of the session's execute
// allow-list (a process policy has at most 64 allow and 64 ask patterns).
// The call may not create, replace or remove one of them, a symbolic
// link on the way to one, or a directory holding one (403, code
// exec_program), so a file write never becomes a program the policy lets
// start. Programs live in SystemDirs as a rule; the list matters for one
// named by an absolute path elsewhere (such as /workspace/bin/tool).
const MaxExecList = 256

// Health answers GET /v1/health.
type Health struct {
	Version  int    `json:"version"`
	PID      int    `json:"pid"`
	Hostname string `json:"hostname"`
	// OOMKills is the oom_kill count of the kernel the agent runs on
	// (/proc/vmstat): how many processes it killed for want of memory
	// since it booted. In a VM that is the guest's own kernel, which the
	// host cannot see otherwise; under procbox it is the host's and the
	// host does not use it. Absent when the kernel does not count them
	// (before Linux 4.13) and from agents older than version 2.
	OOMKills *int64 `json:"oom_kills,omitempty"`
}

// Capabilities answers GET /v1/capabilities: what this agent can do.
type Capabilities struct {
	JobsV2 bool `json:"jobs_v2"`
	PTY    bool `json:"pty"`
	// Confinement is what `paddock-guest confine` can enforce here.
	Confinement ConfineSupport `json:"confinement"`
}

// ConfineSupport describes the kernel features confinement can use.
type ConfineSupport struct {
	LandlockABI int  `json:"landlock_abi"` // 0 when Landlock is unavailable
	Seccomp     bool `json:"seccomp"`
}

// Confinement is the policy `paddock-guest confine` applies to itself
// before it execs the command. The zero value means "no confinement".
type Confinement struct {
	// Enforcement is "strict" (refuse to run when the kernel cannot
	// enforce a required right) or "best-effort" (run and report).
	Enforcement string `json:"enforcement,omitempty"`
	// ReadOnly are paths readable (and executable unless Exec is set).
	// System directories are added by the agent.
	ReadOnly []string `json:"read_only,omitempty"`
	// ReadWrite are paths readable and writable (workspace, /tmp, volumes,
	// the policy's write paths).
	ReadWrite []string `json:"read_write,omitempty"`
	// Exec, when non-empty, is the executable allow-list: only these files
	// (and the shell, true and the dynamic loader) may be executed.
	Exec []string `json:"exec,omitempty"`
	// Seccomp turns on the deny-list filter (default true when any
	// confinement is asked for).
	Seccomp *bool `json:"seccomp,omitempty"`
	// Rlimits by name: nofile, nproc, fsize, core, as, cpu, stack.
	Rlimits map[string]uint64 `json:"rlimits,omitempty"`
}

// Enabled reports whether any confinement was asked for.
func (c *Confinement) Enabled() bool {
	return c != nil && (c.Enforcement != "" || len(c.ReadOnly) > 0 || len(c.ReadWrite) > 0 || len(c.Exec) > 0 || c.Seccomp != nil || len(c.Rlimits) > 0)
}

// The confine protocol: how the agent starts a confined command, and what
// `paddock-guest confine` must do. The agent runs
//
//	<confine binary> confine --policy-fd 3 --report-fd 4 -- /abs/path/of/cmd args...
//
// with two extra descriptors besides stdin, stdout and stderr:
//
//   - ConfinePolicyFD (3) is the read end of a pipe carrying the JSON of one
//     Confinement. Confine reads it to EOF (at most ConfineMaxPolicyBytes)
//     and closes it.
//   - ConfineReportFD (4) is the write end of a pipe. Once the policy is in
//     force, confine writes the JSON of one ConfineReport (at most
//     ConfineMaxReportBytes) and marks the descriptor close-on-exec, then
//     calls execve, so the agent sees EOF when the command starts.
//
// When confine refuses (strict enforcement the kernel cannot give, a bad
// policy, an exec that fails), it writes no report, prints the reason on
// stderr and exits with ConfineExitRefused. No report plus that exit status
// is how the agent tells a refusal from a command that itself exits 126.
// argv[0] after "--" is always an absolute path: the agent resolves it
// against the command's PATH before it starts confine.
const (
	ConfineSubcommand     = "confine"
	ConfinePolicyFlag     = "--policy-fd"
	ConfineReportFlag     = "--report-fd"
	ConfinePolicyFD       = 3
	ConfineReportFD       = 4
	ConfineExitRefused    = 126
	ConfineMaxPolicyBytes = 1 << 20
	ConfineMaxReportBytes = 64 << 10
)

// ConfineArgs returns the arguments (after the binary's name) that start
// argv under confinement, following the protocol above.
func ConfineArgs(argv []string) []string {
	args := []string{ConfineSubcommand,
		ConfinePolicyFlag, strconv.Itoa(ConfinePolicyFD),
		ConfineReportFlag, strconv.Itoa(ConfineReportFD), "--"}
	return append(args, argv...)
}

// ConfineReport says what was enforced for one command.
type ConfineReport struct {
	LandlockABI   int      `json:"landlock_abi"`
	Landlock      bool     `json:"landlock"`       // a ruleset was applied
	LandlockRules int      `json:"landlock_rules"` // path rules in it
	ExecAllowlist bool     `json:"exec_allowlist"`
	Seccomp       bool     `json:"seccomp"`
	NoNewPrivs    bool     `json:"no_new_privs"`
	Rlimits       []string `json:"rlimits,omitempty"`
	// Missing lists rights the kernel could not enforce (best-effort mode).
	Missing []string `json:"missing,omitempty"`
}

// Command is what to run: an argv, or a shell line run by /bin/sh -c.
// Exactly one of Argv and Shell is set.
type Command struct {
	Argv  []string `json:"argv,omitempty"`
	Shell string   `json:"shell,omitempty"`
	Cwd   string   `json:"cwd,omitempty"`
	// Env entries are KEY=VALUE and are added to the agent's base
	// environment (PATH, HOME, LANG, TERM).
	Env []string `json:"env,omitempty"`
	// TimeoutSeconds kills the whole process group when reached (0: none
	// for jobs, 300 for exec).
	TimeoutSeconds int          `json:"timeout_seconds,omitempty"`
	MaxOutputBytes int64        `json:"max_output_bytes,omitempty"`
	Confine        *Confinement `json:"confine,omitempty"`
	// Git, on an exec, runs git with a config the host gives instead of
	// the repository's own (see GitCommand); Argv and Shell stay empty.
	Git *GitCommand `json:"git,omitempty"`
}

// ExecRequest is the body of POST /v1/exec.
type ExecRequest struct {
	Command
	Stdin []byte `json:"stdin,omitempty"`
}

// ExecResult answers POST /v1/exec.
type ExecResult struct {
	ExitCode        int            `json:"exit_code"` // -1 when killed by a signal
	Signal          string         `json:"signal,omitempty"`
	TimedOut        bool           `json:"timed_out"`
	Stdout          []byte         `json:"stdout"`
	Stderr          []byte         `json:"stderr"`
	StdoutTruncated bool           `json:"stdout_truncated"`
	StderrTruncated bool           `json:"stderr_truncated"`
	StdoutDropped   int64          `json:"stdout_dropped_bytes"`
	StderrDropped   int64          `json:"stderr_dropped_bytes"`
	DurationMillis  int64          `json:"duration_ms"`
	Confinement     *ConfineReport `json:"confinement,omitempty"`
}

// TruncationMarker is appended to a stream that hit its cap.
const TruncationMarker = "\n[paddock: output truncated]\n"

// Job states.
const (
	JobRunning  = "running"
	JobExited   = "exited"
	JobKilled   = "killed"   // stopped by a signal request
	JobSignaled = "signaled" // died of a signal nobody asked for
	JobTimedOut = "timed_out"
)

// JobRequest is the body of POST /v1/jobs.
type JobRequest struct {
	Command
	Stdin bool `json:"stdin,omitempty"` // give the job a stdin pipe
}

// Job is one supervised job.
type Job struct {
	ID           string         `json:"id"`
	Argv         []string       `json:"argv,omitempty"`
	Shell        string         `json:"shell,omitempty"`
	State        string         `json:"state"`
	ExitCode     *int           `json:"exit_code,omitempty"`
	Signal       string         `json:"signal,omitempty"`
	PID          int            `json:"pid"`
	StartedAt    time.Time      `json:"started_at"`
	EndedAt      *time.Time     `json:"ended_at,omitempty"`
	StdoutBytes  int64          `json:"stdout_bytes"`  // retained
	StderrBytes  int64          `json:"stderr_bytes"`  // retained
	DroppedBytes int64          `json:"dropped_bytes"` // past the cap, both streams
	Stdin        bool           `json:"stdin"`
	StdinClosed  bool           `json:"stdin_closed"`
	Confinement  *ConfineReport `json:"confinement,omitempty"`
}

// JobRead answers GET /v1/jobs/{id}?offset=&stderr_offset=&wait_ms=&limit=.
type JobRead struct {
	Job
	Output           []byte `json:"output"` // stdout from offset
	NextOffset       int64  `json:"next_offset"`
	Stderr           []byte `json:"stderr"`
	StderrNextOffset int64  `json:"stderr_next_offset"`
	// More is true when more retained output is available right now.
	More bool `json:"more"`
	// EOF is true when the job has ended and both streams were read to
	// their end.
	EOF       bool `json:"eof"`
	Truncated bool `json:"truncated"` // some output was dropped past the cap
}

// JobStdin is the body of POST /v1/jobs/{id}/stdin.
type JobStdin struct {
	Data  []byte `json:"data,omitempty"`
	Close bool   `json:"close,omitempty"`
}

// File types in listings.
const (
	TypeFile    = "file"
	TypeDir     = "dir"
	TypeSymlink = "symlink"
	TypeOther   = "other"
)

// FileInfo is one entry of a listing or a stat.
type FileInfo struct {
	Name   string    `json:"name"`
	Path   string    `json:"path"`
	Type   string    `json:"type"`
	Size   int64     `json:"size"`
	Mode   string    `json:"mode"` // octal permission bits, e.g. "0644"
	MTime  time.Time `json:"mtime"`
	Target string    `json:"target,omitempty"` // symlink target
}

// Listing answers GET /v1/files?path=: a directory listing (Kind "dir")
// or a single stat (Kind "file").
type Listing struct {
	Kind      string     `json:"kind"`
	Path      string     `json:"path"`
	Entries   []FileInfo `json:"entries"`
	Truncated bool       `json:"truncated"`
	// Self is the stat of Path itself (not following a final symlink).
	Self *FileInfo `json:"self,omitempty"`
}

// FileContent is returned by GET /v1/files/content and sent to PUT.
type FileContent struct {
	Path    string `json:"path"`
	Content []byte `json:"content"`
	Mode    string `json:"mode,omitempty"`    // octal, default 0644 on write
	Parents *bool  `json:"parents,omitempty"` // create parents (default true)
	// Deny, on a write, lists directories the write must not land under
	// (see MaxDeny).
	Deny []string `json:"deny,omitempty"`
	// Exec, on a write, lists the programs the write may not create or
	// replace (see MaxExecList).
	Exec []string `json:"exec,omitempty"`
}

// MaxDeny bounds the Deny list of one write, delete (query "deny",
// repeated) or upload complete: absolute, clean directory paths under
// which the call must not create, replace or remove anything, checked by
// the identity of the directory it writes in, so a symbolic link swapped
// on the way cannot lead the write there. A Deny directory that does not
// exist denies nothing. The agent answers 403 (code forbidden) when the
// target lies under one or is one.
const MaxDeny = 8

// FileRange answers GET /v1/files/range?path=&offset=&length=&checksum=.
type FileRange struct {
	Path   string `json:"path"`
	Offset int64  `json:"offset"`
	Data   []byte `json:"data"`
	Size   int64  `json:"size"` // the whole file
	EOF    bool   `json:"eof"`
	SHA256 string `json:"sha256,omitempty"` // of the whole file, on request
}

// UploadPart answers PUT /v1/uploads/{id}?offset=N (raw body).
type UploadPart struct {
	ID       string `json:"id"`
	Received int64  `json:"received"` // bytes stored contiguously from 0
}

// UploadComplete is the body of POST /v1/uploads/{id}/complete.
type UploadComplete struct {
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	SHA256  string `json:"sha256,omitempty"`
	Mode    string `json:"mode,omitempty"`
	Parents *bool  `json:"parents,omitempty"`
	// Deny: directories the upload must not land under (see MaxDeny).
	Deny []string `json:"deny,omitempty"`
	// Exec: programs the upload may not create or replace (see
	// MaxExecList).
	Exec []string `json:"exec,omitempty"`
}

// WorkspaceSetup is the body of POST /v1/workspace: the host's own call
// at create, never a tenant's. The agent makes Path and its missing
// parents as root, hands each directory it makes to the guest user, and
// leaves one that exists as it is; a path under SystemDirs is refused.
// It answers the directory's FileInfo.
type WorkspaceSetup struct {
	Path string `json:"path"`
}

// UploadResult answers a successful complete.
type UploadResult struct {
	Path     string `json:"path"`
	Size     int64  `json:"size"`
	SHA256   string `json:"sha256"`
	Verified bool   `json:"verified"` // a checksum was given and matched
}

// Probe answers GET /v1/probe.
type Probe struct {
	// Tools maps a tool name to the path it was found at; missing tools
	// are absent.
	Tools    map[string]string `json:"tools"`
	ReadyFor map[string]bool   `json:"ready_for"`
	OS       string            `json:"os"`
	Arch     string            `json:"arch"`
}

// ManifestRequest is the body of POST /v1/manifest.
type ManifestRequest struct {
	Path     string `json:"path"`
	MaxFiles int    `json:"max_files,omitempty"`
	// Hash computes sha256 of regular files (default true).
	Hash *bool `json:"hash,omitempty"`
}

// ManifestEntry is one file of a manifest. Path is relative to the root
// of the manifest.
type ManifestEntry struct {
	Path   string `json:"path"`
	Type   string `json:"type"`
	Size   int64  `json:"size"`
	Mode   string `json:"mode"`
	SHA256 string `json:"sha256,omitempty"`
	Target string `json:"target,omitempty"`
}

// Manifest answers POST /v1/manifest.
type Manifest struct {
	Path      string          `json:"path"`
	Entries   []ManifestEntry `json:"entries"`
	Truncated bool            `json:"truncated"`
}

// PTYResize is the text frame a client sends to resize the terminal:
// {"resize":{"cols":N,"rows":N}}.
type PTYResize struct {
	Resize struct {
		Cols uint16 `json:"cols"`
		Rows uint16 `json:"rows"`
	} `json:"resize"`
}
