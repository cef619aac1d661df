package auth

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// SessionTokenRecord is what the daemon keeps of a session token.
type SessionTokenRecord struct {
	ID      string
	Session string
	// Tenant is the session's tenant ("" for the admin's sessions).
	Tenant    string
	Hash      [32]byte
	Ops       []string
	ExpiresAt time.Time
	// Revoked: revoked by a call, or its session was deleted or expired.
	Revoked bool
}

// SessionTokens finds session tokens by their public id. found is false
// for an id with no record.
type SessionTokens interface {
	SessionToken(ctx context.Context, id string) (rec SessionTokenRecord, found bool, err error)
}

// Verifier turns bearer tokens into identities. It is safe for concurrent
// use; the tenants can be replaced while it runs (SetTenants, on SIGHUP).
type Verifier struct {
	admin    [32]byte
	tenants  atomic.Pointer[Tenants]
	sessions SessionTokens
	now      func() time.Time
}

// NewVerifier returns a Verifier for the admin token with this SHA-256,
// no tenants, and session tokens from sessions (nil: none).
func NewVerifier(adminHash [32]byte, sessions SessionTokens) *Verifier {
	return &Verifier{admin: adminHash, sessions: sessions, now: time.Now}
}

// SetSessionTokens sets where session tokens are found (hostd/tokens'
// Service; nil: none, so no session token verifies). Set it before the
// verifier is used.
func (v *Verifier) SetSessionTokens(sessions SessionTokens) { v.sessions = sessions }

// SetClock replaces the clock expiry is judged by (tests).
func (v *Verifier) SetClock(now func() time.Time) { v.now = now }

// SetTenants replaces the tenants (nil: none). A tenant whose token hash
// is the admin token's is refused, and the old tenants stay.
func (v *Verifier) SetTenants(t *Tenants) error {
	if t != nil {
		for i, h := range t.hashes {
			if subtle.ConstantTimeCompare(h[:], v.admin[:]) == 1 {
				return fmt.Errorf("tenant %s has the admin token's hash; give it a token of its own", t.names[i])
			}
		}
	}
	v.tenants.Store(t)
	return nil
}

// Tenants returns the tenants in use.
func (v *Verifier) Tenants() *Tenants { return v.tenants.Load() }

// BearerToken returns the token of an "Authorization: Bearer <token>"
// header.
func BearerToken(r *http.Request) (string, bool) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	tok = strings.TrimSpace(tok)
	if !ok || tok == "" {
		return "", false
	}
	return tok, true
}

// VerifyRequest verifies the request's bearer token.
func (v *Verifier) VerifyRequest(r *http.Request) (Identity, error) {
	tok, ok := BearerToken(r)
	if !ok {
		return Identity{}, ErrUnauthenticated
	}
	return v.Verify(r.Context(), tok)
}

// Verify returns the identity token stands for. Errors wrap
// ErrUnauthenticated, except a failure to read session tokens.
func (v *Verifier) Verify(ctx context.Context, token string) (Identity, error) {
	if token == "" || len(token) > MaxTokenBytes {
		return Identity{}, ErrUnauthenticated
	}
	h := HashToken(token)
	if subtle.ConstantTimeCompare(h[:], v.admin[:]) == 1 {
		return Admin(), nil
	}
	if t := v.tenants.Load(); t != nil {
		// Every hash is compared, whichever matches.
		match := -1
		for i := range t.hashes {
			if subtle.ConstantTimeCompare(h[:], t.hashes[i][:]) == 1 {
				match = i
			}
		}
		if match >= 0 {
			return Identity{Kind: KindTenant, Tenant: t.names[match]}, nil
		}
	}
	id, ok := SessionTokenID(token)
	if !ok || v.sessions == nil {
		return Identity{}, ErrUnauthenticated
	}
	rec, found, err := v.sessions.SessionToken(ctx, id)
	if err != nil {
		return Identity{}, fmt.Errorf("verify session token %s: %w", id, err)
	}
	if !found || subtle.ConstantTimeCompare(h[:], rec.Hash[:]) != 1 {
		return Identity{}, ErrUnauthenticated
	}
	if err := v.live(rec); err != nil {
		return Identity{}, err
	}
	return Identity{Kind: KindSession, Tenant: rec.Tenant, Session: rec.Session, TokenID: rec.ID,
		Ops: slices.Clone(rec.Ops), ExpiresAt: rec.ExpiresAt.UTC()}, nil
}

// live says whether a session token may still act: not revoked, not
// expired, and its session's tenant (if any) still one of the daemon's
// tenants (a tenant taken out of the tenants file takes its sessions'
// tokens with it).
func (v *Verifier) live(rec SessionTokenRecord) error {
	if rec.Revoked {
		return fmt.Errorf("%w: session token %s was revoked", ErrUnauthenticated, rec.ID)
	}
	if !v.now().Before(rec.ExpiresAt) {
		return fmt.Errorf("%w: session token %s expired at %s", ErrUnauthenticated, rec.ID, rec.ExpiresAt.UTC().Format(time.RFC3339))
	}
	if rec.Tenant != "" && !v.tenants.Load().has(rec.Tenant) {
		return fmt.Errorf("%w: session token %s belongs to tenant %s, which this daemon no longer has", ErrUnauthenticated, rec.ID, rec.Tenant)
	}
	return nil
}

// Recheck says whether a session token verified earlier is still live
// (not revoked, not expired); other identities always are. Long calls
// (streams, long polls) use it to stop once their token is revoked.
func (v *Verifier) Recheck(ctx context.Context, id Identity) error {
	if id.Kind != KindSession {
		return nil
	}
	if v.sessions == nil {
		return ErrUnauthenticated
	}
	rec, found, err := v.sessions.SessionToken(ctx, id.TokenID)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("%w: session token %s no longer exists", ErrUnauthenticated, id.TokenID)
	}
	return v.live(rec)
}
