package client

import (
	"context"
	"net/http"
	"net/url"

	"paddock.dev/paddock/api"
)

// Grant gives a session a credential the egress proxy adds to its
// requests to the named hosts; the answer never carries the value.
func (c *Client) Grant(ctx context.Context, id string, req api.GrantRequest) (*api.Grant, error) {
	var out api.Grant
	return &out, c.do(ctx, http.MethodPost, sp(id)+"/grants", nil, req, &out)
}

// Grants lists a session's live grants (without values).
func (c *Client) Grants(ctx context.Context, id string) ([]api.Grant, error) {
	var out struct {
		Grants []api.Grant `json:"grants"`
	}
	return out.Grants, c.do(ctx, http.MethodGet, sp(id)+"/grants", nil, nil, &out)
}

// Ungrant revokes one grant, or every grant of the session when grant is
// "".
func (c *Client) Ungrant(ctx context.Context, id, grant string) error {
	p := sp(id) + "/grants"
	if grant != "" {
		p += "/" + url.PathEscape(grant)
	}
	return c.do(ctx, http.MethodDelete, p, nil, nil, nil)
}
