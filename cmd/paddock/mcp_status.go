package main

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"paddock.dev/paddock/client"
)

// mcpStatusRow is one place a client's config was looked for.
type mcpStatusRow struct {
	Client     string `json:"client"`
	Scope      string `json:"scope"` // user or project
	File       string `json:"file"`
	Installed  bool   `json:"installed"`
	Problem    string `json:"problem,omitempty"` // the file does not parse, ...
	Command    string `json:"command,omitempty"`
	Binary     bool   `json:"binary_exists"`
	AllowWrite bool   `json:"allow_write"`
	URL        string `json:"url,omitempty"`
	TokenFile  string `json:"token_file,omitempty"`
	Daemon     string `json:"daemon,omitempty"` // "ok (admin)" or why not
}

// daemonCheckTimeout bounds each entry's call to the daemon.
const daemonCheckTimeout = 5 * time.Second

// serveFlags reads the flags `mcp serve` would see in an entry's args.
func serveFlags(args []string) (flags map[string]string, allowWrite bool) {
	flags = map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--allow-write" || a == "--allow-write=true" {
			allowWrite = true
			continue
		}
		if !strings.HasPrefix(a, "--") {
			continue
		}
		if k, v, ok := strings.Cut(a[2:], "="); ok {
			flags[k] = v
		} else if i+1 < len(args) {
			flags[a[2:]] = args[i+1]
			i++
		}
	}
	return flags, allowWrite
}

// notCheckedProject is the DAEMON column for a project entry that names a
// daemon or a token file the user did not choose.
const notCheckedProject = "not checked (project file names another daemon/token)"

// projectEntryTrusted says whether status may call the daemon for an entry
// found in a project's file. Such a file may come from a cloned repository,
// so it must not be able to send one of the user's token files to a server
// of its choosing: the URL must be loopback or the user's own daemon URL,
// and the token file the default one or one a user-level entry names.
func projectEntryTrusted(base, tokenFile string, userTokenFiles map[string]bool) bool {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return false
	}
	if !isLoopbackHost(u.Hostname()) && base != envOr("PADDOCK_URL", "https://127.0.0.1:7788") {
		return false
	}
	if tokenFile == "" || !filepath.IsAbs(tokenFile) {
		return false
	}
	tf := filepath.Clean(tokenFile)
	if d := defaultTokenFile(); d != "" && tf == filepath.Clean(d) {
		return true
	}
	return userTokenFiles[tf]
}

// userTokenFiles is the set of token files the user-level entries name.
func userTokenFiles(home string) map[string]bool {
	set := map[string]bool{}
	for _, name := range mcpClientNames() {
		c := mcpClients[name]
		b, _, exists, err := readConfigFile(c.user(home))
		if err != nil || !exists {
			continue
		}
		if l, err := readLaunch(c, b); err == nil && l != nil {
			flags, _ := serveFlags(l.Args)
			if tf := flags["token-file"]; tf != "" && filepath.IsAbs(tf) {
				set[filepath.Clean(tf)] = true
			}
		}
	}
	return set
}

// checkDaemon calls the daemon as the entry's server would: its URL, its
// token file (permissions checked), its trust settings. For an entry from
// a project's file (trusted is nil otherwise), the call is made only when
// projectEntryTrusted allows it, and the trust settings are the user's own
// (PADDOCK_CA from the environment, the default state dir), never the file's.
func checkDaemon(ctx context.Context, l *mcpLaunch, flags map[string]string, project bool, trusted map[string]bool) string {
	base := flags["url"]
	if base == "" {
		base = envOr("PADDOCK_URL", "https://127.0.0.1:7788")
	}
	tf := flags["token-file"]
	if tf == "" {
		return "no --token-file in the entry"
	}
	if project && !projectEntryTrusted(base, tf, trusted) {
		return notCheckedProject
	}
	if err := checkTokenFile(tf); err != nil {
		return err.Error()
	}
	f, err := os.Open(tf)
	if err != nil {
		return err.Error()
	}
	raw, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	f.Close()
	if err != nil || len(raw) > maxTokenFile {
		return "the token file does not hold a token"
	}
	tok := strings.TrimSpace(string(raw))
	var roots *x509.CertPool
	if ca := l.Env["PADDOCK_CA"]; ca != "" && !project {
		if roots, err = client.TrustPEM(ca); err != nil {
			return "PADDOCK_CA: " + err.Error()
		}
	} else {
		sd := flags["state-dir"]
		if sd == "" || project {
			sd = envOr("PADDOCK_STATE_DIR", defaultStateDir)
		}
		if roots, err = daemonRoots(&globals{stateDir: sd}, base); err != nil {
			return err.Error()
		}
	}
	k := client.New(base, tok)
	if roots != nil {
		k = client.New(base, tok, client.WithRootCAs(roots))
	}
	ctx, cancel := context.WithTimeout(ctx, daemonCheckTimeout)
	defer cancel()
	who, err := k.WhoAmI(ctx)
	if err != nil {
		return err.Error()
	}
	return "ok (" + who.Kind + ")"
}

