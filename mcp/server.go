// Package mcp is Paddock's Model Context Protocol server: the session API
// offered to an agent as MCP tools. It is a client of the public API (the
// Go SDK in package client) and never of the daemon's internals, so it
// runs wherever the CLI runs and can do only what its token may do.
//
// The tools are one table (tools.go). A tool that changes anything is a
// write tool and exists only when the server is made with AllowWrite. A
// session token's server offers only the tools its ops allow and works on
// that token's session alone. Every request a tool makes names the tool
// (client.WithTool), and the daemon records that name in the ledger.
package mcp

import (
	"context"
	"fmt"
	"slices"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
)

// Options configure a server.
type Options struct {
	// AllowWrite offers the write tools (create, exec, file writes,
	// checkpoints, fork, promote, delete, …). Without it only the tools
	// that read are listed.
	AllowWrite bool
	// Session is the session a tool works on when its input names none.
	// With a session token it defaults to the token's session, and no
	// other may be named.
	Session string
	// Version is the server's version as it reports it to a client.
	Version string
}

// Server is a Paddock MCP server for one token.
type Server struct {
	*sdk.Server
	c    *client.Client
	opts Options
	who  *api.WhoAmI
	// tools are the names offered, in table order.
	tools []string
}

// New asks the daemon who the client's token is (GET /v1/whoami) and
// builds the server that token gets.
func New(ctx context.Context, c *client.Client, opts Options) (*Server, error) {
	who, err := c.WhoAmI(ctx)
	if err != nil {
		return nil, fmt.Errorf("mcp: ask the daemon who this token is: %w", err)
	}
	return newServer(c, who, opts)
}

// newServer builds the server for a token the daemon described as who.
func newServer(c *client.Client, who *api.WhoAmI, opts Options) (*Server, error) {
	if who.Kind == api.KindSession {
		if opts.Session != "" && opts.Session != who.Session {
			return nil, fmt.Errorf("mcp: --session %s: this session token is for session %s only", opts.Session, who.Session)
		}
		opts.Session = who.Session
	}
	version := opts.Version
	if version == "" {
		version = "dev"
	}
	s := &Server{
		Server: sdk.NewServer(&sdk.Implementation{Name: "paddock", Title: "Paddock sessions", Version: version}, &sdk.ServerOptions{
			Instructions: instructions(opts, who),
		}),
		c: c, opts: opts, who: who,
	}
	s.AddReceivingMiddleware(codeInputErrors)
	for _, t := range toolTable() {
		if !s.offers(t) {
			continue
		}
		t.register(s)
		s.tools = append(s.tools, t.name)
	}
	return s, nil
}

// Tools lists the names of the tools the server offers.
func (s *Server) Tools() []string { return slices.Clone(s.tools) }

// offers says whether the server lists t for its token and options.
func (s *Server) offers(t toolDef) bool {
	if t.write && !s.opts.AllowWrite {
		return false
	}
	switch s.who.Kind {
	case api.KindAdmin:
		return true
	case api.KindTenant:
		return !t.adminOnly
	case api.KindSession:
		if t.op == "" {
			return false
		}
		return slices.Contains(s.who.Ops, t.op)
	}
	return false
}

// session is the session a call works on: the one its input names, else
// the server's default.
func (s *Server) session(named string) (string, error) {
	id := named
	if id == "" {
		id = s.opts.Session
	}
	if id == "" {
		return "", fmt.Errorf("invalid_argument: name the session (the \"session\" field): this server has no default session (start it with --session ID)")
	}
	if s.who.Kind == api.KindSession && id != s.who.Session {
		return "", fmt.Errorf("forbidden: this server's token is for session %s only; leave \"session\" empty or name that one", s.who.Session)
	}
	return id, nil
}

func instructions(opts Options, who *api.WhoAmI) string {
	s := "Paddock runs commands in isolated sandbox sessions. Create a session (session_create) or use the default one, " +
		"run commands with session_exec, read and write files, checkpoint and restore, fork to try several things and promote the winner. " +
		"Output is bounded: each tool says its limits. A command held for approval returns its approval id; wait for an operator's decision " +
		"with approval_wait_seconds, then retry with approval_id."
	if opts.Session != "" {
		s += " The default session is " + opts.Session + "."
	}
	if !opts.AllowWrite {
		s += " This server is read-only: it was started without --allow-write."
	}
	if who.Kind == api.KindSession {
		s += " Its token reaches session " + who.Session + " only."
	}
	return s
}

// codeInputErrors makes the SDK's own refusal of a tool's input (it checks
// the input against the tool's schema before the tool runs) lead with a
// code, invalid_argument, like every other tool error.
func codeInputErrors(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		res, err := next(ctx, method, req)
		if r, ok := res.(*sdk.CallToolResult); ok && err == nil && r.IsError && len(r.Content) > 0 {
			if tc, ok := r.Content[0].(*sdk.TextContent); ok && strings.HasPrefix(tc.Text, `validating "arguments"`) {
				tc.Text = "invalid_argument: " + tc.Text
			}
		}
		return res, err
	}
}
