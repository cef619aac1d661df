package agent_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"paddock.dev/paddock/guest/api"
)

func TestUpload(t *testing.T) {
	t.Parallel()
	a := startAgent(t, nil)
	ctx := testCtx(t)
	data := randomBytes(t, 5<<20+17)
	sum := sha256.Sum256(data)
	const id = "up-1_A"
	const part = 2 << 20

	// A part at the wrong offset is refused with where to continue.
	_, err := a.c.UploadPart(ctx, id, part, data[part:2*part])
	wantStatus(t, err, http.StatusConflict)
	if !strings.Contains(err.Error(), "received") || !strings.Contains(err.Error(), "continue at offset 0") {
		t.Errorf("out of order part: %v", err)
	}
	_, err = a.c.UploadStatus(ctx, id)
	wantStatus(t, err, http.StatusNotFound)

	var received int64
	for off := 0; off < len(data); off += part {
		p, err := a.c.UploadPart(ctx, id, int64(off), data[off:min(off+part, len(data))])
		if err != nil {
			t.Fatal(err)
		}
		received = p.Received
		if off == 0 {
			// Resending the first part (a lost answer) is out of order now.
			_, err := a.c.UploadPart(ctx, id, 0, data[:part])
			wantStatus(t, err, http.StatusConflict)
			if !strings.Contains(err.Error(), "2097152 bytes received") {
				t.Errorf("conflict does not say what was received: %v", err)
			}
		}
	}
	st, err := a.c.UploadStatus(ctx, id)
	if err != nil || st.Received != int64(len(data)) || received != int64(len(data)) {
		t.Fatalf("status %+v, %v; want %d received", st, err, len(data))
	}

	// The target holds older content that a failed complete must not touch.
	target := filepath.Join(a.root, "data", "set.bin")
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(target, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	wrong := sha256.Sum256([]byte("something else"))
	_, err = a.c.CompleteUpload(ctx, id, api.UploadComplete{Path: "/data/set.bin", Size: int64(len(data)), SHA256: hex.EncodeToString(wrong[:])})
	wantStatus(t, err, http.StatusConflict)
	_, err = a.c.CompleteUpload(ctx, id, api.UploadComplete{Path: "/data/set.bin", Size: int64(len(data)) + 1})
	wantStatus(t, err, http.StatusConflict)
	if got, _ := os.ReadFile(target); string(got) != "old" {
		t.Errorf("failed complete changed the target to %d bytes", len(got))
	}
	assertDirEntries(t, filepath.Dir(target), []string{"set.bin"})

	want := api.UploadResult{Path: "/data/set.bin", Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]), Verified: true}
	req := api.UploadComplete{Path: "/data/set.bin", Size: int64(len(data)), SHA256: strings.ToUpper(want.SHA256), Mode: "0600"}
	for i := range 2 { // the second call finds the first one's result
		res, err := a.c.CompleteUpload(ctx, id, req)
		if err != nil {
			t.Fatalf("complete #%d: %v", i+1, err)
		}
		if diff := cmp.Diff(want, *res); diff != "" {
			t.Errorf("complete #%d (-want +got):\n%s", i+1, diff)
		}
	}
	got, err := os.ReadFile(target)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("assembled file differs (%d bytes, %v)", len(got), err)
	}
	if fi, _ := os.Stat(target); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	assertDirEntries(t, filepath.Dir(target), []string{"set.bin"})
	_, err = a.c.CompleteUpload(ctx, id, api.UploadComplete{Path: "/data/other.bin", Size: int64(len(data))})
	wantStatus(t, err, http.StatusConflict)
	_, err = a.c.UploadPart(ctx, id, int64(len(data)), []byte("more"))
	wantStatus(t, err, http.StatusConflict)

	if err := a.c.AbortUpload(ctx, id); err != nil {
		t.Fatal(err)
	}
	_, err = a.c.UploadStatus(ctx, id)
	wantStatus(t, err, http.StatusNotFound)
	if err := a.c.AbortUpload(ctx, id); err != nil {
		t.Errorf("aborting twice: %v", err)
	}
}

func TestUploadRefusals(t *testing.T) {
	t.Parallel()
	a := startAgent(t, nil)
	ctx := testCtx(t)
	for _, id := range []string{"bad.id", strings.Repeat("x", 65), "a b"} {
		_, err := a.c.UploadPart(ctx, id, 0, []byte("x"))
		wantStatus(t, err, http.StatusBadRequest)
	}
	_, err := a.c.UploadPart(ctx, "big", 0, make([]byte, api.MaxPartBytes+1))
	wantStatus(t, err, http.StatusRequestEntityTooLarge)
	_, err = a.c.UploadPart(ctx, "empty", 0, nil)
	wantStatus(t, err, http.StatusBadRequest)
	_, err = a.c.CompleteUpload(ctx, "never", api.UploadComplete{Path: "/x", Size: 1})
	wantStatus(t, err, http.StatusNotFound)
	if _, err := a.c.UploadPart(ctx, "short", 0, []byte("abc")); err != nil {
		t.Fatal(err)
	}
	_, err = a.c.CompleteUpload(ctx, "short", api.UploadComplete{Path: "/x", Size: 3, SHA256: "nothex"})
	wantStatus(t, err, http.StatusBadRequest)
	_, err = a.c.CompleteUpload(ctx, "short", api.UploadComplete{Path: "../x", Size: 3})
	wantStatus(t, err, http.StatusBadRequest)
	res, err := a.c.CompleteUpload(ctx, "short", api.UploadComplete{Path: "/x", Size: 3})
	if err != nil || res.Verified || res.Size != 3 {
		t.Errorf("unverified complete: %+v, %v", res, err)
	}
}

func assertDirEntries(t *testing.T, dir string, want []string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("entries of %s (-want +got):\n%s", dir, diff)
	}
}
