package mcp

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"paddock.dev/paddock/api"
)

// sandboxTools are the lower sandbox API's tools (no session, no ledger of
// their own: docs/guide-sandboxes.md) and the credential grants.
func sandboxTools() []toolDef {
	return []toolDef{
		tool("sandbox_create", "Create a bare sandbox (no workspace, no session record) and return its id for the other sandbox_* tools.", true, "", sandboxCreate),
		tool("sandbox_exec", fmt.Sprintf("Run a shell command in a sandbox. Only the last %d KiB of stdout and of stderr come back (truncated says when more was cut).",
			MaxStreamBytes>>10), true, "", onSandbox(sandboxExec)),
		tool("sandbox_read_file", fmt.Sprintf("Read a file in a sandbox from offset, at most %d KiB per call; eof false means more remains (read on from next_offset).", MaxReadBytes>>10), false, "", onSandbox(sandboxReadFile)),
		tool("sandbox_write_file", fmt.Sprintf("Write a file in a sandbox (parents are made); text in content or bytes in content_base64, at most %d KiB.", MaxWriteBytes>>10), true, "", onSandbox(sandboxWriteFile)),
		tool("sandbox_delete", "Delete a sandbox.", true, "", onSandbox(sandboxDelete)),
		tool("session_grant", "Let the session's sandbox use a daemon secret (named by secret_ref, never a raw value) as a credential toward the hosts given; "+
			"the secret never enters the sandbox. Admin only on the daemon's side.", true, "", onSession(sessionGrant)),
		tool("session_revoke_grants", "Revoke one credential grant of the session (grant), or all of them.", true, "", onSession(sessionRevokeGrants)),
	}
}

type SandboxRef struct {
	Sandbox string `json:"sandbox" jsonschema:"the sandbox id (sbx-…)"`
}

type SandboxCreateIn struct {
	Image      string `json:"image,omitempty" jsonschema:"the image; empty means the daemon's default"`
	Backend    string `json:"backend,omitempty" jsonschema:"the backend; empty means the daemon's default"`
	TTLSeconds int    `json:"ttl_seconds,omitempty" jsonschema:"seconds until it expires; 0 means the daemon's default"`
}

type SandboxOut struct {
	ID      string `json:"id"`
	Backend string `json:"backend"`
	Status  string `json:"status"`
	Image   string `json:"image"`
	Offline bool   `json:"offline"`
}

func sandboxCreate(ctx context.Context, s *Server, in SandboxCreateIn) (*SandboxOut, error) {
	if in.TTLSeconds < 0 {
		return nil, fmt.Errorf("invalid_argument: ttl_seconds must not be negative")
	}
	x, err := s.c.CreateSandbox(ctx, api.SandboxRequest{Image: in.Image, Backend: in.Backend, TTLSeconds: in.TTLSeconds})
	if err != nil {
		return nil, err
	}
	return &SandboxOut{ID: x.ID, Backend: x.Backend, Status: x.Status, Image: x.Image, Offline: x.Offline}, nil
}

// sandboxInput is a tool input that names a sandbox (through SandboxRef).
type sandboxInput interface{ sandboxRef() SandboxRef }

func (r SandboxRef) sandboxRef() SandboxRef { return r }

// onSandbox makes the handler of a tool on one sandbox: an input that
// names none fails before anything else, and h gets the sandbox's id.
func onSandbox[In sandboxInput, Out any](h func(ctx context.Context, s *Server, id string, in In) (*Out, error)) handler[In, Out] {
	return func(ctx context.Context, s *Server, in In) (*Out, error) {
		id, err := sandboxID(in.sandboxRef())
		if err != nil {
			return nil, err
		}
		return h(ctx, s, id, in)
	}
}

func sandboxID(in SandboxRef) (string, error) {
	if in.Sandbox == "" {
		return "", fmt.Errorf("invalid_argument: name the sandbox (the \"sandbox\" field)")
	}
	return in.Sandbox, nil
}

type SandboxExecIn struct {
	SandboxRef
	Command        string `json:"command" jsonschema:"the shell command line to run"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"seconds before it is killed; 0 means the daemon's default"`
	Cwd            string `json:"cwd,omitempty" jsonschema:"the directory to run in"`
}

func sandboxExec(ctx context.Context, s *Server, id string, in SandboxExecIn) (*ExecOut, error) {
	if in.Command == "" {
		return nil, fmt.Errorf("invalid_argument: command is empty")
	}
	r, err := s.c.SandboxProcess(ctx, id, api.ProcessRequest{Command: in.Command, TimeoutSeconds: in.TimeoutSeconds, Cwd: in.Cwd})
	if err != nil {
		return nil, err
	}
	return execOut(&r.ExecResult), nil
}

