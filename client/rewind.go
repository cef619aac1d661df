package client

import (
	"context"
	"net/http"

	"paddock.dev/paddock/api"
)

// Rewind is a session's rewind config and its points, oldest first.
func (c *Client) Rewind(ctx context.Context, id string) (*api.Rewind, error) {
	var out api.Rewind
	return &out, c.do(ctx, http.MethodGet, sp(id)+"/rewind", nil, nil, &out)
}

// RewindConfig changes a session's rewind settings (turn it on with
// Enabled); the fields left nil keep their values.
func (c *Client) RewindConfig(ctx context.Context, id string, req api.RewindConfigRequest) (*api.Rewind, error) {
	var out api.Rewind
	return &out, c.do(ctx, http.MethodPost, sp(id)+"/rewind/config", nil, req, &out)
}

// RewindUndo puts the machine back req.Steps points (default 1), or to
// the point req.To, and drops the newer unpinned points.
func (c *Client) RewindUndo(ctx context.Context, id string, req api.RewindUndoRequest) (*api.RewindUndo, error) {
	var out api.RewindUndo
	return &out, c.do(ctx, http.MethodPost, sp(id)+"/rewind/undo", nil, req, &out)
}

// RewindPin pins a point (pinned true) or releases it (false).
func (c *Client) RewindPin(ctx context.Context, id, tag string, pinned bool) (*api.RewindPoint, error) {
	var out api.RewindPoint
	return &out, c.do(ctx, http.MethodPost, sp(id)+"/rewind/pin", nil, api.RewindPinRequest{Tag: tag, Pinned: &pinned}, &out)
}

// RewindBisect finds the command between the last point where req.Test
// passes and the first where it fails; the session ends as it started.
func (c *Client) RewindBisect(ctx context.Context, id string, req api.RewindBisectRequest) (*api.RewindBisect, error) {
	var out api.RewindBisect
	return &out, c.do(ctx, http.MethodPost, sp(id)+"/rewind/bisect", nil, req, &out)
}

// RewindBranch starts req.Count (default 1) child sessions from the point
// req.Tag; the session itself is left as it is. The children have no
// workspace baseline, so Promote refuses them (no_baseline).
func (c *Client) RewindBranch(ctx context.Context, id string, req api.RewindBranchRequest) (*api.RewindBranch, error) {
	var out api.RewindBranch
	return &out, c.do(ctx, http.MethodPost, sp(id)+"/rewind/branch", nil, req, &out)
}
