package rules

import (
	"errors"
	"strings"
	"testing"
)

func TestCanonicalPath(t *testing.T) {
	tests := []struct {
		in   string
		want string // "" with ok false: refused
		ok   bool
	}{
		{"/", "/", true},
		{"/org/repo.git/info/refs", "/org/repo.git/info/refs", true},
		{"/org/repo/", "/org/repo/", true},
		{"/a/.hidden/..x/x../...", "/a/.hidden/..x/x../...", true},
		{"/a;b=c/d@e:f/!$&'()*+,", "/a;b=c/d@e:f/!$&'()*+,", true},
		{"/caf%C3%A9", "/caf%C3%A9", true},
		{"/caf%c3%a9", "/caf%C3%A9", true}, // hex upper-cased: the one rewrite
		{"/a%20b/%3F%23%3b", "/a%20b/%3F%23%3B", true},
		{"/" + strings.Repeat("a", MaxPathLen-1), "/" + strings.Repeat("a", MaxPathLen-1), true},

		{"", "", false},
		{"org/repo", "", false},
		{"*", "", false},
		{"http://example.com/", "", false},
		{"/" + strings.Repeat("a", MaxPathLen), "", false},
		// traversal, plain and smuggled
		{"/org/../admin", "", false},
		{"/org/..", "", false},
		{"/..", "", false},
		{"/org/./x", "", false},
		{"/org/.", "", false},
		{"/org/..;/admin", "", false},
		{"/org/..;x=1/admin", "", false},
		{"/org/.;/admin", "", false},
		{"/org/%2e%2e/admin", "", false},
		{"/org/%2E%2E/admin", "", false},
		{"/org/.%2e/admin", "", false},
		{"/org/%2e/admin", "", false},
		{"/org%2fadmin", "", false},
		{"/org%2Fadmin", "", false},
		{"/org%5cadmin", "", false},
		{"/org%5Cadmin", "", false},
		{"/org/%252e%252e/admin", "", false},
		{"/org/%25", "", false},
		{"/org\\..\\admin", "", false},
		{"/org\\admin", "", false},
		{"//evil.example/x", "", false},
		{"/org//admin", "", false},
		{"/org/", "/org/", true},
		// bad escapes
		{"/a%", "", false},
		{"/a%4", "", false},
		{"/a%zz", "", false},
		{"/a%00", "", false},
		{"/a%0a", "", false},
		{"/a%7f", "", false},
		{"/a%41", "", false}, // 'A' must be sent as itself
		{"/a%7e", "", false}, // '~'
		{"/a%2d", "", false}, // '-'
		// raw bytes that are not path characters
		{"/a\x00", "", false},
		{"/a\nb", "", false},
		{"/a\tb", "", false},
		{"/a b", "", false},
		{"/a?b=c", "", false},
		{"/a#frag", "", false},
		{"/a\x7f", "", false},
		{"/caf\xc3\xa9", "", false},
		{"/a|b", "", false},
		{"/a{b}", "", false},
		{`/a"b`, "", false},
	}
	for _, tt := range tests {
		got, err := CanonicalPath(tt.in)
		if tt.ok {
			if err != nil || got != tt.want {
				t.Errorf("CanonicalPath(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
			continue
		}
		if err == nil {
			t.Errorf("CanonicalPath(%q) = %q; want an error", tt.in, got)
		} else if !errors.Is(err, ErrPathNotCanonical) {
			t.Errorf("CanonicalPath(%q): %v does not wrap ErrPathNotCanonical", tt.in, err)
		}
	}
}

func TestMatchPath(t *testing.T) {
	tests := []struct {
		pattern, path string
		want          bool
	}{
		{"/org/*", "/org/", true},
		{"/org/*", "/org/repo", true},
		{"/org/*", "/org/repo/info/refs", true}, // * crosses '/'
		{"/org/*", "/org", false},
		{"/org/*", "/organisation/x", false},
		{"/org/*", "/Org/repo", false}, // case-sensitive
		{"/org", "/org", true},
		{"/org", "/org/", false},
		{"/*.git/info/refs", "/org/repo.git/info/refs", true},
		{"/*.git/info/refs", "/org/repo.git/info/refsx", false},
		{"/a*b*c", "/abc", true},
		{"/a*b*c", "/axxbyyc", true},
		{"/a*b*c", "/axxbyy", false},
		{"/a**", "/a", true},
		{"*", "/anything", true},
		{"/x", "/y", false},
	}
	for _, tt := range tests {
		if got := matchPath(tt.pattern, tt.path); got != tt.want {
			t.Errorf("matchPath(%q, %q) = %v; want %v", tt.pattern, tt.path, got, tt.want)
		}
	}
}

// TestMatchPathLong: the worst case of the matcher stays fast.
func TestMatchPathLong(t *testing.T) {
	pattern := "/" + strings.Repeat("*a", (MaxPatternLen-2)/2) + "b"
	path := "/" + strings.Repeat("a", MaxPathLen-1)
	if matchPath(pattern, path) {
		t.Fatal("matched")
	}
}
