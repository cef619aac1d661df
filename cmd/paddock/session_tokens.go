package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
)

// tokenCommands are `session token`, `tokens`, `untoken` and `whoami`:
// bearer tokens that work on one session for the operations they name.
func tokenCommands(g *globals, cl func() (*client.Client, error)) []*cobra.Command {
	printJSON := func(c *cobra.Command, v any) error {
		enc := json.NewEncoder(c.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	printTokens := func(c *cobra.Command, ts []apiv1.SessionToken) error {
		tw := newTable(c.OutOrStdout(), "ID", "OPS", "LABEL", "EXPIRES")
		for _, t := range ts {
			tw.row(t.ID, strings.Join(t.Ops, ","), orDash(t.Label), t.ExpiresAt.Format(time.RFC3339))
		}
		return tw.flush()
	}
	var req apiv1.TokenRequest
	var ttl time.Duration
	var quiet bool
	token := &cobra.Command{
		Use:   "token ID --ops OP[,OP...]",
		Short: "Mint a bearer token for one session and some operations (printed once)",
		Long: `Mint a bearer token that works on this session only, for the operations
named with --ops: ` + strings.Join(apiv1.GrantableOps(), ", ") + `.

Hand it to an agent as PADDOCK_TOKEN: the session verbs it was granted
(exec, files, cat, put, jobs, logs, git, checkpoint, ...) then work on this
session, and everything else is refused (exit 5). The token is printed
once; the daemon keeps only its SHA-256. With -q only the token is
printed, for $(...). It lasts --ttl (default 1h, at most 24h), never past
the session's expiry, and dies with the session. Needs the admin token or
the session's tenant's token.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			k, err := cl()
			if err != nil {
				return err
			}
			if ttl != 0 {
				if ttl < time.Second || ttl%time.Second != 0 {
					return usageError{fmt.Errorf("--ttl %s: give whole seconds, at least 1s (e.g. 30m)", ttl)}
				}
				req.TTLSeconds = int(ttl / time.Second)
			}
			out, err := k.MintToken(c.Context(), args[0], req)
			if err != nil {
				return err
			}
			switch {
			case quiet:
				fmt.Fprintln(c.OutOrStdout(), out.Token)
			case g.json:
				return printJSON(c, out)
			default:
				fmt.Fprintf(c.OutOrStdout(), "%s for %s: %s, expires %s\n", cell(out.ID), cell(out.Session), cell(strings.Join(out.Ops, ",")), out.ExpiresAt.Format(time.RFC3339))
				fmt.Fprintln(c.OutOrStdout(), out.Token)
				fmt.Fprintln(c.ErrOrStderr(), "paddock: the token is shown once; the daemon keeps only its hash")
			}
			return nil
		},
	}
	token.Flags().StringSliceVar(&req.Ops, "ops", nil, "operations to grant, comma-separated: "+strings.Join(apiv1.GrantableOps(), ","))
	token.Flags().DurationVar(&ttl, "ttl", 0, "how long the token lasts (default 1h, at most 24h; never past the session)")
	token.Flags().StringVar(&req.Label, "label", "", "a note shown in `tokens` (at most 64 characters)")
	token.Flags().BoolVarP(&quiet, "quiet", "q", false, "print the token alone")
	token.MarkFlagRequired("ops")

	tokens := &cobra.Command{Use: "tokens ID", Short: "List a session's live tokens (never the tokens themselves)", Args: cobra.ExactArgs(1), RunE: func(c *cobra.Command, args []string) error {
		k, err := cl()
		if err != nil {
			return err
		}
		ts, err := k.Tokens(c.Context(), args[0])
		if err != nil {
			return err
		}
		if g.json {
			return printJSON(c, map[string]any{"tokens": ts})
		}
		return printTokens(c, ts)
	}}
	untoken := &cobra.Command{Use: "untoken ID TOKEN_ID", Short: "Revoke a session token at once (tok-…; revoking twice is fine)", Args: cobra.ExactArgs(2), RunE: func(c *cobra.Command, args []string) error {
		k, err := cl()
		if err != nil {
			return err
		}
		if strings.HasPrefix(args[1], apiv1.TokenPrefix) {
			// Never send a secret where an id goes (it would land in
			// logs as part of the path).
			return usageError{errors.New("give the token's id (tok-…, from `paddock session tokens`), not the token")}
		}
		return k.RevokeToken(c.Context(), args[0], args[1])
	}}
	whoami := &cobra.Command{Use: "whoami", Short: "Say what PADDOCK_TOKEN is: admin, a tenant, or a session token", Args: cobra.NoArgs, RunE: func(c *cobra.Command, _ []string) error {
		k, err := cl()
		if err != nil {
			return err
		}
		w, err := k.WhoAmI(c.Context())
		if err != nil {
			return err
		}
		if g.json {
			return printJSON(c, w)
		}
		switch w.Kind {
		case apiv1.KindTenant:
			fmt.Fprintf(c.OutOrStdout(), "tenant %s\n", cell(w.Tenant))
		case apiv1.KindSession:
			exp := ""
			if w.ExpiresAt != nil {
				exp = ", expires " + w.ExpiresAt.Format(time.RFC3339)
			}
			fmt.Fprintf(c.OutOrStdout(), "session token %s for %s: %s%s\n", cell(w.TokenID), cell(w.Session), cell(strings.Join(w.Ops, ",")), exp)
		default:
			fmt.Fprintln(c.OutOrStdout(), cell(w.Kind))
		}
		return nil
	}}
	return []*cobra.Command{token, tokens, untoken, whoami}
}
