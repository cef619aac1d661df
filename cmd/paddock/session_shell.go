package main

import (
	"context"

	"github.com/coder/websocket"
	"github.com/spf13/cobra"

	"paddock.dev/paddock/client"
)

// shellCommand is `paddock session shell`: a terminal in a session
// through the daemon (GET .../pty).
func shellCommand(cl func() (*client.Client, error)) *cobra.Command {
	return &cobra.Command{
		Use:   "shell ID [-- COMMAND...]",
		Short: "Open a terminal in the session (exits with the shell's code)",
		Long: `Open a terminal in the session: the guest user's login shell, or COMMAND
(one argument is a shell line; several are quoted into one).

When stdin is a terminal it is put in raw mode and the session's terminal
follows its size; otherwise stdin and stdout are copied as they are (end
of input sends ^D). The exit code is the shell's.

Refused (exit 5) on sessions with process rules or a read-only workspace,
and to session tokens: a shell would walk around what those enforce.`,
		Example: `  paddock session shell ses-0123456789abcdef
  paddock session shell ses-0123456789abcdef -- make test`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			k, err := cl()
			if err != nil {
				return err
			}
			var line string
			switch {
			case len(args) == 2:
				line = args[1]
			case len(args) > 2:
				line = shellJoin(args[1:])
			}
			code, err := runTerminal(c.Context(), func(ctx context.Context, cols, rows int) (*websocket.Conn, error) {
				return k.DialPTY(ctx, args[0], client.PTYOptions{Cols: min(cols, 1000), Rows: min(rows, 1000), Command: line})
			})
			if err != nil {
				return err
			}
			if code != 0 {
				return exitCodeError(code)
			}
			return nil
		},
	}
}
