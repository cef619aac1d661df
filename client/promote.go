package client

import (
	"context"
	"net/http"

	"paddock.dev/paddock/api"
)

// Promote carries fork child id's workspace changes back to its parent
// (req.DryRun: only the plan). Give the dry run's PlanID back in req to
// apply exactly the plan reviewed; a plan that changed since is refused
// with code plan_changed.
func (c *Client) Promote(ctx context.Context, id string, req api.PromoteRequest) (*api.PromoteResult, error) {
	var out api.PromoteResult
	return &out, c.do(ctx, http.MethodPost, sp(id)+"/promote", nil, req, &out)
}
