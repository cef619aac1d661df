package console_test

import (
	"context"
	"strings"
	"testing"

	"paddock.dev/paddock/api"
)

// TestSignInListsSessions: the admin signs in through the real gateway and
// sees the session made through the SDK in the sessions table, with its
// state and backend.
func TestSignInListsSessions(t *testing.T) {
	ctx, d, _ := startConsole(t)
	s, err := d.Client.CreateSession(context.Background(), api.CreateRequest{Agent: "listed", TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	signIn(t, ctx, d.Token)
	row := waitText(t, ctx, `#sessions-body tr[data-id="`+s.ID+`"]`, s.ID)
	for _, want := range []string{"listed", "running", s.Backend} {
		if !strings.Contains(row, want) {
			t.Errorf("the session's row %q lacks %q", row, want)
		}
	}
	shot(t, ctx, "sessions")
}
