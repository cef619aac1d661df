package mcp_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"paddock.dev/paddock/hostd/daemon/daemontest"
	"paddock.dev/paddock/mcp"
)

// TestMCPLargeFileWrite: session_file_write above MaxWriteBytes goes
// through a resumable upload: the file arrives whole (its SHA-256 read
// back in the sandbox), the result says it was verified, progress comes
// in bytes of the total (one notification per chunk, rising to the
// total), and content over MaxUploadWriteBytes is refused too_large.
func TestMCPLargeFileWrite(t *testing.T) {
	d := daemontest.New(t)
	type note struct{ done, total float64 }
	var mu sync.Mutex
	var notes []note
	cs := connectWith(t, d.Client, mcp.Options{AllowWrite: true}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			notes = append(notes, note{r.Params.Progress, r.Params.Total})
		},
	})
	var ses struct{ ID string }
	mustCall(t, cs, "session_create", map[string]any{}, &ses)

	size := 3*mcp.UploadChunkBytes + 12345
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*7 + i/251)
	}
	p := &sdk.CallToolParams{Name: "session_file_write", Arguments: map[string]any{"session": ses.ID, "path": "/workspace/big.bin", "content_base64": base64.StdEncoding.EncodeToString(data)}}
	p.SetProgressToken("upload")
	res, err := cs.CallTool(t.Context(), p)
	if err != nil || res.IsError {
		t.Fatalf("large write: %v %+v", err, res)
	}
	out, _ := res.StructuredContent.(map[string]any)
	if out["bytes"] != float64(size) || out["verified"] != true || out["upload"] == nil {
		t.Errorf("large write result: %v", out)
	}
	sum := sha256.Sum256(data)
	var ex ExecResult
	mustCall(t, cs, "session_exec", map[string]any{"session": ses.ID, "command": "sha256sum /workspace/big.bin"}, &ex)
	if !strings.HasPrefix(ex.Stdout, hex.EncodeToString(sum[:])) {
		t.Errorf("the file in the sandbox: %q, want sha256 %x", ex.Stdout, sum)
	}
	mu.Lock()
	got := append([]note(nil), notes...)
	mu.Unlock()
	if len(got) != 4 {
		t.Errorf("progress: %v, want 4 chunks", got)
	}
	for i, n := range got {
		if n.total != float64(size) || (i > 0 && n.done <= got[i-1].done) {
			t.Errorf("progress %d: %v", i, got)
		}
	}
	if len(got) > 0 && got[len(got)-1].done != float64(size) {
		t.Errorf("last progress %v, want %d", got[len(got)-1], size)
	}

	over := strings.Repeat("x", mcp.MaxUploadWriteBytes+1)
	if e := call(t, cs, "session_file_write", map[string]any{"session": ses.ID, "path": "/workspace/over", "content": over}, nil); !strings.HasPrefix(e, "too_large") {
		t.Errorf("over the cap: %q", e)
	}
}
