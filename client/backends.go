package client

import (
	"context"
	"net/http"

	"paddock.dev/paddock/hostd/session"
)

// Backends lists the backends the daemon enabled (what runtime.backend
// may name), the default first, with their capabilities on its host.
func (c *Client) Backends(ctx context.Context) (*session.BackendList, error) {
	var out session.BackendList
	return &out, c.do(ctx, http.MethodGet, "/v1/backends", nil, nil, &out)
}
