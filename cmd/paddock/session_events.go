package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
	"paddock.dev/paddock/errdefs"
)

// maxSinceAgo bounds --since given as a duration.
const maxSinceAgo = 10 * 365 * 24 * time.Hour

// eventLine is one event as `session events --json` writes it: one JSON
// object a line, the ledger's entries (source "ledger", with their seq)
// and the machine's events (source "vm") in time order.
type eventLine struct {
	Time   time.Time       `json:"time"`
	Source string          `json:"source"`
	Kind   string          `json:"kind"`
	Seq    int64           `json:"seq,omitempty"`
	Actor  string          `json:"actor,omitempty"`
	Data   json.RawMessage `json:"data"`
}

func ledgerLine(e apiv1.LedgerEntry) eventLine {
	return eventLine{Time: e.Time, Source: "ledger", Kind: e.Kind, Seq: e.Seq, Actor: e.Actor, Data: e.Data}
}

func vmLine(e apiv1.VMEvent) eventLine {
	return eventLine{Time: e.Time, Source: "vm", Kind: e.Kind, Data: e.Data}
}

// parseSince reads --since: an RFC 3339 time, or a duration (10m, 2h)
// meaning that long before now.
func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return time.Time{}, usageError{fmt.Errorf("--since %q: give an RFC 3339 time (2026-01-02T15:04:05Z) or a duration ago (10m, 2h)", clipArg(s))}
	}
	if d <= 0 || d > maxSinceAgo {
		return time.Time{}, usageError{fmt.Errorf("--since %s: a duration must be above 0 and at most %s", d, maxSinceAgo)}
	}
	return now.Add(-d), nil
}

func clipArg(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// eventsCommand is `session events ID [--since T] [--follow]`.
func eventsCommand(g *globals, cl func() (*client.Client, error)) *cobra.Command {
	var since string
	var follow bool
	var tail int
	cmd := &cobra.Command{
		Use:   "events ID [--since T | --tail N] [--follow]",
		Short: "What happened in a session: its ledger and its machine's events",
		Long: `Print session ID's events in time order: the ledger's entries (source
ledger: commands, files, checkpoints, rewind, ...) and what happened to
its machine (source vm: boot, checkpoint, restore, fork, stop, oom,
death).

--since T shows only the events after T, an RFC 3339 time or a duration
meaning that long ago (10m, 2h). --follow keeps printing new events as
they come, until the session ends (exit 0) or you stop it (Ctrl-C); the
daemon ends a stream after an hour (exit 1, stream_max_age): start it
again with --since the last time printed.

One answer holds at most 10000 ledger entries: the oldest ones, or with
--since those after T. --tail N shows the newest N (at most 10000) of the
ledger and of the machine's events instead. When more entries follow
what was printed, a note on stderr says so.

A table for people; --json writes one JSON object a line (time, source,
kind, seq for a ledger entry, actor, data).`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			from, err := parseSince(since, time.Now())
			if err != nil {
				return err
			}
			if tail < 0 || tail > maxEventsPage {
				return usageError{fmt.Errorf("--tail %d: give 1 to %d", tail, maxEventsPage)}
			}
			if tail > 0 && (since != "" || follow) {
				return usageError{errors.New("--tail shows the newest entries: it goes with no --since or --follow")}
			}
			k, err := cl()
			if err != nil {
				return err
			}
			w := c.OutOrStdout()
			print := printEvent(w, g.json)
			if !follow {
				ev, err := k.EventsPage(c.Context(), args[0], client.EventsQuery{Since: from, Tail: tail})
				if err != nil {
					return err
				}
				if ev.LedgerMore {
					defer moreNote(c.ErrOrStderr(), len(ev.Ledger))
				}
				lines := make([]eventLine, 0, len(ev.Ledger)+len(ev.VMEvents))
				for _, e := range ev.Ledger {
					lines = append(lines, ledgerLine(e))
				}
				for _, e := range ev.VMEvents {
					lines = append(lines, vmLine(e))
				}
				slices.SortStableFunc(lines, func(a, b eventLine) int { return a.Time.Compare(b.Time) })
				for _, l := range lines {
					if err := print(l); err != nil {
						return err
					}
				}
				return nil
			}
			err = k.FollowEvents(c.Context(), args[0], from, func(e client.SessionEvent) error {
				if e.VM != nil {
					return print(vmLine(*e.VM))
				}
				return print(ledgerLine(*e.Ledger))
			})
			var ended *errdefs.StatusError
			if errors.As(err, &ended) && ended.Code == errdefs.CodeSessionEnded {
				fmt.Fprintln(c.ErrOrStderr(), "the session ended")
				return nil
			}
			return err
		},
	}
	cmd.Flags().StringVar(&since, "since", "", "only events after this time (RFC 3339) or this long ago (10m)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new events as they come")
	cmd.Flags().IntVar(&tail, "tail", 0, "only the newest N ledger entries and machine events (at most 10000)")
	return cmd
}

// maxEventsPage is the most ledger entries one events answer holds (the
// daemon's bound, session.MaxEventsPage).
const maxEventsPage = 10000

// moreNote says on w that the n ledger entries printed are not all.
func moreNote(w io.Writer, n int) {
	fmt.Fprintf(w, "more ledger entries follow the %d shown: --tail N shows the newest, --since T those after T\n", n)
}

// printEvent returns a printer of one event a line: JSON, or a table row
// with fixed columns (rows come one by one when following, so the table
// cannot wait to measure them), the header before the first.
func printEvent(w io.Writer, asJSON bool) func(eventLine) error {
	if asJSON {
		enc := json.NewEncoder(w)
		return func(l eventLine) error { return enc.Encode(l) }
	}
	header := false
	return func(l eventLine) error {
		if !header {
			header = true
			if _, err := fmt.Fprintf(w, "%-20s  %-6s  %-22s  %s\n", "TIME", "SOURCE", "KIND", "DETAIL"); err != nil {
				return err
			}
		}
		detail := string(newJSONCell(l.Data))
		if l.Seq > 0 {
			detail = fmt.Sprintf("#%d %s", l.Seq, detail)
		}
		if len(detail) > 200 {
			cut := 200
			for cut > 0 && !utf8.RuneStart(detail[cut]) {
				cut--
			}
			detail = detail[:cut] + "…"
		}
		_, err := fmt.Fprintf(w, "%-20s  %-6s  %-22s  %s\n", l.Time.UTC().Format(time.RFC3339), l.Source, cell(l.Kind), strings.TrimSpace(detail))
		return err
	}
}
