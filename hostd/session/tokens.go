package session

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

var _ auth.SessionTokens = (*Manager)(nil)

func tokenView(t store.TokenRow) SessionToken {
	return SessionToken{ID: t.ID, Session: t.SessionID, Ops: slices.Clone(t.Ops), Label: t.Label,
		CreatedAt: t.CreatedAt.UTC(), ExpiresAt: t.ExpiresAt.UTC()}
}

func checkLabel(l string) error {
	if !utf8.ValidString(l) || utf8.RuneCountInString(l) > MaxTokenLabel {
		return bad("label: at most %d characters of UTF-8", MaxTokenLabel)
	}
	for _, r := range l {
		if !unicode.IsPrint(r) {
			return bad("label: %q is not a printable character", r)
		}
	}
	return nil
}

// MintToken makes a bearer token for one running session and the ops in
// req. The answer carries the token once; the store keeps its SHA-256.
// Who may mint (the admin, the session's tenant) is the API's to check.
func (m *Manager) MintToken(ctx context.Context, tenant, id string, req TokenRequest) (*SessionToken, error) {
	ops, err := auth.NormalizeOps(req.Ops)
	if err != nil {
		return nil, bad("%v", err)
	}
	if req.TTLSeconds == 0 {
		req.TTLSeconds = DefaultTokenTTLSeconds
	}
	if req.TTLSeconds < 1 || req.TTLSeconds > MaxTokenTTLSeconds {
		return nil, bad("ttl_seconds %d must be from 1 to %d", req.TTLSeconds, MaxTokenTTLSeconds)
	}
	if err := checkLabel(req.Label); err != nil {
		return nil, err
	}
	s, _, _, err := m.running(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if s.Kind == KindSandbox {
		return nil, notSessionErr(id)
	}
	now := m.now().UTC()
	expires := now.Add(time.Duration(req.TTLSeconds) * time.Second)
	if expires.After(s.ExpiresAt) {
		expires = s.ExpiresAt.UTC() // never past the session
	}
	if !expires.After(now) {
		return nil, fmt.Errorf("%w: session %s expires now", ErrConflict, id)
	}
	tid, secret, hash := auth.NewSessionToken()
	row := store.TokenRow{ID: tid, SessionID: id, Hash: hash, Ops: ops, Label: req.Label,
		CreatedBy: auth.ActorOf(ctx), CreatedAt: now, ExpiresAt: expires}
	err = m.st.PutToken(ctx, row, MaxTokensPerSession)
	if errors.Is(err, store.ErrTooManyTokens) {
		return nil, fmt.Errorf("%w: session %s already has %d live tokens; revoke one first", ErrConflict, id, MaxTokensPerSession)
	}
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: session %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, err
	}
	data := map[string]any{"id": tid, "ops": ops, "expires_at": expires}
	if req.Label != "" {
		data["label"] = req.Label
	}
	m.ledgerAppend(ctx, id, "token.mint", data)
	out := tokenView(row)
	out.Token = secret
	return &out, nil
}

// Tokens lists a session's live tokens: never a token or its hash.
func (m *Manager) Tokens(ctx context.Context, tenant, id string) ([]SessionToken, error) {
	if _, err := m.LoadSession(ctx, tenant, id); err != nil {
		return nil, err
	}
	rows, err := m.st.ListTokens(ctx, id, m.now())
	if err != nil {
		return nil, err
	}
	out := make([]SessionToken, 0, len(rows))
	for _, r := range rows {
		out = append(out, tokenView(r))
	}
	return out, nil
}

// RevokeToken revokes one of the session's tokens at once. Revoking a
// token that is already revoked or expired succeeds and changes nothing;
// an id the session never had is ErrNotFound.
func (m *Manager) RevokeToken(ctx context.Context, tenant, id, token string) error {
	if _, err := m.LoadSession(ctx, tenant, id); err != nil {
		return err
	}
	if !auth.IsTokenID(token) {
		return fmt.Errorf("%w: session %s has no token %q", ErrNotFound, id, token)
	}
	_, revoked, err := m.st.RevokeToken(ctx, id, token, m.now())
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: session %s has no token %s", ErrNotFound, id, token)
	}
	if err != nil {
		return err
	}
	if revoked {
		m.ledgerAppend(ctx, id, "token.revoke", map[string]any{"id": token, "reason": "revoked"})
	}
	return nil
}

// revokeTokens revokes a session's live tokens when it stops running
// (deleted, expired), ledgering each with why.
func (m *Manager) revokeTokens(ctx context.Context, id, why string) {
	gone, err := m.st.RevokeSessionTokens(ctx, id, m.now())
	if err != nil {
		m.log.Error("revoke session tokens", "session", id, "err", err)
		return
	}
	for _, t := range gone {
		m.ledgerAppend(ctx, id, "token.revoke", map[string]any{"id": t.ID, "reason": why})
	}
}

// SessionToken finds a session token for auth.Verifier. A token whose
// session was deleted or has expired counts as revoked, whatever its row
// says.
func (m *Manager) SessionToken(ctx context.Context, id string) (auth.SessionTokenRecord, bool, error) {
	t, err := m.st.GetToken(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return auth.SessionTokenRecord{}, false, nil
	}
	if err != nil {
		return auth.SessionTokenRecord{}, false, err
	}
	ended := t.SessionState == StateDeleted || t.SessionState == StateExpired
	return auth.SessionTokenRecord{ID: t.ID, Session: t.SessionID, Tenant: t.Tenant, Hash: t.Hash, Ops: t.Ops,
		ExpiresAt: t.ExpiresAt, Revoked: t.RevokedAt != nil || ended}, true, nil
}
