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
		Short: "Recompute the hash chain and hold it to the recorded head; exit 1 naming what cannot be proven",
		Long: `Recompute every hash of the session's ledger and check each link, then
compare the chain with the head recorded as entries were appended (how
many there are and the hash of the last). Exit 0 only when both hold.

Exit 1, naming the first entry that fails, when an entry was changed,
removed or moved; when the chain ends before the recorded head (its
newest entries were removed, or all of them); when its last hash is not
the recorded one; or when no head was recorded, so the tail cannot be
proven whole. Exit 3 when the database has no session of that id at all.
The head lives in the same database: keep an export, or the head this
prints, elsewhere if someone who can rewrite that file is a concern.`,
		Args: cobra.ExactArgs(1),
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
			out := c.OutOrStdout()
			switch {
			case g.json:
				json.NewEncoder(out).Encode(res)
			case res.OK:
				fmt.Fprintf(out, "ok: %d entries, head %s (the recorded head)\n", res.Entries, res.Head)
			case res.Reason == ledger.ReasonUnknownSession:
				fmt.Fprintf(out, "unknown session: %s; check the id and --state-dir (%s)\n", res.Detail, g.stateDir)
			case res.Reason == ledger.ReasonTruncated, res.Reason == ledger.ReasonHeadMismatch, res.Reason == ledger.ReasonNoHead:
				fmt.Fprintf(out, "cannot prove the ledger whole: %s: %s (%d entries hold together)\n", res.Reason, res.Detail, res.Entries)
			default:
				fmt.Fprintf(out, "broken at seq %d: %s %s (%d entries verified before it)\n", res.BrokenSeq, res.Reason, res.Detail, res.Entries)
			}
			switch {
			case res.Reason == ledger.ReasonUnknownSession:
				return exitCodeError(exitNotFound)
			case !res.OK:
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
