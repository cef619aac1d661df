package agent_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
)

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFileRoundTrip(t *testing.T) {
	t.Parallel()
	a := startAgent(t, nil)
	ctx := testCtx(t)
	data := randomBytes(t, 1<<20)
	info, err := a.c.WriteFile(ctx, api.FileContent{Path: "/new dir/nested/file one.bin", Content: data})
	if err != nil {
		t.Fatal(err)
	}
	if info.Size != int64(len(data)) || info.Mode != "0644" || info.Type != api.TypeFile {
		t.Errorf("written: %+v", info)
	}
	got, err := a.c.ReadFile(ctx, "/new dir/nested/file one.bin")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Content, data) {
		t.Errorf("read back %d bytes, not the %d written", len(got.Content), len(data))
	}
	onDisk, err := os.ReadFile(filepath.Join(a.root, "new dir/nested/file one.bin"))
	if err != nil || !bytes.Equal(onDisk, data) {
		t.Errorf("file on disk differs: %v", err)
	}

	// Overwrite with a mode; no temporary file is left behind.
	if _, err := a.c.WriteFile(ctx, api.FileContent{Path: "/new dir/nested/file one.bin", Content: []byte("#!/bin/sh\n"), Mode: "0755"}); err != nil {
		t.Fatal(err)
	}
	st, err := a.c.Stat(ctx, "/new dir/nested/file one.bin")
	if err != nil || st.Mode != "0755" || st.Size != 10 {
		t.Errorf("after overwrite: %+v, %v", st, err)
	}
	l, err := a.c.List(ctx, "/new dir/nested")
	if err != nil || len(l.Entries) != 1 {
		t.Errorf("directory holds %+v, %v; want the one file", l, err)
	}
}

func TestFileWriteRefusals(t *testing.T) {
	t.Parallel()
	a := startAgent(t, nil)
	if err := os.MkdirAll(filepath.Join(a.root, "dir/sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	no := false
	tests := []struct {
		name string
		in   api.FileContent
		want int
	}{
		{"missing parent without parents", api.FileContent{Path: "/nope/file", Parents: &no}, http.StatusNotFound},
		{"onto a directory", api.FileContent{Path: "/dir/sub"}, http.StatusConflict},
		{"the root", api.FileContent{Path: "/"}, http.StatusBadRequest},
		{"bad mode", api.FileContent{Path: "/dir/f", Mode: "rwx"}, http.StatusBadRequest},
		{"mode out of range", api.FileContent{Path: "/dir/f", Mode: "17777"}, http.StatusBadRequest},
		{"too large", api.FileContent{Path: "/dir/f", Content: make([]byte, api.MaxFileWriteBytes+1)}, http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := a.c.WriteFile(testCtx(t), tt.in)
			wantStatus(t, err, tt.want)
		})
	}
}

func TestListAndStat(t *testing.T) {
	t.Parallel()
	a := startAgent(t, nil)
	ctx := testCtx(t)
	base := filepath.Join(a.root, "ws")
	for _, d := range []string{"ws/c-dir"} {
		if err := os.MkdirAll(filepath.Join(a.root, d), 0o750); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(base, "b.txt"), []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "a.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("b.txt", filepath.Join(base, "d-link")); err != nil {
		t.Fatal(err)
	}
	l, err := a.c.List(ctx, "/ws/")
	if err != nil {
		t.Fatal(err)
	}
	type entry struct{ Name, Path, Type, Mode, Target string }
	var got []entry
	for _, e := range l.Entries {
		got = append(got, entry{e.Name, e.Path, e.Type, e.Mode, e.Target})
	}
	want := []entry{
		{"a.txt", "/ws/a.txt", api.TypeFile, "0644", ""},
		{"b.txt", "/ws/b.txt", api.TypeFile, "0600", ""},
		{"c-dir", "/ws/c-dir", api.TypeDir, "0750", ""},
		{"d-link", "/ws/d-link", api.TypeSymlink, "0777", "b.txt"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("listing (-want +got):\n%s", diff)
	}
	if l.Kind != "dir" || l.Path != "/ws" || l.Truncated || l.Self == nil || l.Self.Type != api.TypeDir {
		t.Errorf("listing header: %+v", l)
	}

	l, err = a.c.List(ctx, "/ws/b.txt")
	if err != nil {
		t.Fatal(err)
	}
	if l.Kind != "file" || len(l.Entries) != 1 || l.Entries[0].Size != 5 || l.Entries[0].Name != "b.txt" {
		t.Errorf("stat listing: %+v", l)
	}
	_, err = a.c.List(ctx, "/ws/missing")
	wantStatus(t, err, http.StatusNotFound)
	_, err = a.c.ReadFile(ctx, "/ws")
	wantStatus(t, err, http.StatusBadRequest)
}

func TestBadPaths(t *testing.T) {
	t.Parallel()
	a := startAgent(t, nil)
	paths := map[string]string{
		"relative":  "etc/passwd",
		"dotdot":    "/ws/../etc/passwd",
		"trailing":  "/ws/..",
		"nul":       "/ws/a\x00b",
		"newline":   "/ws/a\nb",
		"empty":     "",
		"too long":  "/" + strings.Repeat("a", 4096),
		"cr inside": "/ws/a\rb",
	}
	for name, p := range paths {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			_, err := a.c.List(ctx, p)
			wantStatus(t, err, http.StatusBadRequest)
			_, err = a.c.ReadFile(ctx, p)
			wantStatus(t, err, http.StatusBadRequest)
			_, err = a.c.WriteFile(ctx, api.FileContent{Path: p, Content: []byte("x")})
			wantStatus(t, err, http.StatusBadRequest)
			wantStatus(t, a.c.DeleteFile(ctx, p, true), http.StatusBadRequest)
			_, err = a.c.ReadRange(ctx, p, 0, 10, false)
			wantStatus(t, err, http.StatusBadRequest)
		})
	}
}

