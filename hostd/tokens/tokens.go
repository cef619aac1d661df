// Package tokens is the sessions' bearer tokens: a token scoped to one
// running session and a few ops, minted by the admin or the session's
// tenant, listed and revoked through the API, and looked up by the API's
// verifier (the Service is an auth.SessionTokens). The store keeps each
// token's SHA-256, never the token. The Service works through the session
// core (hostd/session) and revokes a session's tokens when the core says
// the session was deleted or expired.
//
// Why not in hostd/auth, beside the token formats and the verifier:
// minting needs the core (the session must be running, a token never
// outlives its session, mints and revocations are ledgered), and the core
// imports auth, so auth may not import the core. auth keeps what needs no
// session: the formats, the hashing, the ops and the verifier.
package tokens

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode"
	"unicode/utf8"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/store"
)

// Limits on session tokens.
const (
	MaxTokensPerSession    = apiv1.MaxTokensPerSession
	MaxTokenTTLSeconds     = apiv1.MaxTokenTTLSeconds
	DefaultTokenTTLSeconds = apiv1.DefaultTokenTTLSeconds
	MaxTokenLabel          = apiv1.MaxTokenLabel
)

// The public wire types (package api), kept under these names here.
type (
	TokenRequest = apiv1.TokenRequest
	SessionToken = apiv1.SessionToken
)

// Service mints, lists and revokes the session tokens of one Manager's
// sessions, and finds them for the verifier. Its state is the store's.
type Service struct {
	m *session.Manager
}

var _ auth.SessionTokens = (*Service)(nil)

// New returns the tokens of m's sessions, and has m tell it when a
// session stops running: a deleted or expired session's live tokens are
// revoked and each revocation ledgered.
func New(m *session.Manager) *Service {
	s := &Service{m: m}
	m.OnStop(s.stopped)
	return s
}

func tokenView(t store.TokenRow) SessionToken {
	return SessionToken{ID: t.ID, Session: t.SessionID, Ops: slices.Clone(t.Ops), Label: t.Label,
		CreatedAt: t.CreatedAt.UTC(), ExpiresAt: t.ExpiresAt.UTC()}
}

func checkLabel(l string) error {
	if !utf8.ValidString(l) || utf8.RuneCountInString(l) > MaxTokenLabel {
		return session.BadRequest("label: at most %d characters of UTF-8", MaxTokenLabel)
	}
	for _, r := range l {
		if !unicode.IsPrint(r) {
			return session.BadRequest("label: %q is not a printable character", r)
		}
	}
	return nil
}

// Mint makes a bearer token for one running session and the ops in req.
// The answer carries the token once; the store keeps its SHA-256. Who
// may mint (the admin, the session's tenant) is the API's to check.
func (s *Service) Mint(ctx context.Context, tenant, id string, req TokenRequest) (*SessionToken, error) {
	ops, err := auth.NormalizeOps(req.Ops)
	if err != nil {
		return nil, session.BadRequest("%v", err)
	}
	if req.TTLSeconds == 0 {
		req.TTLSeconds = DefaultTokenTTLSeconds
	}
	if req.TTLSeconds < 1 || req.TTLSeconds > MaxTokenTTLSeconds {
		return nil, session.BadRequest("ttl_seconds %d must be from 1 to %d", req.TTLSeconds, MaxTokenTTLSeconds)
	}
	if err := checkLabel(req.Label); err != nil {
		return nil, err
	}
	ses, _, err := s.m.Running(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if ses.Kind == session.KindSandbox {
		return nil, session.NotSession(id)
	}
	now := s.m.Now().UTC()
	expires := now.Add(time.Duration(req.TTLSeconds) * time.Second)
	if expires.After(ses.ExpiresAt) {
		expires = ses.ExpiresAt.UTC() // never past the session
	}
	if !expires.After(now) {
		return nil, fmt.Errorf("%w: session %s expires now", session.ErrConflict, id)
	}
	tid, secret, hash := auth.NewSessionToken()
	row := store.TokenRow{ID: tid, SessionID: id, Hash: hash, Ops: ops, Label: req.Label,
		CreatedBy: auth.ActorOf(ctx), CreatedAt: now, ExpiresAt: expires}
	err = s.m.Store().PutToken(ctx, row, MaxTokensPerSession)
	if errors.Is(err, store.ErrTooManyTokens) {
		return nil, fmt.Errorf("%w: session %s already has %d live tokens; revoke one first", session.ErrConflict, id, MaxTokensPerSession)
	}
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: session %s", session.ErrNotFound, id)
	}
	if err != nil {
		return nil, err
	}
	data := map[string]any{"id": tid, "ops": ops, "expires_at": expires}
	if req.Label != "" {
		data["label"] = req.Label
	}
	s.m.LedgerAppend(ctx, id, "token.mint", data)
	out := tokenView(row)
	out.Token = secret
	return &out, nil
}

