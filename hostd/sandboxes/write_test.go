package sandboxes

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/hostd/session"
)

// TestSandboxWriteHangupLedgered: a caller that hangs up as its fs/write
// reaches the guest cannot have a file written with no ledger entry. The
// write may have landed (the agent does not stop a write when the
// connection drops), so, as an exec cut off that way, it is ledgered as
// file.write with interrupted and the error, small or written in parts.
// A command hook stands in for the hang-up: it cancels the caller's
// context just before the run step. It runs on the fake backend.
func TestSandboxWriteHangupLedgered(t *testing.T) {
	r := fakeRig(t, nil)
	var hangUp context.CancelFunc
	r.m.AddCommandHook("hangup", func(_ context.Context, c *session.Command) error {
		if strings.Contains(c.Text, "hangup") && hangUp != nil {
			hangUp()
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := r.s.Create(ctx, "", SandboxRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	big := base64.StdEncoding.EncodeToString(make([]byte, api.MaxFileWriteBytes+1))
	for i, content := range []string{"aGk=", big} {
		cctx, c := context.WithCancel(ctx)
		hangUp = c
		path := []string{"/workspace/hangup-small", "/workspace/hangup-big"}[i]
		if _, err := r.s.WriteFile(cctx, "", sb.ID, SandboxWrite{Path: path, ContentBase64: content}); err == nil {
			t.Errorf("%s: the write went through a hung-up call", path)
		}
		c()
	}
	hangUp = nil
	ws := entries(t, r.led, sb.ID, "file.write")
	if len(ws) != 1 {
		// The small write's guest call failed at once; the big one failed
		// in its first part, before anything could be renamed into place,
		// so only the small one may have written.
		t.Fatalf("file.write entries: %v, want the small write's, interrupted", ws)
	}
	if ws[0]["path"] != "/workspace/hangup-small" || ws[0]["interrupted"] != true || ws[0]["error"] == "" {
		t.Errorf("the hung-up write's entry: %v", ws[0])
	}
}
