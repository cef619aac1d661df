package client

import (
	"context"
	"net/http"
	"net/url"

	"paddock.dev/paddock/api"
)

// CreatePreview makes an expiring URL that reaches port in the session's
// sandbox. The answer carries the token and the URL (PreviewURL makes it
// absolute) this once; nothing shows them again.
func (c *Client) CreatePreview(ctx context.Context, id string, req api.PreviewRequest) (*api.Preview, error) {
	var out api.Preview
	return &out, c.do(ctx, http.MethodPost, sp(id)+"/preview", nil, req, &out)
}

// Previews lists a session's live previews (without tokens or URLs).
func (c *Client) Previews(ctx context.Context, id string) ([]api.Preview, error) {
	var out struct {
		Previews []api.Preview `json:"previews"`
	}
	return out.Previews, c.do(ctx, http.MethodGet, sp(id)+"/previews", nil, nil, &out)
}

// DeletePreview revokes one preview at once.
func (c *Client) DeletePreview(ctx context.Context, id, preview string) error {
	return c.do(ctx, http.MethodDelete, sp(id)+"/preview/"+url.PathEscape(preview), nil, nil, nil)
}

// PreviewURL is a preview's URL made absolute against the daemon's
// address (a preview's url is relative to it).
func (c *Client) PreviewURL(p *api.Preview) string {
	if p == nil || p.URL == "" {
		return ""
	}
	return c.base + p.URL
}