func mcpStatus(ctx context.Context, project string) ([]mcpStatusRow, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return nil, usageError{errors.New("no home directory")}
	}
	var rows []mcpStatusRow
	trusted := userTokenFiles(home)
	for _, name := range mcpClientNames() {
		c := mcpClients[name]
		places := []mcpStatusRow{{Client: name, Scope: "user", File: c.user(home)}}
		if project != "" && c.project != "" {
			places = append(places, mcpStatusRow{Client: name, Scope: "project", File: filepath.Join(project, c.project)})
		}
		for _, r := range places {
			b, _, exists, err := readConfigFile(r.File)
			if err != nil {
				r.Problem = err.Error()
			}
			if !exists {
				if r.Scope == "user" {
					rows = append(rows, r)
				}
				continue
			}
			l, err := readLaunch(c, b)
			switch {
			case err != nil:
				r.Problem = "does not parse: " + err.Error()
			case l != nil:
				r.Installed = true
				r.Command = l.Command
				if st, err := os.Stat(l.Command); err == nil && !st.IsDir() {
					r.Binary = true
				}
				flags, aw := serveFlags(l.Args)
				r.AllowWrite, r.URL, r.TokenFile = aw, flags["url"], flags["token-file"]
				if len(l.Args) < 2 || !slices.Contains(l.Args, "mcp") || !slices.Contains(l.Args, "serve") {
					r.Problem = "the entry does not run `mcp serve`"
				}
				r.Daemon = checkDaemon(ctx, l, flags, r.Scope == "project", trusted)
			}
			rows = append(rows, r)
		}
	}
	return rows, nil
}

func newMCPStatusCmd(g *globals) *cobra.Command {
	var project string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Which agents have Paddock's MCP server configured, and whether it can reach the daemon",
		Long: `For each client (` + mcpClientList() + `), look at its user-level config
file and, with --project, the project's file: is a paddock entry there, which
command it runs and whether that binary exists, whether --allow-write is on, and
whether the daemon answers with the token file the entry names.

A project's file may come from someone else's repository, so for its entries
the daemon is called only when the URL is loopback or your own PADDOCK_URL and
the token file is the default one or one a user-level entry names; their
PADDOCK_CA and --state-dir are ignored. Otherwise the DAEMON column says
"not checked".`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if project != "" {
				d, err := filepath.Abs(project)
				if err != nil {
					return err
				}
				project = d
			}
			rows, err := mcpStatus(c.Context(), project)
			if err != nil {
				return err
			}
			w := c.OutOrStdout()
			if g.json {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			}
			t := newTable(w, "CLIENT", "SCOPE", "INSTALLED", "FILE", "COMMAND", "BINARY", "WRITE", "DAEMON")
			yn := func(b bool) string {
				if b {
					return "yes"
				}
				return "no"
			}
			for _, r := range rows {
				inst := yn(r.Installed)
				if r.Problem != "" {
					inst = "problem: " + r.Problem
				}
				bin, write, daemon := "-", "-", "-"
				if r.Installed {
					bin, write, daemon = "missing", yn(r.AllowWrite), r.Daemon
					if r.Binary {
						bin = "ok"
					}
				}
				t.row(r.Client, r.Scope, inst, r.File, orDash(r.Command), bin, write, daemon)
			}
			return t.flush()
		},
	}
	cmd.Flags().StringVar(&project, "project", "", "also look at the project files under this directory")
	return cmd
}
