package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"paddock.dev/paddock/guest/api"
)

// DialPort opens a TCP stream to port on the sandbox's own loopback
// (127.0.0.1, or ::1 when only that listens), through the agent: a
// stream of its own to the agent, upgraded by GET /v1/forward. ctx bounds
// the opening only; the connection lives until it is closed. The agent's
// refusals are *Error: 400, 409 (too many forwards open) and 502 (nothing
// listens on the port).
func (c *Client) DialPort(ctx context.Context, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("guest agent forward: port %d is not from 1 to 65535", port)
	}
	conn, err := c.dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("guest agent forward: %w", err)
	}
	// The handshake ends at ctx's deadline, or at once when ctx is done.
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (net.Conn, error) {
		stop()
		conn.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("guest agent forward: %w", ctx.Err())
		}
		return nil, err
	}
	req := "GET /v1/forward?port=" + strconv.Itoa(port) + " HTTP/1.1\r\nHost: guest\r\nConnection: Upgrade\r\nUpgrade: " + api.ForwardProtocol + "\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		return fail(fmt.Errorf("guest agent forward: %w", err))
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodGet})
	if err != nil {
		return fail(fmt.Errorf("guest agent forward: read the answer: %w", err))
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		var ae api.Error
		if json.Unmarshal(data, &ae) != nil || ae.Error == "" {
			ae.Error = strings.TrimSpace(string(data))
		}
		return fail(&Error{Status: resp.StatusCode, Code: ae.Code, Message: ae.Error})
	}
	if !strings.EqualFold(resp.Header.Get("Upgrade"), api.ForwardProtocol) {
		return fail(fmt.Errorf("guest agent forward: 101 without Upgrade: %s", api.ForwardProtocol))
	}
	if !stop() {
		return fail(ctx.Err())
	}
	_ = conn.SetDeadline(time.Time{})
	if br.Buffered() > 0 {
		return &bufferedConn{Conn: conn, r: br}, nil
	}
	return conn, nil
}

// bufferedConn is a connection whose first bytes were read ahead into r.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) {
	if c.r.Buffered() > 0 {
		return c.r.Read(p)
	}
	return c.Conn.Read(p)
}

// CloseWrite half-closes when the stream underneath can.
func (c *bufferedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return fmt.Errorf("guest agent forward: the stream cannot half-close")
}
