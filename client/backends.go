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

// CompilePolicy asks what a create with req's policy would record and why
// it would be refused, without creating anything (POST
// /v1/policy/compile). A refusal is in the answer, not an error.
func (c *Client) CompilePolicy(ctx context.Context, req api.PolicyCompileRequest) (*api.PolicyCompile, error) {
	var out api.PolicyCompile
	return &out, c.do(ctx, http.MethodPost, "/v1/policy/compile", nil, req, &out)
}

// Tenants lists the daemon's tenants with their limits and session counts
// (GET /v1/admin/tenants; the admin token only).
func (c *Client) Tenants(ctx context.Context) (*api.TenantList, error) {
	var out api.TenantList
	return &out, c.do(ctx, http.MethodGet, "/v1/admin/tenants", nil, nil, &out)
}
