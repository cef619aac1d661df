package session

// The core's side of sandboxes (POST /v1/sandboxes). A sandbox is stored
// as a session record of kind KindSandbox, so creating it, its machine,
// the ledger, the sweep and adoption are the core's own code; the
// sandbox routes themselves (create, get, list, delete, process, fs/read
// and fs/write) and the removal of a sandbox at its TTL are the sibling
// package hostd/sandboxes. What stays here is what the core must know to
// keep the two kinds apart (the id prefix, the 404 of a sandbox's id on a
// session route) and the hooks the sibling registers (SetSandboxHooks)
// where the sweep and adoption meet a sandbox record.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/hostd/store"
)

// KindSandbox marks a session record that is a sandbox.
const KindSandbox = apiv1.KindSandbox

// SandboxIDPrefix starts every sandbox id and no session id.
const SandboxIDPrefix = apiv1.SandboxIDPrefix

// notKindError is a 404 for a sandbox's id on a session route.
type notKindError struct{ id, is, use string }

func (e *notKindError) Error() string {
	return fmt.Sprintf("%v: %s is %s; use %s", ErrNotFound, e.id, e.is, e.use)
}
func (e *notKindError) Unwrap() error { return ErrNotFound }

func notSessionErr(id string) error {
	return &notKindError{id, "a sandbox, not an agent session", "/v1/sandboxes/" + id}
}

// IsSandboxID reports whether id has the form only sandboxes are given, so
// the session routes can answer 404 without reading the record.
func IsSandboxID(id string) bool { return strings.HasPrefix(id, SandboxIDPrefix) }

// NotSession is the error a session route answers for a sandbox's id.
func NotSession(id string) error { return notSessionErr(id) }

// newIDFor mints the id of a new record of kind.
func newIDFor(kind string) string {
	if kind != KindSandbox {
		return newID()
	}
	var b [8]byte
	rand.Read(b[:])
	return SandboxIDPrefix + hex.EncodeToString(b[:])
}

// recordKind reads the kind out of a stored record.
func recordKind(raw []byte) string {
	var k struct {
		Session struct {
			Kind string `json:"kind"`
		} `json:"session"`
	}
	json.Unmarshal(raw, &k)
	return k.Session.Kind
}

// SandboxHooks are what the sandboxes sibling (hostd/sandboxes) does
// where the core's sweep and adoption meet a sandbox record: a sandbox
// is removed at its TTL, not kept as expired like a session.
// hostd/daemon sets them with SetSandboxHooks. Without them (the core's
// own tests) an expired sandbox is swept like a session: its machine
// stops and its record stays, marked expired, so nothing runs past its
// TTL either way.
type SandboxHooks interface {
	// Expired is told of sandbox record r, which the sweep found past its
	// TTL (running, or marked expired by an earlier sweep that could not
	// remove it), and removes it. It runs in the sweep, with no caller
	// in ctx; it may call MarkExpired and Delete, never Sweep.
	Expired(ctx context.Context, r store.SessionRow)
	// Adopted is told of a running sandbox a restarted daemon adopted
	// (Reattach), once its machine is this daemon's again.
	Adopted(id string, expiresAt time.Time)
}

type sandboxHooksSlot struct {
	mu sync.RWMutex
	h  SandboxHooks
}

// SetSandboxHooks gives the Manager the sandboxes sibling's hooks. Set
// them before the daemon adopts, sweeps or serves.
func (m *Manager) SetSandboxHooks(h SandboxHooks) {
	m.sbx.mu.Lock()
	defer m.sbx.mu.Unlock()
	m.sbx.h = h
}

func (m *Manager) sandboxHooks() SandboxHooks {
	m.sbx.mu.RLock()
	defer m.sbx.mu.RUnlock()
	return m.sbx.h
}

// sweepSandbox hands r to the sandboxes sibling if it is a sandbox past
// its TTL, and reports whether it did, so Sweep leaves it alone.
func (m *Manager) sweepSandbox(ctx context.Context, r store.SessionRow, now time.Time) bool {
	// The id prefix saves decoding every expired session's record.
	if !IsSandboxID(r.ID) || !now.After(r.ExpiresAt) || recordKind(r.Record) != KindSandbox {
		return false
	}
	h := m.sandboxHooks()
	if h == nil {
		return false // swept like a session
	}
	h.Expired(ctx, r)
	return true
}

// sandboxAdopted tells the sandboxes sibling of a sandbox Reattach
// adopted.
func (m *Manager) sandboxAdopted(s *Session) {
	if h := m.sandboxHooks(); h != nil {
		h.Adopted(s.ID, s.ExpiresAt)
	}
}
