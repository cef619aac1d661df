package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/coder/websocket"

	"paddock.dev/paddock/api"
)

// PTYOptions are what a terminal opens with.
type PTYOptions struct {
	// Cols and Rows are its size (0: 80x24).
	Cols, Rows int
	// Command is a shell line; "" is the guest user's login shell.
	Command string
	// Ticket, when set, opens the terminal with a ticket (PTYTicket)
	// instead of the client's token.
	Ticket string
}

// DialPTY opens a terminal in session id: a WebSocket whose binary
// messages are terminal bytes both ways. Resize it with ResizePTY; the
// error that ends it tells the shell's exit code (PTYExitCode). A refusal
// before the upgrade is an *Error with the daemon's status and message.
func (c *Client) DialPTY(ctx context.Context, id string, opts PTYOptions) (*websocket.Conn, error) {
	q := url.Values{}
	if opts.Cols > 0 {
		q.Set("cols", strconv.Itoa(opts.Cols))
	}
	if opts.Rows > 0 {
		q.Set("rows", strconv.Itoa(opts.Rows))
	}
	if opts.Command != "" {
		q.Set("command", opts.Command)
	}
	h := http.Header{}
	if opts.Ticket != "" {
		q.Set("ticket", opts.Ticket)
	} else {
		h.Set("Authorization", "Bearer "+c.token)
	}
	u := c.base + sp(id) + "/pty"
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	conn, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: c.hc, HTTPHeader: h})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			var data []byte
			if resp.Body != nil {
				data, _ = io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			}
			return nil, decodeError(resp.StatusCode, data)
		}
		return nil, err
	}
	conn.SetReadLimit(1 << 20)
	return conn, nil
}

// PTYTicket makes a single-use ticket that opens one terminal on session
// id within 30 seconds, for a client that cannot send Authorization (a
// browser's WebSocket): GET .../pty?ticket=….
func (c *Client) PTYTicket(ctx context.Context, id string) (*api.TerminalTicket, error) {
	var out api.TerminalTicket
	return &out, c.do(ctx, http.MethodPost, sp(id)+"/pty-ticket", nil, nil, &out)
}

// ResizePTY sends a terminal resize.
func ResizePTY(ctx context.Context, conn *websocket.Conn, cols, rows int) error {
	data, err := json.Marshal(api.TerminalResize{Resize: api.TerminalSize{Cols: cols, Rows: rows}})
	if err != nil {
		return err
	}
	return conn.Write(ctx, websocket.MessageText, data)
}

// PTYExitCode reads the shell's exit code from the error that ended a
// terminal: a normal close whose reason is exit=<code>
// (api.PTYExitReasonPrefix). The guest agent writes that reason and hostd
// relays it, or writes it itself when it saw the exit.
func PTYExitCode(err error) (int, bool) {
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusNormalClosure {
		return 0, false
	}
	v, ok := strings.CutPrefix(ce.Reason, api.PTYExitReasonPrefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	return n, err == nil
}
