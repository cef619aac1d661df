package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"

	"github.com/coder/websocket"
	"golang.org/x/term"

	"paddock.dev/paddock/guest/client"
)

// runTerminal bridges this process's terminal (raw mode when stdin is a
// terminal) to a PTY that open makes at the given size, and returns the
// remote exit code. The guest agent and the daemon (paddock session shell)
// speak the same frames: bytes, a resize as JSON text, exit=<code>.
func runTerminal(ctx context.Context, open func(ctx context.Context, cols, rows int) (*websocket.Conn, error)) (int, error) {
	cols, rows := 80, 24
	fd := int(os.Stdin.Fd())
	isTTY := term.IsTerminal(fd)
	if isTTY {
		if w, h, err := term.GetSize(fd); err == nil {
			cols, rows = w, h
		}
	}
	conn, err := open(ctx, cols, rows)
	if err != nil {
		return 0, err
	}
	defer conn.CloseNow()
	if isTTY {
		old, err := term.MakeRaw(fd)
		if err != nil {
			return 0, err
		}
		defer term.Restore(fd, old)
		winch := make(chan os.Signal, 1)
		notifyResize(winch)
		defer signal.Stop(winch)
		go func() {
			for range winch {
				// Sizes past 1000 cells are the daemon's limit: clamped.
				if w, h, err := term.GetSize(fd); err == nil && w > 0 && h > 0 {
					client.Resize(ctx, conn, uint16(min(w, 1000)), uint16(min(h, 1000)))
				}
			}
		}()
	}
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := os.Stdin.Read(buf)
			if n > 0 {
				if conn.Write(ctx, websocket.MessageBinary, buf[:n]) != nil {
					return
				}
			}
			if err != nil {
				// End of input: send ^D so a shell reading it exits.
				conn.Write(ctx, websocket.MessageBinary, []byte{4})
				return
			}
		}
	}()
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			if code, ok := client.ExitCode(err); ok {
				return code, nil
			}
			if ce := (websocket.CloseError{}); errors.As(err, &ce) && ce.Reason != "" {
				return 0, fmt.Errorf("the terminal closed: %s", ce.Reason)
			}
			return 0, fmt.Errorf("terminal: %w", err)
		}
		os.Stdout.Write(data)
	}
}