// List lists a session's live tokens: never a token or its hash.
func (s *Service) List(ctx context.Context, tenant, id string) ([]SessionToken, error) {
	if _, err := s.m.LoadSession(ctx, tenant, id); err != nil {
		return nil, err
	}
	rows, err := s.m.Store().ListTokens(ctx, id, s.m.Now())
	if err != nil {
		return nil, err
	}
	out := make([]SessionToken, 0, len(rows))
	for _, r := range rows {
		out = append(out, tokenView(r))
	}
	return out, nil
}

// Revoke revokes one of the session's tokens at once. Revoking a token
// that is already revoked or expired succeeds and changes nothing; an id
// the session never had is ErrNotFound.
func (s *Service) Revoke(ctx context.Context, tenant, id, token string) error {
	if _, err := s.m.LoadSession(ctx, tenant, id); err != nil {
		return err
	}
	if !auth.IsTokenID(token) {
		return fmt.Errorf("%w: session %s has no token %q", session.ErrNotFound, id, token)
	}
	_, revoked, err := s.m.Store().RevokeToken(ctx, id, token, s.m.Now())
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: session %s has no token %s", session.ErrNotFound, id, token)
	}
	if err != nil {
		return err
	}
	if revoked {
		s.m.LedgerAppend(ctx, id, "token.revoke", map[string]any{"id": token, "reason": "revoked"})
	}
	return nil
}

// stopped is the core's stop hook: a session that was deleted or expired
// loses its live tokens, each ledgered with why. A sandbox lost or a
// daemon shutting down revokes nothing (the session's record stays; the
// verifier judges its tokens by the record's state).
func (s *Service) stopped(ctx context.Context, id string, why session.StopReason) {
	if why != session.StopDeleted && why != session.StopExpired {
		return
	}
	gone, err := s.m.Store().RevokeSessionTokens(ctx, id, s.m.Now())
	if err != nil {
		s.m.Logger().Error("revoke session tokens", "session", id, "err", err)
		return
	}
	for _, t := range gone {
		s.m.LedgerAppend(ctx, id, "token.revoke", map[string]any{"id": t.ID, "reason": why.String()})
	}
}

// SessionToken finds a session token for auth.Verifier. A token whose
// session was deleted or has expired counts as revoked, whatever its row
// says.
func (s *Service) SessionToken(ctx context.Context, id string) (auth.SessionTokenRecord, bool, error) {
	t, err := s.m.Store().GetToken(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return auth.SessionTokenRecord{}, false, nil
	}
	if err != nil {
		return auth.SessionTokenRecord{}, false, err
	}
	ended := t.SessionState == session.StateDeleted || t.SessionState == session.StateExpired
	return auth.SessionTokenRecord{ID: t.ID, Session: t.SessionID, Tenant: t.Tenant, Hash: t.Hash, Ops: t.Ops,
		ExpiresAt: t.ExpiresAt, Revoked: t.RevokedAt != nil || ended}, true, nil
}
