package client

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"

	"paddock.dev/paddock/api"
)

func sbx(id string) string { return "/v1/sandboxes/" + url.PathEscape(id) }

// CreateSandbox starts a sandbox; it answers once commands can run.
func (c *Client) CreateSandbox(ctx context.Context, req api.SandboxRequest) (*api.Sandbox, error) {
	var out api.Sandbox
	return &out, c.do(ctx, http.MethodPost, "/v1/sandboxes", nil, req, &out)
}

// ListSandboxes lists sandboxes, oldest first.
func (c *Client) ListSandboxes(ctx context.Context) ([]*api.Sandbox, error) {
	var out struct {
		Sandboxes []*api.Sandbox `json:"sandboxes"`
	}
	return out.Sandboxes, c.do(ctx, http.MethodGet, "/v1/sandboxes", nil, nil, &out)
}

// GetSandbox returns one sandbox.
func (c *Client) GetSandbox(ctx context.Context, id string) (*api.Sandbox, error) {
	var out api.Sandbox
	return &out, c.do(ctx, http.MethodGet, sbx(id), nil, nil, &out)
}

// DeleteSandbox stops and removes a sandbox (idempotent).
func (c *Client) DeleteSandbox(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, sbx(id), nil, nil, nil)
}

// SandboxProcess runs a shell line in the sandbox.
func (c *Client) SandboxProcess(ctx context.Context, id string, req api.ProcessRequest) (*api.ProcessResult, error) {
	var out api.ProcessResult
	return &out, c.do(ctx, http.MethodPost, sbx(id)+"/process", nil, req, &out)
}

// SandboxReadFile returns a file's content (at most 32 MiB) and its
// description.
func (c *Client) SandboxReadFile(ctx context.Context, id, path string) ([]byte, *api.SandboxFile, error) {
	var out api.SandboxFile
	if err := c.do(ctx, http.MethodPost, sbx(id)+"/fs/read", nil, api.SandboxPath{Path: path}, &out); err != nil {
		return nil, nil, err
	}
	data, err := base64.StdEncoding.DecodeString(out.ContentBase64)
	if err != nil {
		return nil, nil, fmt.Errorf("fs/read of %s: the content is not base64: %w", path, err)
	}
	return data, &out, nil
}

// SandboxWriteFile writes data (at most 32 MiB) to path, creating its
// parents; mode is octal ("" for 0644).
func (c *Client) SandboxWriteFile(ctx context.Context, id, path string, data []byte, mode string) (*api.SandboxWritten, error) {
	var out api.SandboxWritten
	req := api.SandboxWrite{Path: path, ContentBase64: base64.StdEncoding.EncodeToString(data), Mode: mode}
	return &out, c.do(ctx, http.MethodPost, sbx(id)+"/fs/write", nil, req, &out)
}
