package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"

	"paddock.dev/paddock/hostd/auth"
)

// newTenantCmd is `paddock tenant add|ls|rm`: the tenants file that
// `paddock serve --tenants` reads. It edits the file only; the daemon
// reads it again on SIGHUP.
func newTenantCmd(g *globals) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "tenant",
		Short: "Tenants of the daemon: the tenants file (--tenants FILE; env PADDOCK_TENANTS)",
		Long: `Tenants of the daemon. A tenant token sees and creates only its own
sessions and sandboxes; another tenant's are 404 to it.

The tenants file holds each tenant's name and the SHA-256 of its token,
never the token. These verbs edit it (mode 0600, replaced atomically);
a running paddock serve --tenants FILE reads it again on SIGHUP
(kill -HUP <pid>).

What a tenant's live sandboxes may hold together (disk_mb, memory_mb,
cpus) is set in the file itself, per tenant ("limits") or for all
("default_limits"); these verbs keep it. See docs/tenants.md.`,
	}
	cmd.PersistentFlags().StringVar(&file, "tenants", os.Getenv("PADDOCK_TENANTS"), "the tenants file; env PADDOCK_TENANTS")
	need := func() error {
		if file == "" {
			return usageError{errors.New("no tenants file: pass --tenants FILE (or set PADDOCK_TENANTS)")}
		}
		return nil
	}
	var rotate bool
	add := &cobra.Command{
		Use:   "add NAME",
		Short: "Add a tenant (or --rotate its token); prints the new token once",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := need(); err != nil {
				return err
			}
			name := args[0]
			if !auth.ValidTenantName(name) {
				return usageError{fmt.Errorf("tenant name %q: use a-z, 0-9 and '-', 1 to 63 characters", name)}
			}
			var token string
			err := editTenants(file, true, func(tf *auth.TenantsFile) error {
				i := slices.IndexFunc(tf.Tenants, func(e auth.TenantEntry) bool { return e.Name == name })
				if i >= 0 && !rotate {
					return conflictError{fmt.Errorf("tenant %s exists already in %s (--rotate gives it a new token)", name, file)}
				}
				if i < 0 && rotate {
					return notFoundError{fmt.Errorf("no tenant %s in %s to rotate", name, file)}
				}
				var sum string
				token, sum = auth.NewTenantToken()
				if i >= 0 {
					tf.Tenants[i].TokenSHA256 = sum
				} else {
					tf.Tenants = append(tf.Tenants, auth.TenantEntry{Name: name, TokenSHA256: sum})
				}
				return nil
			})
			if err != nil {
				return err
			}
			fmt.Fprintln(c.OutOrStdout(), token)
			fmt.Fprintf(c.ErrOrStderr(), "paddock: tenant %s's token is above, shown once (%s keeps only its hash); send paddock serve SIGHUP to use it\n", name, file)
			return nil
		},
	}
	add.Flags().BoolVar(&rotate, "rotate", false, "give an existing tenant a new token (the old one stops working at the daemon's next SIGHUP)")
	ls := &cobra.Command{Use: "ls", Short: "List the tenants", Args: cobra.NoArgs, RunE: func(c *cobra.Command, _ []string) error {
		if err := need(); err != nil {
			return err
		}
		tf, err := auth.ReadTenantsFile(file)
		if err != nil {
			return err
		}
		if _, err := tf.Check(); err != nil {
			return fmt.Errorf("tenants file %s: %w", file, err)
		}
		names := []string{}
		for _, e := range tf.Tenants {
			names = append(names, e.Name)
		}
		if g.json {
			enc := json.NewEncoder(c.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(map[string]any{"tenants": names})
		}
		tw := newTable(c.OutOrStdout(), "NAME")
		for _, n := range names {
			tw.row(n)
		}
		return tw.flush()
	}}
	rm := &cobra.Command{Use: "rm NAME", Short: "Remove a tenant (its token stops working at the daemon's next SIGHUP)", Args: cobra.ExactArgs(1), RunE: func(c *cobra.Command, args []string) error {
		if err := need(); err != nil {
			return err
		}
		return editTenants(file, false, func(tf *auth.TenantsFile) error {
			n := len(tf.Tenants)
			tf.Tenants = slices.DeleteFunc(tf.Tenants, func(e auth.TenantEntry) bool { return e.Name == args[0] })
			if len(tf.Tenants) == n {
				return notFoundError{fmt.Errorf("no tenant %s in %s", args[0], file)}
			}
			return nil
		})
	}}
	cmd.AddCommand(add, ls, rm)
	return cmd
}

// editTenants changes the tenants file under a lock on its directory, so
// two edits at once do not lose one. create allows a file that does not
// exist yet.
func editTenants(file string, create bool, fn func(*auth.TenantsFile) error) error {
	dir, err := os.Open(filepath.Dir(file))
	if err != nil {
		return err
	}
	defer dir.Close()
	unlock, err := lockDir(dir)
	if err != nil {
		return fmt.Errorf("lock %s: %w", dir.Name(), err)
	}
	defer unlock()
	tf, err := auth.ReadTenantsFile(file)
	if errors.Is(err, fs.ErrNotExist) && create {
		tf, err = auth.TenantsFile{}, nil
	}
	if err != nil {
		return err
	}
	if _, err := tf.Check(); err != nil {
		return fmt.Errorf("tenants file %s: %w", file, err)
	}
	if err := fn(&tf); err != nil {
		return err
	}
	return auth.WriteTenantsFile(file, tf)
}