func sandboxReadFile(ctx context.Context, s *Server, id string, in FileReadIn2) (*FileReadOut, error) {
	if err := checkRead(in.Path, in.Offset, &in.Length); err != nil {
		return nil, err
	}
	data, f, err := s.c.SandboxReadFile(ctx, id, in.Path)
	if err != nil {
		return nil, err
	}
	off := min(in.Offset, int64(len(data)))
	part := data[off:min(off+int64(in.Length), int64(len(data)))]
	return fileReadOut(f.Path, off, part, int64(len(data)), off+int64(len(part)) == int64(len(data))), nil
}

// FileReadIn2 is sandbox_read_file's input: FileReadIn with a sandbox
// instead of a session.
type FileReadIn2 struct {
	SandboxRef
	Path   string `json:"path" jsonschema:"the file to read"`
	Offset int64  `json:"offset,omitempty" jsonschema:"the byte to start at"`
	Length int    `json:"length,omitempty" jsonschema:"the most bytes to return (at most 262144, the default)"`
}

type SandboxWriteIn struct {
	SandboxRef
	Path          string `json:"path" jsonschema:"the file to write"`
	Content       string `json:"content,omitempty" jsonschema:"the file's text"`
	ContentBase64 string `json:"content_base64,omitempty" jsonschema:"the file's bytes as base64, instead of content"`
	Mode          string `json:"mode,omitempty" jsonschema:"octal permission bits, e.g. 0755"`
}

func sandboxWriteFile(ctx context.Context, s *Server, id string, in SandboxWriteIn) (*FileWriteOut, error) {
	data, err := content(in.Path, in.Content, in.ContentBase64)
	if err != nil {
		return nil, err
	}
	if _, err := s.c.SandboxWriteFile(ctx, id, in.Path, data, in.Mode); err != nil {
		return nil, err
	}
	return &FileWriteOut{Path: in.Path, Bytes: len(data)}, nil
}

func sandboxDelete(ctx context.Context, s *Server, id string, in SandboxRef) (*DeleteOut, error) {
	if err := s.c.DeleteSandbox(ctx, id); err != nil {
		return nil, err
	}
	return &DeleteOut{Deleted: id}, nil
}

// MaxGrantItems bounds the hosts, methods and paths of one grant.
const MaxGrantItems = 64

type GrantIn struct {
	SessionRef
	SecretRef  string   `json:"secret_ref" jsonschema:"the daemon secret's name"`
	Hosts      []string `json:"hosts" jsonschema:"the hosts the credential is sent to"`
	Methods    []string `json:"methods,omitempty" jsonschema:"HTTP methods it is limited to"`
	Paths      []string `json:"paths,omitempty" jsonschema:"URL path prefixes it is limited to"`
	Header     string   `json:"header,omitempty" jsonschema:"the header it goes in (default Authorization)"`
	TTLSeconds int      `json:"ttl_seconds,omitempty" jsonschema:"seconds until it expires"`
}

type GrantOut struct {
	ID        string   `json:"id"`
	Hosts     []string `json:"hosts"`
	Header    string   `json:"header"`
	ExpiresAt string   `json:"expires_at"`
}

func sessionGrant(ctx context.Context, s *Server, id string, in GrantIn) (*GrantOut, error) {
	if in.SecretRef == "" || len(in.Hosts) == 0 || len(in.Hosts) > MaxGrantItems || len(in.Methods) > MaxGrantItems || len(in.Paths) > MaxGrantItems {
		return nil, fmt.Errorf("invalid_argument: give secret_ref and 1 to %d hosts (and at most %d methods and paths)", MaxGrantItems, MaxGrantItems)
	}
	g, err := s.c.Grant(ctx, id, api.GrantRequest{SecretRef: in.SecretRef, Hosts: in.Hosts, Methods: in.Methods, Paths: in.Paths, Header: in.Header, TTLSeconds: in.TTLSeconds})
	if err != nil {
		return nil, err
	}
	return &GrantOut{ID: g.ID, Hosts: g.Hosts, Header: g.Header, ExpiresAt: g.ExpiresAt.UTC().Format(time.RFC3339)}, nil
}

type RevokeIn struct {
	SessionRef
	Grant string `json:"grant,omitempty" jsonschema:"the grant to revoke; empty revokes all of the session's grants"`
}

func sessionRevokeGrants(ctx context.Context, s *Server, id string, in RevokeIn) (*OKOut, error) {
	var err error
	if in.Grant != "" {
		err = s.c.Ungrant(ctx, id, in.Grant)
	} else {
		err = s.c.Call(ctx, http.MethodDelete, id, "/grants", url.Values{}, nil, nil)
	}
	if err != nil {
		return nil, err
	}
	return &OKOut{OK: true}, nil
}
