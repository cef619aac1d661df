package rules

import (
	"errors"
	"strings"
	"testing"
)

// FuzzCanonicalPath checks CanonicalPath's promises on any input. The
// seed corpus in testdata/fuzz/FuzzCanonicalPath runs with every go test.
func FuzzCanonicalPath(f *testing.F) {
	for _, s := range []string{
		"/", "/org/repo", "/org/../x", "/org/%2e%2e/x", "//x", "/a\\b",
		"/a%2fb", "/caf%c3%a9", "/org/..;/x", "/%25", "/a?b",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := CanonicalPath(raw)
		if err != nil {
			if !errors.Is(err, ErrPathNotCanonical) {
				t.Fatalf("CanonicalPath(%q): %v does not wrap ErrPathNotCanonical", raw, err)
			}
			return
		}
		again, err := CanonicalPath(got)
		if err != nil || again != got {
			t.Fatalf("CanonicalPath(%q) = %q, but that gives %q, %v: not a fixed point", raw, got, again, err)
		}
		if !strings.EqualFold(got, raw) || len(got) != len(raw) {
			t.Fatalf("CanonicalPath(%q) = %q: changed more than hex case", raw, got)
		}
		if !strings.HasPrefix(got, "/") || len(got) > MaxPathLen {
			t.Fatalf("CanonicalPath(%q) = %q: not a bounded absolute path", raw, got)
		}
		for _, bad := range []string{"/../", "/./", "//", "\\", "%2e", "%2f", "%5c", "%25"} {
			if strings.Contains(strings.ToLower(got), bad) {
				t.Fatalf("CanonicalPath(%q) = %q: contains %q", raw, got, bad)
			}
		}
		if strings.HasSuffix(got, "/..") || strings.HasSuffix(got, "/.") {
			t.Fatalf("CanonicalPath(%q) = %q: ends in a dot segment", raw, got)
		}
		for i := 0; i < len(got); i++ {
			if got[i] < 0x20 || got[i] >= 0x7f {
				t.Fatalf("CanonicalPath(%q) = %q: byte 0x%02x", raw, got, got[i])
			}
		}
		// No segment is a dot segment, with or without a ;parameter, so
		// whatever matches /org/* stays below /org on any server.
		for seg := range strings.SplitSeq(got[1:], "/") {
			if name, _, _ := strings.Cut(seg, ";"); name == "." || name == ".." {
				t.Fatalf("CanonicalPath(%q) = %q: dot segment %q", raw, got, seg)
			}
		}
	})
}
