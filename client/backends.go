package client

import (
	"context"
	"net/http"

	"paddock.dev/paddock/api"
)

// Backends lists the backends the daemon enabled (what runtime.backend
// may name), the default first, with their capabilities on its host.
func (c *Client) Backends(ctx context.Context) (*api.BackendList, error) {
	var out api.BackendList
	return &out, c.do(ctx, http.MethodGet, "/v1/backends", nil, nil, &out)
}
