package addr

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzCanonicalHost checks CanonicalHost's promises on any input. The
// corpus in testdata/fuzz/FuzzCanonicalHost runs with every go test.
//
//   - It never panics, and returns a name or an IP, never both.
//   - Its output is a fixed point: canonicalising the canonical text
//     gives the same Host.
//   - A name is a valid DNS name that no IPv4 parser would take for an
//     address (glibc's inet_aton, WHATWG's URL host parser, Go's own),
//     and does not end in a number.
//   - An ASCII input that an IPv4 parser accepts comes out as that IP.
func FuzzCanonicalHost(f *testing.F) {
	f.Fuzz(checkCanonicalHost)
}

// TestCanonicalHostNumericGrid holds every combination of up to four
// number-like parts, with and without a trailing dot, to the fuzz
// properties: the spellings IPv4 parsers disagree on, systematically.
func TestCanonicalHostNumericGrid(t *testing.T) {
	tokens := []string{"0", "00", "08", "0x", "0X", "0x7f", "0Xff", "0x1g", "127", "255", "256", "0377", "0400",
		"65535", "65536", "16777215", "4294967295", "4294967296", "a", "1e1", "-1", ""}
	var grid func(prefix string, parts int)
	grid = func(prefix string, parts int) {
		for _, tok := range tokens {
			s := prefix + tok
			checkCanonicalHost(t, s)
			checkCanonicalHost(t, s+".")
			if parts < 4 {
				grid(s+".", parts+1)
			}
		}
	}
	grid("", 1)
}

func checkCanonicalHost(t *testing.T, raw string) {
	t.Helper()
	h, err := CanonicalHost(raw)
	if err != nil {
		if h != (Host{}) {
			t.Fatalf("CanonicalHost(%q) = %+v with error %v", raw, h, err)
		}
		checkInputWasNotIPv4(t, raw)
		return
	}
	if h.IsIP() == (h.Name != "") {
		t.Fatalf("CanonicalHost(%q) = %+v: want exactly one of Name and IP", raw, h)
	}
	again, err := CanonicalHost(h.String())
	if err != nil || again != h {
		t.Fatalf("CanonicalHost(%q) = %+v, but CanonicalHost(%q) = %+v, %v", raw, h, h.String(), again, err)
	}
	if h.IsIP() {
		if h.IP.Zone() != "" || h.IP.Is4In6() {
			t.Fatalf("CanonicalHost(%q) = %s: zone or IPv4-mapped", raw, h.IP)
		}
	} else {
		checkFuzzName(t, raw, h.Name)
	}
	// An input any IPv4 parser accepts is that address.
	if isASCIIString(raw) {
		for name, parse := range ipv4Oracles {
			if v, ok := parse(strings.ToLower(raw)); ok && h.IP != netip.AddrFrom4(v) {
				t.Fatalf("CanonicalHost(%q) = %+v, but %s reads it as %s", raw, h, name, netip.AddrFrom4(v))
			}
		}
	}
}

func checkFuzzName(t *testing.T, raw, name string) {
	t.Helper()
	if len(name) > 253 || !utf8.ValidString(name) {
		t.Fatalf("CanonicalHost(%q) = name %q: too long or not UTF-8", raw, name)
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			t.Fatalf("CanonicalHost(%q) = name %q: bad label %q", raw, name, l)
		}
		for _, c := range []byte(l) {
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				t.Fatalf("CanonicalHost(%q) = name %q: byte %q in label %q", raw, name, c, l)
			}
		}
	}
	for oracle, parse := range ipv4Oracles {
		if _, ok := parse(name); ok {
			t.Fatalf("CanonicalHost(%q) = name %q, which %s parses as an address", raw, name, oracle)
		}
	}
	if net.ParseIP(name) != nil {
		t.Fatalf("CanonicalHost(%q) = name %q, which net.ParseIP parses", raw, name)
	}
	if _, err := netip.ParseAddr(name); err == nil {
		t.Fatalf("CanonicalHost(%q) = name %q, which netip.ParseAddr parses", raw, name)
	}
	if whatwgEndsInNumber(name) {
		t.Fatalf("CanonicalHost(%q) = name %q, which ends in a number", raw, name)
	}
}

// checkInputWasNotIPv4 fails if raw was an IPv4 address to some parser
// and yet CanonicalHost refused it.
func checkInputWasNotIPv4(t *testing.T, raw string) {
	t.Helper()
	if !isASCIIString(raw) {
		return
	}
	for name, parse := range ipv4Oracles {
		if v, ok := parse(strings.ToLower(raw)); ok {
			t.Fatalf("CanonicalHost(%q) refused an address %s reads as %s", raw, name, netip.AddrFrom4(v))
		}
	}
}

