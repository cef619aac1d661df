package main

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"paddock.dev/paddock/mcp"
)

// maxTokenFile bounds what --token-file reads: a token is under 100 bytes.
const maxTokenFile = 4 << 10

func newMCPCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "The Model Context Protocol server: Paddock sessions as tools for an agent (docs/mcp.md)",
	}
	var addr, token, tokenFile, session string
	var allowWrite bool
	serve := &cobra.Command{
		Use:   "serve",
		Short: "Serve MCP over stdio (an agent starts it as its MCP server command)",
		Long: `Serve the Model Context Protocol over stdin and stdout, as an agent's MCP
server command. The tools call the daemon at --url with the token (PADDOCK_TOKEN,
--token or --token-file) and can do only what that token may do. --url must be
https://, or http:// only for a daemon on this machine (loopback): the token
goes with every call.

Without --allow-write only the tools that read are offered. A session token
offers only the tools its ops allow, on its own session. Every call is
recorded in the session's ledger with the tool's name. docs/mcp.md lists the
tools and their output limits.`,
		Example: `  PADDOCK_TOKEN=... paddock mcp serve --allow-write
  paddock mcp serve --token-file ~/.config/paddock/token --session ses-0123456789abcdef`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			// Checked before any token is read, so a refused URL never
			// sees one.
			if u, err := url.Parse(addr); err == nil {
				if err := refusePlainRemote(u, addr); err != nil {
					return err
				}
			}
			t := token
			if tokenFile != "" {
				if t != "" {
					return usageError{errors.New("give --token or --token-file, not both")}
				}
				f, err := os.Open(tokenFile)
				if err != nil {
					return usageError{fmt.Errorf("--token-file: %w", err)}
				}
				raw, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
				f.Close()
				if err != nil {
					return usageError{fmt.Errorf("--token-file: %w", err)}
				}
				if len(raw) > maxTokenFile {
					return usageError{fmt.Errorf("--token-file %s is over %d bytes: it does not hold a token", tokenFile, maxTokenFile)}
				}
				t = strings.TrimSpace(string(raw))
			}
			if t == "" {
				t = os.Getenv("PADDOCK_TOKEN")
			}
			if t == "" {
				return usageError{errors.New("no token: set PADDOCK_TOKEN, or give --token-file")}
			}
			k, err := daemonClient(g, addr, t)
			if err != nil {
				return err
			}
			srv, err := mcp.New(c.Context(), k, mcp.Options{AllowWrite: allowWrite, Session: session, Version: version})
			if err != nil {
				if h := trustHint(err, rootStateDir(c.Root())); h != "" {
					return fmt.Errorf("%w\n%s", err, h)
				}
				return err
			}
			// stdout carries the protocol: nothing else may be written to it.
			return srv.Run(c.Context(), &sdk.StdioTransport{})
		},
	}
	serve.Flags().StringVar(&addr, "url", envOr("PADDOCK_URL", "https://127.0.0.1:7788"), "daemon URL; env PADDOCK_URL (an https daemon is trusted through PADDOCK_CA, a PEM file, or on this machine the state dir's gateway root)")
	serve.Flags().StringVar(&token, "token", "", "bearer token (default: env PADDOCK_TOKEN; not shown in argv when taken from the environment)")
	serve.Flags().StringVar(&tokenFile, "token-file", "", "read the bearer token from this file (keep it readable by you alone)")
	serve.Flags().StringVar(&session, "session", "", "the session tools work on when a call names none (a session token's own by default)")
	serve.Flags().BoolVar(&allowWrite, "allow-write", false, "offer the tools that change things (create, exec, write files, checkpoint, fork, promote, delete, …)")
	cmd.AddCommand(serve)
	cmd.AddCommand(newMCPInstallCmd(g), newMCPStatusCmd(g)) // mcp_install.go, mcp_status.go
	return cmd
}
