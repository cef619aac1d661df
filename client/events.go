package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"paddock.dev/paddock/api"
	"paddock.dev/paddock/errdefs"
)

// SessionEvent is one event of a session's events stream: a ledger entry
// (Source "ledger", Ledger set) or something that happened to its machine
// (Source "vm", VM set).
type SessionEvent struct {
	Source string
	Ledger *api.LedgerEntry
	VM     *api.VMEvent
}

// maxEventLine bounds one line of the events stream.
const maxEventLine = 4 << 20

// FollowEvents reads .../events/stream: the session's ledger entries and
// VM events newer than since (the zero time: all of them), then new ones
// as they come, each handed to fn in the order the daemon sent them. It
// returns when fn returns an error (that error), when ctx ends (nil), or
// when the daemon ends the stream: the session ended (an
// *errdefs.StatusError whose Code is errdefs.CodeSessionEnded) or the
// stream reached its age limit (errdefs.CodeStreamMaxAge).
func (c *Client) FollowEvents(ctx context.Context, id string, since time.Time, fn func(SessionEvent) error) error {
	p := sp(id) + "/events/stream"
	if !since.IsZero() {
		p += "?since=" + url.QueryEscape(since.UTC().Format(time.RFC3339Nano))
	}
	resp, err := c.openStream(ctx, http.MethodGet, p, nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), maxEventLine)
	var event string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = line[7:]
		case strings.HasPrefix(line, "data: "):
			data := []byte(line[6:])
			var ev SessionEvent
			switch event {
			case "ledger":
				ev = SessionEvent{Source: "ledger", Ledger: &api.LedgerEntry{}}
				err = json.Unmarshal(data, ev.Ledger)
			case "vm":
				ev = SessionEvent{Source: "vm", VM: &api.VMEvent{}}
				err = json.Unmarshal(data, ev.VM)
			case "error":
				var d struct {
					Error string `json:"error"`
					Code  string `json:"code"`
				}
				if err := json.Unmarshal(data, &d); err != nil {
					return fmt.Errorf("events stream: bad event: %w", err)
				}
				return fmt.Errorf("events stream: %w", errdefs.FromHTTP(0, d.Code, d.Error))
			default:
				continue // a kind this client does not know
			}
			if err != nil {
				return fmt.Errorf("events stream: bad %s event: %w", event, err)
			}
			if err := fn(ev); err != nil {
				return err
			}
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("events stream: %w", err)
	}
	return fmt.Errorf("events stream: the daemon closed it without saying why")
}
