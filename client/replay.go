package client

import (
	"context"
	"net/http"

	"paddock.dev/paddock/api"
)

// Replay runs session id's exec commands, in order, in req.Target (or,
// with req.DryRun, lists them). A step the target refuses or holds stops
// the replay without an error: the answer's Stopped carries the target's
// answer, and NextSince says where to go on.
func (c *Client) Replay(ctx context.Context, id string, req api.ReplayRequest) (*api.ReplayResult, error) {
	var out api.ReplayResult
	return &out, c.do(ctx, http.MethodPost, sp(id)+"/replay", nil, req, &out)
}