func TestDelete(t *testing.T) {
	t.Parallel()
	a := startAgent(t, nil)
	ctx := testCtx(t)
	for _, f := range []string{"ws/full/a/b.txt", "ws/full/c.txt", "ws/file.txt"} {
		p := filepath.Join(a.root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(a.root, "ws/empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(a.root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(a.dir, filepath.Join(a.root, "ws/outside-link")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path      string
		recursive bool
		want      int // 0: success
	}{
		{"/", true, http.StatusBadRequest},
		{"/etc", true, http.StatusBadRequest},
		{"/ws", true, http.StatusBadRequest},
		{"/ws/full", false, http.StatusConflict},
		{"/ws/missing", false, http.StatusNotFound},
		{"/ws/file.txt", false, 0},
		{"/ws/empty", false, 0},
		{"/ws/full", true, 0},
		{"/ws/outside-link", true, 0}, // removes the link, not what it points to
	}
	for _, tt := range tests {
		err := a.c.DeleteFile(ctx, tt.path, tt.recursive)
		if tt.want != 0 {
			wantStatus(t, err, tt.want)
			continue
		}
		if err != nil {
			t.Errorf("delete %s: %v", tt.path, err)
			continue
		}
		if _, err := a.c.Stat(ctx, tt.path); !client.IsStatus(err, http.StatusNotFound) {
			t.Errorf("%s still there after delete: %v", tt.path, err)
		}
	}
	if _, err := os.Stat(filepath.Join(a.dir, "root")); err != nil {
		t.Errorf("deleting a link removed its target: %v", err)
	}
}

func TestReadRange(t *testing.T) {
	t.Parallel()
	a := startAgent(t, nil)
	ctx := testCtx(t)
	data := randomBytes(t, 1<<20+123)
	if err := os.WriteFile(filepath.Join(a.root, "big.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	type rng struct {
		Data   []byte
		Size   int64
		EOF    bool
		SHA256 string
	}
	tests := []struct {
		name           string
		offset, length int64
		checksum       bool
		want           rng
	}{
		{"middle with checksum", 1000, 5000, true, rng{data[1000:6000], int64(len(data)), false, hex.EncodeToString(sum[:])}},
		{"tail", int64(len(data)) - 10, 4096, false, rng{data[len(data)-10:], int64(len(data)), true, ""}},
		{"at the end", int64(len(data)), 10, false, rng{[]byte{}, int64(len(data)), true, ""}},
		{"default length", 0, 0, false, rng{data, int64(len(data)), true, ""}},
	}
	for _, tt := range tests {
		got, err := a.c.ReadRange(ctx, "/big.bin", tt.offset, tt.length, tt.checksum)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got.Data == nil {
			got.Data = []byte{}
		}
		if diff := cmp.Diff(tt.want, rng{got.Data, got.Size, got.EOF, got.SHA256}); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
	_, err := a.c.ReadRange(ctx, "/big.bin", int64(len(data))+1, 10, false)
	wantStatus(t, err, http.StatusBadRequest)
	_, err = a.c.ReadRange(ctx, "/big.bin", 0, api.MaxRangeBytes+1, false)
	wantStatus(t, err, http.StatusBadRequest)

	huge := filepath.Join(a.root, "huge.bin")
	if err := os.WriteFile(huge, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, api.MaxFileReadBytes+1); err != nil {
		t.Fatal(err)
	}
	_, err = a.c.ReadFile(ctx, "/huge.bin")
	wantStatus(t, err, http.StatusRequestEntityTooLarge)
	if !strings.Contains(err.Error(), "range") {
		t.Errorf("413 %q does not point at ranged reads", err)
	}
}

func TestSymlinksCannotLeaveTheRoot(t *testing.T) {
	t.Parallel()
	a := startAgent(t, nil)
	ctx := testCtx(t)
	outside := filepath.Join(a.dir, "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("OUTSIDE"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a.root, "inside.txt"), []byte("inside"), 0o644); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"x":        "/etc",
		"abs":      outside,
		"climb":    "../outside",
		"ok":       "inside.txt",
		"dotdotok": "sub/../inside.txt",
	}
	if err := os.Mkdir(filepath.Join(a.root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(a.root, name)); err != nil {
			t.Fatal(err)
		}
	}
	// Links are resolved with the root as "/" (RESOLVE_IN_ROOT): what they
	// name outside the root is never reached; the same path inside the
	// root is used instead.
	hostPasswd, _ := os.ReadFile("/etc/passwd")
	for _, p := range []string{"/x/passwd", "/abs/secret", "/climb/secret"} {
		if got, err := a.c.ReadFile(ctx, p); err == nil {
			t.Errorf("read %s through a link out of the root: %q", p, got.Content)
		} else {
			wantStatus(t, err, http.StatusNotFound)
		}
		if _, err := a.c.ReadRange(ctx, p, 0, 10, false); err == nil {
			t.Errorf("ranged read of %s through a link out of the root", p)
		}
		_, err := a.c.WriteFile(ctx, api.FileContent{Path: p, Content: []byte("pwned")})
		if p == "/x/passwd" {
			// Inside the root it leads to /etc, a system directory.
			wantCode(t, err, http.StatusForbidden, api.CodeSystemPath)
			continue
		}
		if err != nil {
			t.Errorf("write %s: %v", p, err)
		}
		got, err := a.c.ReadFile(ctx, p)
		if err != nil || string(got.Content) != "pwned" {
			t.Errorf("read back %s: %v", p, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "OUTSIDE" {
		t.Errorf("file outside the root changed to %q", b)
	}
	if b, _ := os.ReadFile("/etc/passwd"); string(b) != string(hostPasswd) {
		t.Errorf("the host's /etc/passwd changed")
	}
	if _, err := os.Stat(filepath.Join(a.root, "etc")); !os.IsNotExist(err) {
		t.Errorf("a write through /x made /etc in the root: %v", err)
	}
	for want, p := range map[string]string{"outside/secret": "/climb/secret"} {
		if b, err := os.ReadFile(filepath.Join(a.root, want)); err != nil || string(b) != "pwned" {
			t.Errorf("write to %s did not land at %s inside the root: %v", p, want, err)
		}
	}
	// Deleting through a link that leads to a top-level directory gets the
	// same refusal as naming it.
	if err := os.Symlink("/", filepath.Join(a.root, "sub", "toroot")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(a.root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a.root, "etc/passwd"), []byte("root:x:0:0::/root:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := a.c.DeleteFile(ctx, "/sub/toroot/etc", true)
	wantStatus(t, err, http.StatusBadRequest)
	if _, err := os.Stat(filepath.Join(a.root, "etc/passwd")); err != nil {
		t.Errorf("delete through a link removed a top-level directory: %v", err)
	}
	for _, p := range []string{"/ok", "/dotdotok"} {
		got, err := a.c.ReadFile(ctx, p)
		if err != nil || string(got.Content) != "inside" {
			t.Errorf("read %s through a link inside the root: %v", p, err)
		}
	}
}

func TestSymlinkSwapRace(t *testing.T) {
	t.Parallel()
	a := startAgent(t, nil)
	ctx := testCtx(t)
	outside := filepath.Join(a.dir, "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "f"), []byte("OUTSIDE"), 0o644); err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(a.root, "real")
	if err := os.MkdirAll(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(real, "f"), []byte("inside"), 0o644); err != nil {
		t.Fatal(err)
	}
	// d is the real directory or a link out of the root, exchanged
	// atomically (renameat2 RENAME_EXCHANGE) as fast as possible, so every
	// read races a swap and d never goes missing.
	d, link := filepath.Join(a.root, "d"), filepath.Join(a.root, "l")
	if err := os.Rename(real, d); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../outside", link); err != nil {
		t.Fatal(err)
	}
	if err := unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE); err != nil {
		t.Skipf("renameat2 RENAME_EXCHANGE: %v", err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE)
		}
	}()
	var ok, failed atomic.Int64
	for range 400 {
		got, err := a.c.ReadFile(ctx, "/d/f")
		if err != nil {
			failed.Add(1)
			continue
		}
		ok.Add(1)
		if string(got.Content) != "inside" {
			t.Errorf("read %q through a swapped link", got.Content)
			break
		}
		if r, err := a.c.ReadRange(ctx, "/d/f", 0, 100, true); err == nil && string(r.Data) != "inside" {
			t.Errorf("ranged read %q through a swapped link", r.Data)
			break
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d reads succeeded, %d refused", ok.Load(), failed.Load())
}
