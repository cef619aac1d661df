package main

import (
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
)

// This file knows where each agent keeps its MCP servers and in what shape.
// The formats were checked against each client's own documentation (and a
// few pages quoting it) in December 2026:
//
//   - Claude Code, https://code.claude.com/docs/en/mcp: the user scope is the
//     top-level "mcpServers" object of ~/.claude.json, the project scope is
//     .mcp.json at the project root; a stdio server is
//     {"type": "stdio", "command", "args", "env"}.
//   - Codex, https://github.com/openai/codex/blob/main/docs/config.md: a
//     [mcp_servers.<name>] table in $CODEX_HOME/config.toml (~/.codex by
//     default) or a trusted project's .codex/config.toml, with command, args
//     and env = { ... }.
//   - Gemini CLI, https://github.com/google-gemini/gemini-cli/blob/main/docs/tools/mcp-server.md:
//     "mcpServers" in ~/.gemini/settings.json or the project's
//     .gemini/settings.json, each {"command", "args", "env"}.
//   - Cursor, https://cursor.com/docs/context/mcp: "mcpServers" in
//     ~/.cursor/mcp.json or the project's .cursor/mcp.json, each
//     {"command", "args", "env"}.
//   - VS Code, https://code.visualstudio.com/docs/copilot/reference/mcp-configuration:
//     "servers" in mcp.json in the user profile or the workspace's
//     .vscode/mcp.json, a stdio server being {"type": "stdio", "command",
//     "args", "env"}.
//   - OpenCode, https://opencode.ai/docs/mcp-servers: "mcp" in
//     ~/.config/opencode/opencode.json or the project's opencode.json, a
//     local server being {"type": "local", "command": [cmd, args...],
//     "enabled": true, "environment"}.

// mcpServerName is the key of our entry in every client's list of servers.
const mcpServerName = "paddock"

// mcpLaunch is what a client must run to start Paddock's MCP server: a
// command, its arguments and extra environment (never a token).
type mcpLaunch struct {
	Command string
	Args    []string
	Env     map[string]string
}

// mcpClient describes one agent's configuration file.
type mcpClient struct {
	name string
	toml bool // codex: TOML; every other client: JSON
	// key is the JSON object that holds the servers.
	key string
	// user is the user-level file; project the file inside a project
	// directory ("" when the client has none).
	user    func(home string) string
	project string
	// entry is our server's JSON value in this client's shape.
	entry func(l mcpLaunch) any
	// seed is what a new JSON file starts from (nil: an empty object).
	seed []byte
}

// The JSON shapes, as structs so that the keys come out in a fixed order.
type stdioEntry struct {
	Type    string            `json:"type,omitempty"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env,omitempty"`
}

type opencodeEntry struct {
	Type        string            `json:"type"`
	Command     []string          `json:"command"`
	Enabled     bool              `json:"enabled"`
	Environment map[string]string `json:"environment,omitempty"`
}

func typedStdio(l mcpLaunch) any {
	return stdioEntry{Type: "stdio", Command: l.Command, Args: l.Args, Env: l.Env}
}

func plainStdio(l mcpLaunch) any {
	return stdioEntry{Command: l.Command, Args: l.Args, Env: l.Env}
}

// configHome is $XDG_CONFIG_HOME, else ~/.config.
func configHome(home string) string {
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" && filepath.IsAbs(d) {
		return d
	}
	return filepath.Join(home, ".config")
}

var mcpClients = map[string]mcpClient{
	"claude-code": {
		name: "claude-code", key: "mcpServers", project: ".mcp.json",
		user:  func(home string) string { return filepath.Join(home, ".claude.json") },
		entry: typedStdio,
	},
	"codex": {
		name: "codex", toml: true, project: filepath.Join(".codex", "config.toml"),
		user: func(home string) string {
			if d := os.Getenv("CODEX_HOME"); d != "" && filepath.IsAbs(d) {
				return filepath.Join(d, "config.toml")
			}
			return filepath.Join(home, ".codex", "config.toml")
		},
	},
	"gemini": {
		name: "gemini", key: "mcpServers", project: filepath.Join(".gemini", "settings.json"),
		user:  func(home string) string { return filepath.Join(home, ".gemini", "settings.json") },
		entry: plainStdio,
	},
	"cursor": {
		name: "cursor", key: "mcpServers", project: filepath.Join(".cursor", "mcp.json"),
		user:  func(home string) string { return filepath.Join(home, ".cursor", "mcp.json") },
		entry: plainStdio,
	},
	"vscode": {
		name: "vscode", key: "servers", project: filepath.Join(".vscode", "mcp.json"),
		user: func(home string) string {
			switch runtime.GOOS {
			case "darwin":
				return filepath.Join(home, "Library", "Application Support", "Code", "User", "mcp.json")
			case "windows":
				if d := os.Getenv("APPDATA"); d != "" {
					return filepath.Join(d, "Code", "User", "mcp.json")
				}
			}
			return filepath.Join(configHome(home), "Code", "User", "mcp.json")
		},
		entry: typedStdio,
	},
	"opencode": {
		name: "opencode", key: "mcp", project: "opencode.json",
		seed: []byte(`{"$schema": "https://opencode.ai/config.json"}`),
		user: func(home string) string { return filepath.Join(configHome(home), "opencode", "opencode.json") },
		entry: func(l mcpLaunch) any {
			return opencodeEntry{Type: "local", Command: append([]string{l.Command}, l.Args...), Enabled: true, Environment: l.Env}
		},
	},
}

// mcpClientNames lists the clients in a fixed order.
func mcpClientNames() []string {
	names := make([]string, 0, len(mcpClients))
	for n := range mcpClients {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// mcpClientList is the names for messages: "a, b or c".
func mcpClientList() string {
	n := mcpClientNames()
	return strings.Join(n[:len(n)-1], ", ") + " or " + n[len(n)-1]
}
