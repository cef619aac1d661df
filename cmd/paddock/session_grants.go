package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
)

// grantCommands are `session grant`, `grants` and `ungrant`: credentials
// the egress proxy adds to a session's requests, never handed to the
// sandbox.
func grantCommands(g *globals, cl func() (*client.Client, error)) []*cobra.Command {
	printJSON := func(c *cobra.Command, v any) error {
		enc := json.NewEncoder(c.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	printGrants := func(c *cobra.Command, gs []apiv1.Grant) error {
		tw := newTable(c.OutOrStdout(), "ID", "SECRET_REF", "HOSTS", "METHODS", "PATHS", "HEADER", "EXPIRES")
		for _, gr := range gs {
			tw.row(gr.ID, orDash(gr.SecretRef), strings.Join(gr.Hosts, ","),
				orDash(strings.Join(gr.Methods, ",")), orDash(strings.Join(gr.Paths, ",")), gr.Header, gr.ExpiresAt.Format(time.RFC3339))
		}
		return tw.flush()
	}
	var req apiv1.GrantRequest
	var valueStdin bool
	grant := &cobra.Command{
		Use:   "grant ID --host H (--secret-ref REF | --value-stdin)",
		Short: "Give a session a credential the egress proxy adds for it (the sandbox never sees it)",
		Long: `Give a session a credential for some hosts without handing it to the
sandbox: the daemon's egress proxy sets the header (Authorization unless
--header says otherwise) on the session's HTTPS requests to those hosts,
inside the TLS it intercepts; plain HTTP never gets it.

The credential is either the daemon's environment variable
PADDOCK_SECRET_<REF> (--secret-ref REF, read when the grant is made) or
read from stdin (--value-stdin; never from the command line, which other
local users can see). --secret-ref is for the admin token only: the
daemon's secrets are the operator's, so a tenant's token gets 403
(secret_ref_admin_only) and passes its own credential with --value-stdin,
for its own sessions. Session tokens cannot grant, list or revoke at all.
--method and --path (repeatable; * matches any run)
narrow the requests that get it. A grant lasts --ttl-seconds (default 3600,
at most 86400, never past the session's expiry) and lives in the daemon's
memory only: a daemon restart forgets it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			k, err := cl()
			if err != nil {
				return err
			}
			if valueStdin == (req.SecretRef != "") {
				return usageError{errors.New("give exactly one of --secret-ref REF and --value-stdin")}
			}
			if valueStdin {
				b, err := io.ReadAll(io.LimitReader(c.InOrStdin(), apiv1.MaxGrantValueBytes+2))
				if err != nil {
					return err
				}
				b = bytes.TrimRight(b, "\r\n")
				if len(b) == 0 {
					return usageError{errors.New("--value-stdin: stdin is empty")}
				}
				req.Value = string(b)
			}
			out, err := k.Grant(c.Context(), args[0], req)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(c, out)
			}
			return printGrants(c, []apiv1.Grant{*out})
		},
	}
	grant.Flags().StringArrayVar(&req.Hosts, "host", nil, "a host the credential is for: api.example.com or *.example.com (repeatable, at least one)")
	grant.Flags().StringVar(&req.SecretRef, "secret-ref", "", "take the credential from the daemon's PADDOCK_SECRET_<REF> (admin token only)")
	grant.Flags().BoolVar(&valueStdin, "value-stdin", false, "read the credential (the whole header value, e.g. \"Bearer …\") from stdin")
	grant.Flags().StringArrayVar(&req.Methods, "method", nil, "only requests with this method get it (repeatable)")
	grant.Flags().StringArrayVar(&req.Paths, "path", nil, "only requests to this path get it; * matches any run (repeatable)")
	grant.Flags().StringVar(&req.Header, "header", "", "the header to set (default Authorization)")
	grant.Flags().IntVar(&req.TTLSeconds, "ttl-seconds", 0, "how long the grant lasts (default 3600, at most 86400)")
	grant.MarkFlagRequired("host")

	grants := &cobra.Command{Use: "grants ID", Short: "List a session's live credential grants (never their values)", Args: cobra.ExactArgs(1), RunE: func(c *cobra.Command, args []string) error {
		k, err := cl()
		if err != nil {
			return err
		}
		gs, err := k.Grants(c.Context(), args[0])
		if err != nil {
			return err
		}
		if g.json {
			return printJSON(c, map[string]any{"grants": gs})
		}
		return printGrants(c, gs)
	}}
	ungrant := &cobra.Command{Use: "ungrant ID [GRANT]", Short: "Revoke one credential grant, or all of the session's", Args: cobra.RangeArgs(1, 2), RunE: func(c *cobra.Command, args []string) error {
		k, err := cl()
		if err != nil {
			return err
		}
		grant := ""
		if len(args) == 2 {
			grant = args[1]
		}
		return k.Ungrant(c.Context(), args[0], grant)
	}}
	return []*cobra.Command{grant, grants, ungrant}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
