package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
)

// previewCommands are `session preview`, `previews` and `unpreview`:
// expiring URLs that reach one TCP port of a session's sandbox.
func previewCommands(g *globals, cl func() (*client.Client, error)) []*cobra.Command {
	printJSON := func(c *cobra.Command, v any) error {
		enc := json.NewEncoder(c.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	var ttl time.Duration
	preview := &cobra.Command{
		Use:   "preview ID PORT",
		Short: "Make an expiring URL that reaches a port of the sandbox (printed once)",
		Long: `Make a URL that reaches TCP port PORT on the sandbox's own loopback, for
a dev server or a web app the agent started there (WebSockets included).
The URL is printed once, against --url; whoever has it can open the
preview without a token, so treat it as a secret. The page runs
sandboxed (no cookies or storage of the daemon's origin), and the
server never sees the viewer's cookies or Authorization.

It lasts --ttl (default 1h, at most 24h), never past the session's
expiry, and ends when deleted (unpreview) or when the session ends. A
session has at most 16 live previews. With --json the whole answer is
printed (its url is relative to the daemon).`,
		Args: cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			port, err := strconv.Atoi(args[1])
			if err != nil || port < 1 || port > 65535 {
				return usageError{fmt.Errorf("PORT %q: give a TCP port from 1 to 65535", args[1])}
			}
			req := apiv1.PreviewRequest{Port: port}
			if ttl != 0 {
				if ttl < time.Second || ttl%time.Second != 0 {
					return usageError{fmt.Errorf("--ttl %s: give whole seconds, at least 1s (e.g. 30m)", ttl)}
				}
				req.TTLSeconds = int(ttl / time.Second)
			}
			k, err := cl()
			if err != nil {
				return err
			}
			out, err := k.CreatePreview(c.Context(), args[0], req)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(c, out)
			}
			fmt.Fprintln(c.OutOrStdout(), k.PreviewURL(out))
			fmt.Fprintf(c.ErrOrStderr(), "paddock: preview %s of port %d, expires %s; the URL is shown once and is the credential\n",
				out.ID, out.Port, out.ExpiresAt.Format(time.RFC3339))
			return nil
		},
	}
	preview.Flags().DurationVar(&ttl, "ttl", 0, "how long the preview lasts (default 1h, at most 24h; never past the session)")

	previews := &cobra.Command{Use: "previews ID", Short: "List a session's live previews (never their URLs)", Args: cobra.ExactArgs(1), RunE: func(c *cobra.Command, args []string) error {
		k, err := cl()
		if err != nil {
			return err
		}
		ps, err := k.Previews(c.Context(), args[0])
		if err != nil {
			return err
		}
		if g.json {
			return printJSON(c, map[string]any{"previews": ps})
		}
		tw := newTable(c.OutOrStdout(), "ID", "PORT", "CREATED", "EXPIRES")
		for _, p := range ps {
			tw.row(p.ID, p.Port, p.CreatedAt.Format(time.RFC3339), p.ExpiresAt.Format(time.RFC3339))
		}
		return tw.flush()
	}}
	unpreview := &cobra.Command{Use: "unpreview ID PREVIEW_ID", Short: "Delete a preview at once (pv-…): its URL stops working", Args: cobra.ExactArgs(2), RunE: func(c *cobra.Command, args []string) error {
		if strings.HasPrefix(args[1], apiv1.PreviewTokenPrefix) || strings.Contains(args[1], apiv1.PreviewPathPrefix) {
			// Never send the secret where an id goes (it would land in
			// logs as part of the path).
			return usageError{errors.New("give the preview's id (pv-…, from `paddock session previews`), not its token or URL")}
		}
		k, err := cl()
		if err != nil {
			return err
		}
		return k.DeletePreview(c.Context(), args[0], args[1])
	}}
	return []*cobra.Command{preview, previews, unpreview}
}
