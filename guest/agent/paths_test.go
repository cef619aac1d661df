package agent

import (
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCheckPath(t *testing.T) {
	tests := []struct {
		in         string
		clean, rel string
		bad        bool
	}{
		{in: "/", clean: "/", rel: "."},
		{in: "/etc", clean: "/etc", rel: "etc"},
		{in: "/a//b/./c/", clean: "/a/b/c", rel: "a/b/c"},
		{in: "/with space/and-ünïcode", clean: "/with space/and-ünïcode", rel: "with space/and-ünïcode"},
		{in: "/a/..b/c..", clean: "/a/..b/c..", rel: "a/..b/c.."},
		{in: "", bad: true},
		{in: "a/b", bad: true},
		{in: "./a", bad: true},
		{in: "/a/../b", bad: true},
		{in: "/..", bad: true},
		{in: "/a/..", bad: true},
		{in: "/a\x00", bad: true},
		{in: "/a\nb", bad: true},
		{in: "/" + strings.Repeat("x", maxPathLen), bad: true},
	}
	for _, tt := range tests {
		clean, rel, err := checkPath(tt.in)
		if tt.bad {
			if !errors.Is(err, ErrBadRequest) {
				t.Errorf("checkPath(%q) = %q, %q, %v; want a bad request", tt.in, clean, rel, err)
			}
			continue
		}
		if err != nil || clean != tt.clean || rel != tt.rel {
			t.Errorf("checkPath(%q) = %q, %q, %v; want %q, %q", tt.in, clean, rel, err, tt.clean, tt.rel)
		}
	}
}

// FuzzCheckPath: whatever is accepted is absolute, clean, free of ..
// components, NUL and newlines, and rel is clean's relative form.
func FuzzCheckPath(f *testing.F) {
	for _, s := range []string{"/", "/a/b", "/a/../b", "a", "/a\x00", "//a//", "/./.", "/a/.../b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		clean, rel, err := checkPath(p)
		if err != nil {
			return
		}
		if !strings.HasPrefix(clean, "/") || strings.ContainsAny(clean, "\x00\n\r") {
			t.Fatalf("accepted %q as %q", p, clean)
		}
		for _, part := range strings.Split(rel, "/") {
			if part == ".." || (part == "." && rel != ".") || part == "" {
				t.Fatalf("rel %q of %q has a bad component", rel, p)
			}
		}
		if want := strings.TrimPrefix(clean, "/"); rel != want && !(rel == "." && clean == "/") {
			t.Fatalf("rel %q does not match clean %q", rel, clean)
		}
	})
}

func TestParseSignal(t *testing.T) {
	tests := []struct {
		in   string
		want syscall.Signal
		bad  bool
	}{
		{in: "", want: syscall.SIGTERM},
		{in: "TERM", want: syscall.SIGTERM},
		{in: "SIGKILL", want: syscall.SIGKILL},
		{in: "int", want: syscall.SIGINT},
		{in: "HUP", want: syscall.SIGHUP},
		{in: "9", want: syscall.SIGKILL},
		{in: "NOPE", bad: true},
		{in: "0", bad: true},
		{in: "99", bad: true},
		{in: "9x", bad: true},
	}
	for _, tt := range tests {
		got, err := parseSignal(tt.in)
		if tt.bad != (err != nil) || (!tt.bad && got != tt.want) {
			t.Errorf("parseSignal(%q) = %v, %v", tt.in, got, err)
		}
	}
	if got := signalName(syscall.SIGTERM); got != "TERM" {
		t.Errorf("signalName(SIGTERM) = %q", got)
	}
}

func TestParseMode(t *testing.T) {
	tests := []struct {
		in   string
		want fs.FileMode
		bad  bool
	}{
		{in: "", want: 0o644},
		{in: "0755", want: 0o755},
		{in: "600", want: 0o600},
		{in: "4755", want: 0o755 | fs.ModeSetuid},
		{in: "1777", want: 0o777 | fs.ModeSticky},
		{in: "888", bad: true},
		{in: "10000", bad: true},
		{in: "-1", bad: true},
	}
	for _, tt := range tests {
		got, err := parseMode(tt.in, 0o644)
		if tt.bad != (err != nil) || (!tt.bad && got != tt.want) {
			t.Errorf("parseMode(%q) = %v, %v", tt.in, got, err)
		}
	}
}

func TestHTTPStatus(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{ErrBadRequest, http.StatusBadRequest},
		{ErrNotFound, http.StatusNotFound},
		{fs.ErrNotExist, http.StatusNotFound},
		{&fs.PathError{Op: "open", Path: "x", Err: syscall.ENOENT}, http.StatusNotFound},
		{ErrConflict, http.StatusConflict},
		{syscall.ENOTEMPTY, http.StatusConflict},
		{ErrTooLarge, http.StatusRequestEntityTooLarge},
		{&http.MaxBytesError{Limit: 1}, http.StatusRequestEntityTooLarge},
		{ErrForbidden, http.StatusForbidden},
		{fs.ErrPermission, http.StatusForbidden},
		{errors.New("boom"), http.StatusInternalServerError},
	}
	for _, tt := range tests {
		if got, _ := httpStatus(tt.err); got != tt.want {
			t.Errorf("httpStatus(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}

func TestRootErrRecognisesEscapes(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink("/etc", dir+"/x"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../..", dir+"/up"); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	var got []int
	for _, p := range []string{"x/passwd", "up/etc", "missing"} {
		_, err := root.Open(p)
		status, _ := httpStatus(rootErr("/"+p, err))
		got = append(got, status)
	}
	if diff := cmp.Diff([]int{http.StatusForbidden, http.StatusForbidden, http.StatusNotFound}, got); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
}

// FuzzResolveInRoot builds a small tree with links (absolute, relative,
// climbing, looping) and checks that whatever path is resolved, the result
// is root-relative, has no .. or empty component, and is reached without
// leaving the root.
func FuzzResolveInRoot(f *testing.F) {
	for _, s := range []string{"a/b", "abs/x", "climb/../../x", "loop/x", "a/../../../etc", "self/self/self/a", "."} {
		f.Add(s, true)
		f.Add(s, false)
	}
	dir := f.TempDir()
	for _, d := range []string{"a/b", "c"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			f.Fatal(err)
		}
	}
	for name, target := range map[string]string{
		"abs": "/c", "climb": "../../../../c", "loop": "loop", "self": ".", "a/up": "../..", "a/b/etc": "/etc",
	} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			f.Fatal(err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { root.Close() })
	f.Fuzz(func(t *testing.T, rel string, follow bool) {
		if len(rel) > 512 || strings.ContainsRune(rel, 0) {
			return
		}
		got, err := resolveInRoot(root, rel, follow)
		if err != nil {
			return // a loop: refused
		}
		if strings.HasPrefix(got, "/") {
			t.Fatalf("resolve(%q) = %q: absolute", rel, got)
		}
		for _, part := range strings.Split(got, "/") {
			if part == ".." || (part == "" && got != "") {
				t.Fatalf("resolve(%q) = %q: bad component %q", rel, got, part)
			}
		}
		// Whatever the result names, os.Root can look it up (or not find
		// it) without being refused as an escape.
		if _, err := root.Lstat(got); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) && !errors.Is(err, syscall.ENAMETOOLONG) {
			t.Fatalf("resolve(%q) = %q: %v", rel, got, err)
		}
	})
}
