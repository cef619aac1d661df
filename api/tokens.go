package api

import (
	"slices"
	"time"
)

// Limits on session tokens.
const (
	MaxTokensPerSession    = 32
	MaxTokenTTLSeconds     = 86400
	DefaultTokenTTLSeconds = 3600
	MaxTokenLabel          = 64 // characters
)

// Token formats. Every Paddock token starts with TokenPrefix.
//
//	session token: pdk_tok-<16 hex: public id>_<64 hex: 256 random bits>
//	tenant token:  pdk_tn_<64 hex: 256 random bits>
//	admin token:   pdk_<48 hex> when the daemon generates it, or any
//	               PADDOCK_ADMIN_TOKEN of 16 characters or more
const (
	TokenPrefix          = "pdk_"
	SessionTokenIDPrefix = "tok-"
)

// Kinds of caller (WhoAmI.Kind).
const (
	KindAdmin   = "admin"   // the daemon's admin token: every session, every route
	KindTenant  = "tenant"  // a tenant token: that tenant's sessions and sandboxes
	KindSession = "session" // a session token: one session, the ops it was minted with
)

// Operations a session token can be granted (TokenRequest.Ops).
const (
	OpRead       = "read"        // the session record, ledger, trajectory, artifacts, probe
	OpExec       = "exec"        // exec and exec/stream
	OpJobs       = "jobs"        // background jobs: start, list, read, stdin, kill, stream
	OpFilesRead  = "files.read"  // list, read and ranged read of files
	OpFilesWrite = "files.write" // write and remove files, resumable uploads
	OpGit        = "git"         // git status, diff, log, commit, branch
	OpCheckpoint = "checkpoint"  // take a checkpoint (restoring one is not grantable)
	OpPreview    = "preview"     // make and delete the session's preview URLs
)

var grantable = []string{OpRead, OpExec, OpJobs, OpFilesRead, OpFilesWrite, OpGit, OpCheckpoint, OpPreview}

// GrantableOps lists the ops a session token can carry, in their
// canonical order.
func GrantableOps() []string { return slices.Clone(grantable) }

// TokenRequest is the body of POST .../tokens.
type TokenRequest struct {
	Ops        []string `json:"ops"`
	TTLSeconds int      `json:"ttl_seconds,omitempty"`
	Label      string   `json:"label,omitempty"`
}

// SessionToken is a session token as the API shows it. Token, the secret,
// is in the answer to the mint only; nothing keeps it.
type SessionToken struct {
	ID        string    `json:"id"`
	Token     string    `json:"token,omitempty"`
	Session   string    `json:"session"`
	Ops       []string  `json:"ops"`
	Label     string    `json:"label"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// WhoAmI is the answer to GET /v1/whoami.
type WhoAmI struct {
	Kind      string     `json:"kind"`
	Tenant    string     `json:"tenant,omitempty"`
	Session   string     `json:"session,omitempty"`
	TokenID   string     `json:"token_id,omitempty"`
	Ops       []string   `json:"ops,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}
