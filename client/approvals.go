package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"

	"paddock.dev/paddock/hostd/session"
)

// Approvals lists a session's approval requests, oldest first.
func (c *Client) Approvals(ctx context.Context, id string) ([]session.Approval, error) {
	var out struct {
		Approvals []session.Approval `json:"approvals"`
	}
	return out.Approvals, c.do(ctx, http.MethodGet, sp(id)+"/approvals", nil, nil, &out)
}

// Approve lets a held command run once; Deny refuses it for good.
func (c *Client) Approve(ctx context.Context, id, approval, note string) (*session.Approval, error) {
	return c.decide(ctx, id, approval, "approve", note)
}

// Deny refuses a held command.
func (c *Client) Deny(ctx context.Context, id, approval, note string) (*session.Approval, error) {
	return c.decide(ctx, id, approval, "deny", note)
}

func (c *Client) decide(ctx context.Context, id, approval, verb, note string) (*session.Approval, error) {
	var out session.Approval
	return &out, c.do(ctx, http.MethodPost, sp(id)+"/approvals/"+url.PathEscape(approval)+"/"+verb, nil, session.Decision{Note: note}, &out)
}

// HoldOf returns the approval request of an error that says a command is
// held for approval (428), or nil.
func HoldOf(err error) *session.Hold {
	var e *Error
	if !errors.As(err, &e) || e.Status != http.StatusPreconditionRequired {
		return nil
	}
	var h session.Hold
	if json.Unmarshal(e.Body, &h) != nil || h.ApprovalID == "" {
		return nil
	}
	return &h
}
