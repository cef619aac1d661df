package vmkit

import (
	"strings"
	"testing"
)

// TestCpioNewc checks the initramfs writer's framing: every header starts
// on a 4-byte boundary with the newc magic, names and data are where the
// header says, and the archive ends with the trailer.
func TestCpioNewc(t *testing.T) {
	var buf strings.Builder
	w := NewCPIOWriter(&buf)
	files := map[string]string{"init": "#!/bin/sh\n", "a/bb": "12345", "dev/console": ""}
	w.Entry("a", 0o040755, 0, 0, nil)
	w.Entry("init", 0o100755, 0, 0, []byte(files["init"]))
	w.Entry("a/bb", 0o100644, 0, 0, []byte(files["a/bb"]))
	w.Entry("dev/console", 0o020600, 5, 1, nil)
	w.Entry("TRAILER!!!", 0, 0, 0, nil)
	if err := w.Err(); err != nil {
		t.Fatal(err)
	}
	b := buf.String()
	hex := func(s string) int {
		var n int
		for _, c := range s {
			n *= 16
			switch {
			case c >= '0' && c <= '9':
				n += int(c - '0')
			case c >= 'A' && c <= 'F':
				n += int(c-'A') + 10
			default:
				t.Fatalf("bad hex %q", s)
			}
		}
		return n
	}
	align := func(n int) int { return (n + 3) &^ 3 }
	var names []string
	for off := 0; ; {
		if off%4 != 0 || !strings.HasPrefix(b[off:], "070701") {
			t.Fatalf("no header at %d", off)
		}
		h := b[off : off+110]
		mode, size, namesize := hex(h[14:22]), hex(h[54:62]), hex(h[94:102])
		name := b[off+110 : off+110+namesize-1]
		data := align(off + 110 + namesize)
		if name == "TRAILER!!!" {
			if data != len(b) {
				t.Errorf("trailer ends at %d, archive at %d", data, len(b))
			}
			break
		}
		names = append(names, name)
		if want, ok := files[name]; ok && b[data:data+size] != want {
			t.Errorf("%s: data %q, want %q", name, b[data:data+size], want)
		}
		if name == "dev/console" && (mode != 0o020600 || hex(h[78:86]) != 5 || hex(h[86:94]) != 1) {
			t.Errorf("dev/console: mode %o rdev %d:%d", mode, hex(h[78:86]), hex(h[86:94]))
		}
		off = align(data + size)
	}
	if got := strings.Join(names, " "); got != "a init a/bb dev/console" {
		t.Errorf("entries %q", got)
	}
}
