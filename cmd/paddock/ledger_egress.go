package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"paddock.dev/paddock/hostd/store"
)

// egressLogLine is one egress log row as `paddock ledger egress` prints
// it (JSON Lines, so names a sandbox chose cannot forge lines).
type egressLogLine struct {
	ID       int64           `json:"id"`
	Session  string          `json:"session"`
	Time     time.Time       `json:"time"`
	LastTime time.Time       `json:"last_time"`
	Kind     string          `json:"kind"`
	Host     string          `json:"host"`
	Reason   string          `json:"reason,omitempty"`
	Count    int64           `json:"count"`
	Summary  bool            `json:"summary"`
	Data     json.RawMessage `json:"data"`
}

// newLedgerEgressCmd is `paddock ledger egress SESSION`: the session's
// egress log (the network decisions kept outside the hash chain, pruned
// after --egress-log-retention).
func newLedgerEgressCmd(open func() (*store.Store, error)) *cobra.Command {
	var after int64
	var limit int
	c := &cobra.Command{
		Use:   "egress SESSION",
		Short: "Write the session's egress log (network decisions, outside the hash chain) as JSON Lines",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if limit < 1 || limit > store.MaxEgressLogList {
				return usageError{fmt.Errorf("--limit %d: from 1 to %d", limit, store.MaxEgressLogList)}
			}
			if after < 0 {
				return usageError{fmt.Errorf("--after %d: an id, 0 or more", after)}
			}
			st, err := open()
			if err != nil {
				return err
			}
			defer st.Close()
			rows, err := st.ListEgressLog(c.Context(), args[0], after, limit)
			if err != nil {
				return err
			}
			enc := json.NewEncoder(c.OutOrStdout())
			for _, r := range rows {
				if err := enc.Encode(egressLogLine{ID: r.ID, Session: r.Session, Time: r.Time, LastTime: r.LastTime, Kind: r.Kind,
					Host: r.Host, Reason: r.Reason, Count: r.Count, Summary: r.Summary, Data: r.Data}); err != nil {
					return err
				}
			}
			return nil
		},
	}
	c.Flags().Int64Var(&after, "after", 0, "only rows with a larger id (to continue a listing)")
	c.Flags().IntVar(&limit, "limit", 1000, "at most this many rows")
	return c
}
