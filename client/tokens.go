package client

import (
	"context"
	"net/http"
	"net/url"

	"paddock.dev/paddock/api"
)

// MintToken makes a session token for the ops in req. The answer's Token
// is the only copy there will ever be: the daemon keeps its hash.
func (c *Client) MintToken(ctx context.Context, id string, req api.TokenRequest) (*api.SessionToken, error) {
	var out api.SessionToken
	return &out, c.do(ctx, http.MethodPost, sp(id)+"/tokens", nil, req, &out)
}

// Tokens lists a session's live tokens (ids, ops and expiry; never a
// token).
func (c *Client) Tokens(ctx context.Context, id string) ([]api.SessionToken, error) {
	var out struct {
		Tokens []api.SessionToken `json:"tokens"`
	}
	return out.Tokens, c.do(ctx, http.MethodGet, sp(id)+"/tokens", nil, nil, &out)
}

// RevokeToken revokes one session token by its id (tok-…). Revoking one
// that is already revoked or expired succeeds.
func (c *Client) RevokeToken(ctx context.Context, id, tokenID string) error {
	return c.do(ctx, http.MethodDelete, sp(id)+"/tokens/"+url.PathEscape(tokenID), nil, nil, nil)
}

// WhoAmI says what the client's token is: admin, tenant or session token.
func (c *Client) WhoAmI(ctx context.Context) (*api.WhoAmI, error) {
	var out api.WhoAmI
	return &out, c.do(ctx, http.MethodGet, "/v1/whoami", nil, nil, &out)
}
