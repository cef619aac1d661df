package agent_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
)

// denyTree lays out, in a fresh agent's root: /ws (the denied directory)
// with /ws/old and /ws/sub, /tmp/other, links into /ws from elsewhere
// (/tmp/abs -> /ws, /tmp/rel -> ../ws), and /a/srv/ws, a denied directory
// nested deeper.
func denyTree(t *testing.T) *testAgent {
	t.Helper()
	a := startAgent(t, nil)
	for _, d := range []string{"ws/sub", "tmp/other", "a/srv/ws"} {
		if err := os.MkdirAll(filepath.Join(a.root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(a.root, "ws/old"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/ws", filepath.Join(a.root, "tmp/abs")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../ws", filepath.Join(a.root, "tmp/rel")); err != nil {
		t.Fatal(err)
	}
	return a
}

// entries lists dir (relative to the agent's root), sorted.
func entries(t *testing.T, a *testAgent, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(a.root, dir))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}

func TestWriteDeny(t *testing.T) {
	t.Parallel()
	a := denyTree(t)
	ws := []string{"/ws"}
	no := false
	tests := []struct {
		name string
		in   api.FileContent
		want int
	}{
		{"under the denied directory", api.FileContent{Path: "/ws/f", Deny: ws}, http.StatusForbidden},
		{"over a file in it", api.FileContent{Path: "/ws/old", Deny: ws}, http.StatusForbidden},
		{"in a subdirectory", api.FileContent{Path: "/ws/sub/f", Deny: ws}, http.StatusForbidden},
		{"new parents in it", api.FileContent{Path: "/ws/new/dir/f", Deny: ws}, http.StatusForbidden},
		{"onto the denied directory", api.FileContent{Path: "/ws", Deny: ws}, http.StatusForbidden},
		{"through an absolute link elsewhere", api.FileContent{Path: "/tmp/abs/f", Deny: ws}, http.StatusForbidden},
		{"through a relative link elsewhere", api.FileContent{Path: "/tmp/rel/sub/f", Deny: ws}, http.StatusForbidden},
		{"through a link, new parents", api.FileContent{Path: "/tmp/abs/n/f", Deny: ws}, http.StatusForbidden},
		{"deny holds the root", api.FileContent{Path: "/tmp/other/g", Deny: []string{"/"}}, http.StatusForbidden},
		{"a nested denied directory", api.FileContent{Path: "/a/srv/ws/f", Deny: []string{"/a/srv/ws"}}, http.StatusForbidden},
		{"elsewhere", api.FileContent{Path: "/tmp/other/f", Deny: ws}, http.StatusOK},
		{"elsewhere, new parents", api.FileContent{Path: "/tmp/new/dir/f", Deny: ws}, http.StatusOK},
		{"over the link itself", api.FileContent{Path: "/tmp/rel", Deny: ws}, http.StatusOK},
		{"beside a nested denied directory", api.FileContent{Path: "/a/srv/f", Deny: []string{"/a/srv/ws"}}, http.StatusOK},
		{"a denied directory that does not exist", api.FileContent{Path: "/tmp/other/h", Deny: []string{"/nope"}}, http.StatusOK},
		{"elsewhere, no parents", api.FileContent{Path: "/tmp/missing/f", Parents: &no, Deny: ws}, http.StatusNotFound},
		{"relative deny", api.FileContent{Path: "/tmp/f", Deny: []string{"ws"}}, http.StatusBadRequest},
		{"unclean deny", api.FileContent{Path: "/tmp/f", Deny: []string{"/ws/"}}, http.StatusBadRequest},
		{"deny with ..", api.FileContent{Path: "/tmp/f", Deny: []string{"/tmp/../ws"}}, http.StatusBadRequest},
		{"empty deny entry", api.FileContent{Path: "/tmp/f", Deny: []string{""}}, http.StatusBadRequest},
		{"too many deny", api.FileContent{Path: "/tmp/f", Deny: slices.Repeat([]string{"/ws"}, api.MaxDeny+1)}, http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := a.c.WriteFile(testCtx(t), tt.in)
			if tt.want == http.StatusOK {
				if err != nil {
					t.Fatalf("write %s: %v", tt.in.Path, err)
				}
				return
			}
			wantStatus(t, err, tt.want)
		})
	}
	if got := entries(t, a, "ws"); !slices.Equal(got, []string{"old", "sub"}) {
		t.Errorf("the denied directory holds %q", got)
	}
	if got := entries(t, a, "ws/sub"); len(got) != 0 {
		t.Errorf("the denied subdirectory holds %q", got)
	}
	if got := entries(t, a, "a/srv/ws"); len(got) != 0 {
		t.Errorf("the nested denied directory holds %q", got)
	}
	if b, err := os.ReadFile(filepath.Join(a.root, "ws/old")); err != nil || string(b) != "old" {
		t.Errorf("ws/old is %q, %v", b, err)
	}
}

func TestDeleteDeny(t *testing.T) {
	t.Parallel()
	a := denyTree(t)
	ctx := testCtx(t)
	if err := os.WriteFile(filepath.Join(a.root, "tmp/other/f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		path      string
		recursive bool
		deny      []string
		want      int
	}{
		{"under the denied directory", "/ws/old", false, []string{"/ws"}, http.StatusForbidden},
		{"a subdirectory", "/ws/sub", true, []string{"/ws"}, http.StatusForbidden},
		{"through a link", "/tmp/abs/old", false, []string{"/ws"}, http.StatusForbidden},
		{"the denied directory", "/a/srv/ws", true, []string{"/a/srv/ws"}, http.StatusForbidden},
		{"a directory holding it", "/a/srv", true, []string{"/a/srv/ws"}, http.StatusForbidden},
		{"bad deny", "/tmp/other/f", false, []string{"ws"}, http.StatusBadRequest},
		{"elsewhere", "/tmp/other/f", false, []string{"/ws"}, http.StatusNoContent},
		{"the link itself", "/tmp/abs", false, []string{"/ws"}, http.StatusNoContent},
	}
	for _, tt := range tests {
		err := a.c.DeleteFileDenying(ctx, tt.path, tt.recursive, tt.deny)
		if tt.want == http.StatusNoContent {
			if err != nil {
				t.Errorf("%s: delete %s: %v", tt.name, tt.path, err)
			}
			continue
		}
		if !client.IsStatus(err, tt.want) {
			t.Errorf("%s: delete %s: %v, want %d", tt.name, tt.path, err, tt.want)
		}
	}
	if got := entries(t, a, "ws"); !slices.Equal(got, []string{"old", "sub"}) {
		t.Errorf("the denied directory holds %q", got)
	}
	if _, err := os.Stat(filepath.Join(a.root, "a/srv/ws")); err != nil {
		t.Errorf("the nested denied directory: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(a.root, "tmp/abs")); !os.IsNotExist(err) {
		t.Errorf("the link was not deleted: %v", err)
	}
}

func TestUploadDeny(t *testing.T) {
	t.Parallel()
	a := denyTree(t)
	ctx := testCtx(t)
	upload := func(id, p string, deny []string) error {
		if _, err := a.c.UploadPart(ctx, id, 0, []byte("abc")); err != nil {
			t.Fatal(err)
		}
		_, err := a.c.CompleteUpload(ctx, id, api.UploadComplete{Path: p, Size: 3, Deny: deny})
		return err
	}
	wantStatus(t, upload("in", "/tmp/abs/u", []string{"/ws"}), http.StatusForbidden)
	wantStatus(t, upload("bad", "/tmp/u", []string{"/ws/.."}), http.StatusBadRequest)
	if err := upload("out", "/tmp/other/u", []string{"/ws"}); err != nil {
		t.Errorf("upload elsewhere: %v", err)
	}
	if got := entries(t, a, "ws"); !slices.Equal(got, []string{"old", "sub"}) {
		t.Errorf("the denied directory holds %q", got)
	}
}

// TestWriteDenyRace flips /tmp/d between the denied directory and an
// allowed one (atomically, by renaming a fresh link over it) while writes
// with Deny go through it: each lands in the allowed directory or is
// refused, and none ever appears in the denied one.
func TestWriteDenyRace(t *testing.T) {
	t.Parallel()
	a := denyTree(t)
	ctx := testCtx(t)
	if err := os.MkdirAll(filepath.Join(a.root, "tmp/A"), 0o755); err != nil {
		t.Fatal(err)
	}
	d, next := filepath.Join(a.root, "tmp/d"), filepath.Join(a.root, "tmp/d.next")
	if err := os.Symlink("/tmp/A", d); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			target := "/tmp/A"
			if i%2 == 0 {
				target = "/ws"
			}
			_ = os.Remove(next)
			if os.Symlink(target, next) == nil {
				_ = os.Rename(next, d)
			}
		}
	}()
	var ok, refused int
	for i := range 300 {
		_, err := a.c.WriteFile(ctx, api.FileContent{Path: fmt.Sprintf("/tmp/d/f%d", i), Content: []byte("x"), Deny: []string{"/ws"}})
		switch {
		case err == nil:
			ok++
		case client.IsStatus(err, http.StatusForbidden):
			refused++
		default:
			t.Errorf("write %d: %v, want 200 or 403", i, err)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d writes landed in /tmp/A, %d refused", ok, refused)
	if got := entries(t, a, "ws"); !slices.Equal(got, []string{"old", "sub"}) {
		t.Errorf("writes raced into the denied directory: it holds %q", got)
	}
	if n := len(entries(t, a, "tmp/A")); n != ok {
		t.Errorf("/tmp/A holds %d files, want the %d writes that succeeded", n, ok)
	}
}
