package daemontest

import (
	"context"
	"testing"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
)

// Sh runs a shell line in session id through c and returns its stdout;
// an exec that fails or exits other than 0 fails the test.
func Sh(t testing.TB, c *client.Client, id, line string) string {
	t.Helper()
	res, err := c.Exec(context.Background(), id, apiv1.ExecRequest{Command: line})
	if err != nil {
		t.Fatalf("exec %q in %s: %v", line, id, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exec %q in %s: exit %d: %s%s", line, id, res.ExitCode, res.Stdout, res.Stderr)
	}
	return string(res.Stdout)
}
