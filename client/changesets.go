package client

import (
	"context"
	"net/http"
	"net/url"

	"paddock.dev/paddock/api"
)

// Speculation: run a command in a throwaway copy of a session or sandbox
// and keep what it changed under the given paths as a pending changeset;
// nothing changes on the machine itself until the changeset is approved
// and applied. The session and sandbox methods differ only in the route.

func changesetPath(base, cid string) string { return base + "/changesets/" + url.PathEscape(cid) }

func (c *Client) speculate(ctx context.Context, base string, req api.SpeculateRequest) (*api.Changeset, error) {
	var out api.Changeset
	return &out, c.do(ctx, http.MethodPost, base+"/speculate", nil, req, &out)
}

func (c *Client) changesets(ctx context.Context, base string) ([]api.Changeset, error) {
	var out api.ChangesetList
	return out.Changesets, c.do(ctx, http.MethodGet, base+"/changesets", nil, nil, &out)
}

func (c *Client) changeset(ctx context.Context, base, cid string) (*api.Changeset, error) {
	var out api.Changeset
	return &out, c.do(ctx, http.MethodGet, changesetPath(base, cid), nil, nil, &out)
}

func (c *Client) decideChangeset(ctx context.Context, base, cid string, d api.ChangesetDecision) (*api.Changeset, error) {
	var out api.Changeset
	return &out, c.do(ctx, http.MethodPost, changesetPath(base, cid)+"/decide", nil, d, &out)
}

func (c *Client) applyChangeset(ctx context.Context, base, cid string) (*api.ApplyResult, error) {
	var out api.ApplyResult
	return &out, c.do(ctx, http.MethodPost, changesetPath(base, cid)+"/apply", nil, struct{}{}, &out)
}

// Speculate runs req.Command in an isolated copy of session id and
// answers the pending changeset of what it changed under req.Paths. The
// session itself is left as it was.
func (c *Client) Speculate(ctx context.Context, id string, req api.SpeculateRequest) (*api.Changeset, error) {
	return c.speculate(ctx, sp(id), req)
}

// Changesets lists session id's changesets, newest last; their files come
// without content (read one with Changeset).
func (c *Client) Changesets(ctx context.Context, id string) ([]api.Changeset, error) {
	return c.changesets(ctx, sp(id))
}

// Changeset returns one changeset of session id, file contents included.
func (c *Client) Changeset(ctx context.Context, id, cid string) (*api.Changeset, error) {
	return c.changeset(ctx, sp(id), cid)
}

// DecideChangeset approves or rejects a pending changeset of session id
// (d.Decision is "approve" or "reject"). A session token may not decide.
func (c *Client) DecideChangeset(ctx context.Context, id, cid string, d api.ChangesetDecision) (*api.Changeset, error) {
	return c.decideChangeset(ctx, sp(id), cid, d)
}

// ApplyChangeset writes an approved changeset into session id. It is
// refused (409, code changeset_conflict) when a file it touches changed
// since the speculation, and then nothing is written.
func (c *Client) ApplyChangeset(ctx context.Context, id, cid string) (*api.ApplyResult, error) {
	return c.applyChangeset(ctx, sp(id), cid)
}

// SandboxSpeculate is Speculate for sandbox id (paths are absolute).
func (c *Client) SandboxSpeculate(ctx context.Context, id string, req api.SpeculateRequest) (*api.Changeset, error) {
	return c.speculate(ctx, sbx(id), req)
}

// SandboxChangesets is Changesets for sandbox id.
func (c *Client) SandboxChangesets(ctx context.Context, id string) ([]api.Changeset, error) {
	return c.changesets(ctx, sbx(id))
}

// SandboxChangeset is Changeset for sandbox id.
func (c *Client) SandboxChangeset(ctx context.Context, id, cid string) (*api.Changeset, error) {
	return c.changeset(ctx, sbx(id), cid)
}

// SandboxDecideChangeset is DecideChangeset for sandbox id.
func (c *Client) SandboxDecideChangeset(ctx context.Context, id, cid string, d api.ChangesetDecision) (*api.Changeset, error) {
	return c.decideChangeset(ctx, sbx(id), cid, d)
}

// SandboxApplyChangeset is ApplyChangeset for sandbox id.
func (c *Client) SandboxApplyChangeset(ctx context.Context, id, cid string) (*api.ApplyResult, error) {
	return c.applyChangeset(ctx, sbx(id), cid)
}
