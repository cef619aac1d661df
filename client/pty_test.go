package client

import (
	"errors"
	"fmt"
	"testing"

	"github.com/coder/websocket"
)

func TestPTYExitCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
		ok   bool
	}{
		{websocket.CloseError{Code: websocket.StatusNormalClosure, Reason: "exit=0"}, 0, true},
		{fmt.Errorf("read: %w", websocket.CloseError{Code: websocket.StatusNormalClosure, Reason: "exit=137"}), 137, true},
		{websocket.CloseError{Code: websocket.StatusNormalClosure, Reason: "the daemon is shutting down"}, 0, false},
		{websocket.CloseError{Code: websocket.StatusNormalClosure, Reason: "exit=x"}, 0, false},
		{websocket.CloseError{Code: websocket.StatusGoingAway, Reason: "exit=1"}, 0, false},
		{errors.New("exit=1"), 0, false},
	} {
		code, ok := PTYExitCode(tc.err)
		if code != tc.code || ok != tc.ok {
			t.Errorf("PTYExitCode(%v) = %d, %v; want %d, %v", tc.err, code, ok, tc.code, tc.ok)
		}
	}
}
