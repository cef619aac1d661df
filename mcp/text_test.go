package mcp

import (
	"regexp"
	"strconv"
	"testing"

	"paddock.dev/paddock/client"
)

func TestTextPrefix(t *testing.T) {
	emoji := "a🙂" // 1 + 4 bytes
	for _, c := range []struct {
		in   string
		end  bool
		want int
	}{
		{"hello", false, 5},
		{"hello", true, 5},
		{"", false, 0},
		{"h\xc3", false, 1},          // é cut after its first byte
		{"h\xc3", true, -1},          // at the end it stays cut: not text
		{"\xc3", false, -1},          // nothing whole before it: no progress, so not text
		{emoji[:2], false, 1},        // cut after 1 of 4 bytes
		{emoji[:3], false, 1},        // after 2
		{emoji[:4], false, 1},        // after 3
		{"\xff\xfe", false, -1},      // binary
		{"ok\xffok\xc3", false, -1},  // bad bytes before the cut
		{"a\xed\xa0\x80", false, -1}, // a whole but invalid sequence (a surrogate), not a cut one
	} {
		if got := textPrefix([]byte(c.in), c.end); got != c.want {
			t.Errorf("textPrefix(%q, %v) = %d, want %d", c.in, c.end, got, c.want)
		}
	}
}

// TestToolNames: every tool's name is one the daemon takes in the
// Mcp-Tool header (else each of its calls would be refused with 400), and
// no two tools share one.
func TestToolNames(t *testing.T) {
	ok := regexp.MustCompile(`^[A-Za-z0-9_.-]{1,` + strconv.Itoa(client.MaxToolName) + `}$`)
	seen := map[string]bool{}
	for _, d := range toolTable() {
		if !ok.MatchString(d.name) || seen[d.name] {
			t.Errorf("tool name %q: not a header value the daemon takes, or twice in the table", d.name)
		}
		seen[d.name] = true
	}
	if len(seen) < 39 {
		t.Errorf("only %d tools in the table", len(seen))
	}
}
