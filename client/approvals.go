package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"

	"paddock.dev/paddock/api"
)

// Approvals lists a session's approval requests, oldest first.
func (c *Client) Approvals(ctx context.Context, id string) ([]api.Approval, error) {
	var out struct {
		Approvals []api.Approval `json:"approvals"`
	}
	return out.Approvals, c.do(ctx, http.MethodGet, sp(id)+"/approvals", nil, nil, &out)
}

// Approve lets a held command run once; Deny refuses it for good.
func (c *Client) Approve(ctx context.Context, id, approval, note string) (*api.Approval, error) {
	return c.decide(ctx, id, approval, "approve", note)
}

// Deny refuses a held command.
func (c *Client) Deny(ctx context.Context, id, approval, note string) (*api.Approval, error) {
	return c.decide(ctx, id, approval, "deny", note)
}

func (c *Client) decide(ctx context.Context, id, approval, verb, note string) (*api.Approval, error) {
	var out api.Approval
	return &out, c.do(ctx, http.MethodPost, sp(id)+"/approvals/"+url.PathEscape(approval)+"/"+verb, nil, api.Decision{Note: note}, &out)
}

// HoldOf returns the approval request of an error that says a command is
// held for approval (428), or nil.
func HoldOf(err error) *api.Hold {
	var e *Error
	if !errors.As(err, &e) || e.Status != http.StatusPreconditionRequired {
		return nil
	}
	var h api.Hold
	if json.Unmarshal(e.Body, &h) != nil || h.ApprovalID == "" {
		return nil
	}
	return &h
}
