package api

import "time"

// PTYExitReasonPrefix starts the close reason of a terminal whose shell
// exited: "exit=" and the exit code, on a normal closure (1000).
const PTYExitReasonPrefix = "exit="

// Limits of terminals a client sees.
const (
	MaxTerminalDim          = 1000 // cols and rows, at open and on resize
	DefaultTerminalCols     = 80
	DefaultTerminalRows     = 24
	MaxTerminalCommandBytes = 4096 // the command query parameter
)

// TerminalResize is the text frame that resizes an open terminal.
type TerminalResize struct {
	Resize TerminalSize `json:"resize"`
}

// TerminalSize is a terminal's size in character cells.
type TerminalSize struct {
	Cols int `json:"cols"`
	Rows int `json:"rows"`
}

// TerminalTicket answers POST .../pty-ticket.
type TerminalTicket struct {
	Ticket    string    `json:"ticket"`
	ExpiresAt time.Time `json:"expires_at"`
}
