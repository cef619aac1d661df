package agent_test

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"

	"paddock.dev/paddock/guest/agent"
	"paddock.dev/paddock/guest/api"
)

// tree describes files to create under a root: a path ending in "/" is a
// directory, "->" gives a symlink target, mode 0 means 0644.
type treeEntry struct {
	path, content, link string
	mode                os.FileMode
}

func makeTree(t *testing.T, root string, entries []treeEntry) {
	t.Helper()
	for _, e := range entries {
		p := filepath.Join(root, e.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		switch {
		case e.path[len(e.path)-1] == '/':
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case e.link != "":
			if err := os.Symlink(e.link, p); err != nil {
				t.Fatal(err)
			}
		default:
			mode := e.mode
			if mode == 0 {
				mode = 0o644
			}
			if err := os.WriteFile(p, []byte(e.content), mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, mode); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestProbe(t *testing.T) {
	t.Parallel()
	a := startAgent(t, func(c *agent.Config) { c.Home = "/home/u" })
	makeTree(t, a.root, []treeEntry{
		{path: "usr/bin/git", mode: 0o755},
		{path: "usr/bin/sha256sum", mode: 0o755},
		{path: "usr/local/bin/node", mode: 0o755},
		{path: "usr/bin/python3", mode: 0o644},          // not executable
		{path: "usr/bin/gcc-12", mode: 0o755},           // not a probed name
		{path: "usr/bin/cc", link: "gcc-12"},            // relative link inside the root
		{path: "bin/make", mode: 0o755},                 //
		{path: "usr/bin/chromium", link: "/usr/lib/ch"}, // absolute: cannot be followed in the root
		{path: "usr/bin/socat", link: "missing"},        // dangling
		{path: "usr/bin/cargo/"},                        // a directory
		{path: "home/u/.cache/ms-playwright/"},
	})
	p, err := a.c.Probe(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	want := &api.Probe{
		Tools: map[string]string{
			"git":                 "/usr/bin/git",
			"sha256sum":           "/usr/bin/sha256sum",
			"node":                "/usr/local/bin/node",
			"cc":                  "/usr/bin/cc",
			"make":                "/bin/make",
			"chromium":            "/usr/bin/chromium",
			"playwright-browsers": "/home/u/.cache/ms-playwright",
		},
		ReadyFor: map[string]bool{
			"git":                         true,
			"promote":                     true,
			"build_node":                  false, // no npm
			"build_python":                false,
			"build_rust":                  false,
			"build_c":                     true,
			"browser_cdp":                 true,
			"browser_cdp_through_preview": false, // socat dangles
			"playwright":                  true,
		},
		OS:   runtime.GOOS,
		Arch: runtime.GOARCH,
	}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Errorf("probe (-want +got):\n%s", diff)
	}
}

func TestManifest(t *testing.T) {
	t.Parallel()
	a := startAgent(t, nil)
	ctx := testCtx(t)
	makeTree(t, a.root, []treeEntry{
		{path: "ws/a.txt", content: "hello"},
		{path: "ws/sub/b.sh", content: "#!/bin/sh\n", mode: 0o755},
		{path: "ws/a-link", link: "a.txt"},
		{path: "ws/etc-link", link: "/etc"}, // listed, never followed
		{path: "ws/empty/"},
		{path: "other.txt", content: "not in the tree"},
	})
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	m, err := a.c.Manifest(ctx, api.ManifestRequest{Path: "/ws"})
	if err != nil {
		t.Fatal(err)
	}
	want := []api.ManifestEntry{
		{Path: "a-link", Type: api.TypeSymlink, Size: 5, Mode: "0777", Target: "a.txt"},
		{Path: "a.txt", Type: api.TypeFile, Size: 5, Mode: "0644", SHA256: sum("hello")},
		{Path: "empty", Type: api.TypeDir, Mode: "0755"},
		{Path: "etc-link", Type: api.TypeSymlink, Size: 4, Mode: "0777", Target: "/etc"},
		{Path: "sub", Type: api.TypeDir, Mode: "0755"},
		{Path: "sub/b.sh", Type: api.TypeFile, Size: 10, Mode: "0755", SHA256: sum("#!/bin/sh\n")},
	}
	// Directory sizes depend on the file system.
	for i := range m.Entries {
		if m.Entries[i].Type == api.TypeDir {
			m.Entries[i].Size = 0
		}
	}
	if diff := cmp.Diff(want, m.Entries); diff != "" {
		t.Errorf("manifest (-want +got):\n%s", diff)
	}
	if m.Path != "/ws" || m.Truncated {
		t.Errorf("manifest header: path %q truncated %v", m.Path, m.Truncated)
	}

	no := false
	m, err = a.c.Manifest(ctx, api.ManifestRequest{Path: "/ws", MaxFiles: 2, Hash: &no})
	if err != nil {
		t.Fatal(err)
	}
	if !m.Truncated || len(m.Entries) != 2 {
		t.Errorf("capped manifest: truncated %v with %d entries", m.Truncated, len(m.Entries))
	}
	for _, e := range m.Entries {
		if e.SHA256 != "" {
			t.Errorf("hash: false still hashed %s", e.Path)
		}
	}
	_, err = a.c.Manifest(ctx, api.ManifestRequest{Path: "/ws/a.txt"})
	wantStatus(t, err, http.StatusBadRequest)
	_, err = a.c.Manifest(ctx, api.ManifestRequest{Path: "/ws", MaxFiles: api.MaxManifestFiles + 1})
	wantStatus(t, err, http.StatusBadRequest)
	_, err = a.c.Manifest(ctx, api.ManifestRequest{Path: "/nope"})
	wantStatus(t, err, http.StatusNotFound)
}