func isASCIIString(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// The oracles are written apart from parseIPv4Loose, from each parser's
// own description, so that a mistake in one is not repeated in the other.
// WHATWG's takes one trailing dot itself; the others are also given the
// host without it, as a resolver that drops the root would.
var ipv4Oracles = map[string]func(string) ([4]byte, bool){
	"inet_aton": func(s string) ([4]byte, bool) { return inetAton(strings.TrimSuffix(s, ".")) },
	"WHATWG":    whatwgIPv4,
	"netip": func(s string) ([4]byte, bool) {
		a, err := netip.ParseAddr(strings.TrimSuffix(s, "."))
		if err != nil || !a.Is4() {
			return [4]byte{}, false
		}
		return a.As4(), true
	},
}

// strtoul0 is C's strtoul(s, &end, 0) for an s that starts with a digit:
// the value, how many bytes it read, and whether it overflowed.
func strtoul0(s string) (v uint64, n int, overflow bool) {
	base := uint64(10)
	if len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && isHexDigit(s[2]) {
		base, n = 16, 2
	} else if s[0] == '0' {
		base = 8
	}
	for ; n < len(s); n++ {
		d, ok := hexValue(s[n])
		if !ok || d >= base {
			break
		}
		if v > (1<<64-1-d)/base {
			overflow = true
		}
		v = v*base + d
	}
	return v, n, overflow
}

func isHexDigit(c byte) bool { _, ok := hexValue(c); return ok }

func hexValue(c byte) (uint64, bool) {
	switch {
	case '0' <= c && c <= '9':
		return uint64(c - '0'), true
	case 'a' <= c && c <= 'f':
		return uint64(c - 'a' + 10), true
	case 'A' <= c && c <= 'F':
		return uint64(c - 'A' + 10), true
	}
	return 0, false
}

// inetAton follows glibc's inet_aton (resolv/inet_addr.c), without the
// trailing whitespace it tolerates.
func inetAton(s string) ([4]byte, bool) {
	var parts []uint64
	var val uint64
	i := 0
	for {
		if i >= len(s) || s[i] < '0' || s[i] > '9' {
			return [4]byte{}, false
		}
		v, n, overflow := strtoul0(s[i:])
		if overflow || v > 0xffffffff {
			return [4]byte{}, false
		}
		val, i = v, i+n
		if i < len(s) && s[i] == '.' {
			if len(parts) > 2 || val > 0xff {
				return [4]byte{}, false
			}
			parts = append(parts, val)
			i++
			continue
		}
		break
	}
	if i != len(s) {
		return [4]byte{}, false
	}
	limit := [4]uint64{0xffffffff, 0xffffff, 0xffff, 0xff}
	if val > limit[len(parts)] {
		return [4]byte{}, false
	}
	var out [4]byte
	for j, p := range parts {
		out[j] = byte(p)
	}
	low := val
	for j := 3; j >= len(parts); j-- {
		out[j] = byte(low)
		low >>= 8
	}
	return out, true
}

// whatwgIPv4 is the WHATWG URL standard's IPv4 parser.
func whatwgIPv4(s string) ([4]byte, bool) {
	parts := strings.Split(s, ".")
	if parts[len(parts)-1] == "" && len(parts) > 1 {
		parts = parts[:len(parts)-1]
	}
	if len(parts) > 4 {
		return [4]byte{}, false
	}
	var nums []uint64
	for _, p := range parts {
		n, ok := whatwgNumber(p)
		if !ok {
			return [4]byte{}, false
		}
		nums = append(nums, n)
	}
	for _, n := range nums[:len(nums)-1] {
		if n > 255 {
			return [4]byte{}, false
		}
	}
	last := nums[len(nums)-1]
	if last >= 1<<(8*(5-len(nums))) {
		return [4]byte{}, false
	}
	ipv4 := last
	for i, n := range nums[:len(nums)-1] {
		ipv4 += n << (8 * (3 - i))
	}
	return [4]byte{byte(ipv4 >> 24), byte(ipv4 >> 16), byte(ipv4 >> 8), byte(ipv4)}, true
}

// whatwgNumber is the standard's "IPv4 number parser".
func whatwgNumber(p string) (uint64, bool) {
	if p == "" {
		return 0, false
	}
	base := 10
	switch {
	case len(p) >= 2 && (p[:2] == "0x" || p[:2] == "0X"):
		p, base = p[2:], 16
	case len(p) >= 2 && p[0] == '0':
		p, base = p[1:], 8
	}
	if p == "" {
		return 0, true
	}
	n, err := strconv.ParseUint(p, base, 64)
	return n, err == nil // ParseUint with a base other than 0 takes digits only
}

// whatwgEndsInNumber is the standard's "ends in a number checker".
func whatwgEndsInNumber(s string) bool {
	parts := strings.Split(s, ".")
	if parts[len(parts)-1] == "" {
		if len(parts) == 1 {
			return false
		}
		parts = parts[:len(parts)-1]
	}
	last := parts[len(parts)-1]
	if last != "" && strings.Trim(last, "0123456789") == "" {
		return true
	}
	_, ok := whatwgNumber(last)
	return ok
}

// The oracles themselves, on known answers.
func TestIPv4Oracles(t *testing.T) {
	tests := []struct {
		in       string
		inetAton string // "" for refused
		whatwg   string
	}{
		{"127.0.0.1", "127.0.0.1", "127.0.0.1"},
		{"127.1", "127.0.0.1", "127.0.0.1"},
		{"0x7f.1", "127.0.0.1", "127.0.0.1"},
		{"017700000001", "127.0.0.1", "127.0.0.1"},
		{"2130706433", "127.0.0.1", "127.0.0.1"},
		{"127.0.0.1.", "", "127.0.0.1"},
		{"0x", "", "0.0.0.0"},
		{"08", "", ""},
		{"1.2.3.4.5", "", ""},
		{"256.1", "", ""},
		{"1.256", "1.0.1.0", "1.0.1.0"},
		{"example.com", "", ""},
	}
	for _, tt := range tests {
		v, ok := inetAton(tt.in)
		if got := addrOr(v, ok); got != tt.inetAton {
			t.Errorf("inetAton(%q) = %q, want %q", tt.in, got, tt.inetAton)
		}
		v, ok = whatwgIPv4(tt.in)
		if got := addrOr(v, ok); got != tt.whatwg {
			t.Errorf("whatwgIPv4(%q) = %q, want %q", tt.in, got, tt.whatwg)
		}
	}
}

func addrOr(v [4]byte, ok bool) string {
	if !ok {
		return ""
	}
	return netip.AddrFrom4(v).String()
}
