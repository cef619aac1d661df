package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"paddock.dev/paddock/hostd/ledger"
	"paddock.dev/paddock/hostd/store"
)

func newLedgerCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "ledger", Short: "Audit session ledgers in the state dir (works while the daemon runs)"}
	open := func() (*store.Store, *ledger.Ledger, error) {
		path := filepath.Join(g.stateDir, "paddock.db")
		if _, err := os.Stat(path); err != nil {
			return nil, nil, fmt.Errorf("no database at %s: %w (is --state-dir the daemon's?)", path, err)
		}
		st, err := store.Open(path)
		if err != nil {
			return nil, nil, err
		}
		return st, ledger.New(st), nil
	}
	verify := &cobra.Command{
		Use:   "verify SESSION",
		Short: "Recompute the hash chain; exit 1 and name the first broken entry if it was altered",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			st, l, err := open()
			if err != nil {
				return err
			}
			defer st.Close()
			res, err := l.Verify(c.Context(), args[0])
			if err != nil {
				return err
			}
			if g.json {
				json.NewEncoder(c.OutOrStdout()).Encode(res)
			} else if res.OK {
				fmt.Fprintf(c.OutOrStdout(), "ok: %d entries, head %s\n", res.Entries, res.Head)
			} else {
				fmt.Fprintf(c.OutOrStdout(), "broken at seq %d: %s %s (%d entries verified before it)\n", res.BrokenSeq, res.Reason, res.Detail, res.Entries)
			}
			if !res.OK {
				return exitCodeError(exitError)
			}
			return nil
		},
	}
	export := &cobra.Command{
		Use:   "export SESSION",
		Short: "Write the ledger as JSON Lines",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			st, l, err := open()
			if err != nil {
				return err
			}
			defer st.Close()
			return l.ExportJSONL(c.Context(), args[0], c.OutOrStdout())
		},
	}
	cmd.AddCommand(verify, export, newLedgerEgressCmd(func() (*store.Store, error) { st, _, err := open(); return st, err }))
	return cmd
}
