package addr

import (
	"net/netip"
	"strings"
)

// parseIPv4Loose parses s the way the most permissive IPv4 parsers do
// (inet_aton(3) of glibc and the BSDs, and the WHATWG URL standard, which
// browsers and many HTTP clients follow): one to four parts separated by
// dots, each decimal, octal (a leading 0) or hexadecimal (0x), with any
// number of leading zeros. Every part but the last is one byte; the last
// fills the remaining bytes, so "127.1" is 127.0.0.1 and "2130706433" is
// 127.0.0.1 too. "0x" alone is 0 (WHATWG and BSD; glibc refuses it).
// s must not end in a dot.
func parseIPv4Loose(s string) (netip.Addr, bool) {
	if s == "" || strings.Count(s, ".") > 3 {
		return netip.Addr{}, false
	}
	parts := strings.Split(s, ".")
	var v uint64
	for i, p := range parts {
		n, ok := parseIPv4Part(p)
		if !ok {
			return netip.Addr{}, false
		}
		if i < len(parts)-1 {
			if n > 0xff {
				return netip.Addr{}, false
			}
			v = v<<8 | n
			continue
		}
		rest := uint(8 * (4 - i)) // bits the last part fills
		if n >= 1<<rest {
			return netip.Addr{}, false
		}
		v = v<<rest | n
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// parseIPv4Part parses one part of a loose IPv4 address, up to 2^32-1.
func parseIPv4Part(s string) (uint64, bool) {
	base := uint64(10)
	switch {
	case len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'):
		base, s = 16, s[2:]
	case len(s) >= 2 && s[0] == '0':
		base, s = 8, s[1:]
	case s == "":
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		d, ok := digit(s[i])
		if !ok || d >= base {
			return 0, false
		}
		n = n*base + d
		if n > 0xffffffff {
			return 0, false
		}
	}
	return n, true
}

func digit(c byte) (uint64, bool) {
	switch {
	case '0' <= c && c <= '9':
		return uint64(c - '0'), true
	case 'a' <= c && c <= 'f':
		return uint64(c-'a') + 10, true
	case 'A' <= c && c <= 'F':
		return uint64(c-'A') + 10, true
	}
	return 0, false
}

// endsInNumber reports whether the last label of s (no trailing dot) is
// a number as an IPv4 parser would read it: all decimal digits, or "0x"
// followed by hex digits. Such a host is an IPv4 address or an attempt at
// one, never a name (WHATWG's "ends in a number"; no top-level domain is
// numeric). Every string inet_aton accepts ends in a number.
func endsInNumber(s string) bool {
	last := s[strings.LastIndexByte(s, '.')+1:]
	if last == "" {
		return false
	}
	if hex, ok := strings.CutPrefix(strings.ToLower(last), "0x"); ok {
		for i := 0; i < len(hex); i++ {
			if _, ok := digit(hex[i]); !ok {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(last); i++ {
		if last[i] < '0' || last[i] > '9' {
			return false
		}
	}
	return true
}
