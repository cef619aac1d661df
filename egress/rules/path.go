package rules

import (
	"errors"
	"fmt"
	"strings"
)

// MaxPathLen is the longest request path CanonicalPath accepts, in bytes.
const MaxPathLen = 2048

// ErrPathNotCanonical is wrapped by every CanonicalPath error. A path that
// is not canonical never matches a limited entry or grant.
var ErrPathNotCanonical = errors.New("path is not canonical")

// CanonicalPath checks the path of a request target (without its query,
// which the caller removes first) and returns its canonical form, or an
// error wrapping ErrPathNotCanonical when the path could be read in more
// than one way by the server behind the proxy.
//
// The rules, chosen so that what the proxy matches is what any server
// would see:
//
//   - It must start with '/' and be at most MaxPathLen bytes.
//   - Raw bytes are limited to RFC 3986 path characters: letters, digits,
//     "-._~", "!$&'()*+,;=:@", '/' and '%'. Anything else (controls, NUL,
//     space, '\\', '?', '#', '"', '<', '>', '^', '`', '{', '|', '}', DEL,
//     and every non-ASCII byte) is refused; non-ASCII must be
//     percent-encoded.
//   - '%' must start a valid escape %XY. Escapes of '.', '/', '\\' and '%'
//     are refused (they are how traversal is smuggled past a matcher), as
//     are escapes of other unreserved characters (letters, digits, "-_~",
//     which must be sent as themselves so a pattern sees them) and of
//     control bytes. Escapes of everything else (reserved characters such
//     as %3F or %20, and bytes >= 0x80) are kept, with the hex digits
//     upper-cased: that is the only change CanonicalPath ever makes, and
//     it does not change what the path means.
//   - "//" is refused anywhere, and so is a "." or ".." segment, also when
//     followed by a ";" parameter ("..;" is ".." to some servers).
//
// A canonical path is returned unchanged, so CanonicalPath(p) == p tells
// whether p is canonical.
func CanonicalPath(raw string) (string, error) {
	if raw == "" {
		return "", fmt.Errorf("%w: empty; use /", ErrPathNotCanonical)
	}
	if len(raw) > MaxPathLen {
		return "", fmt.Errorf("%w: %d bytes, more than %d", ErrPathNotCanonical, len(raw), MaxPathLen)
	}
	if raw[0] != '/' {
		return "", fmt.Errorf("%w: it must start with /", ErrPathNotCanonical)
	}
	var upper []byte // set once a lower-case escape is seen
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case c == '%':
			if i+2 >= len(raw) || !isHex(raw[i+1]) || !isHex(raw[i+2]) {
				return "", fmt.Errorf("%w: %% at byte %d does not start a valid escape", ErrPathNotCanonical, i)
			}
			b := unhex(raw[i+1])<<4 | unhex(raw[i+2])
			if err := checkEscaped(b, raw[i:i+3]); err != nil {
				return "", err
			}
			if isLowerHex(raw[i+1]) || isLowerHex(raw[i+2]) {
				if upper == nil {
					upper = []byte(raw)
				}
				upper[i+1] = toUpperHex(raw[i+1])
				upper[i+2] = toUpperHex(raw[i+2])
			}
			i += 2
		case c == '\\':
			return "", fmt.Errorf("%w: backslash at byte %d", ErrPathNotCanonical, i)
		case c < 0x20 || c == 0x7f:
			return "", fmt.Errorf("%w: control byte 0x%02x at byte %d", ErrPathNotCanonical, c, i)
		case c >= 0x80:
			return "", fmt.Errorf("%w: non-ASCII byte at byte %d; percent-encode it", ErrPathNotCanonical, i)
		case !isPathChar(c):
			return "", fmt.Errorf("%w: %q at byte %d is not a path character", ErrPathNotCanonical, c, i)
		}
	}
	if i := strings.Index(raw, "//"); i >= 0 {
		return "", fmt.Errorf("%w: empty segment (//) at byte %d", ErrPathNotCanonical, i)
	}
	for seg := range strings.SplitSeq(raw[1:], "/") {
		name, _, _ := strings.Cut(seg, ";")
		if name == "." || name == ".." {
			return "", fmt.Errorf("%w: %q segment", ErrPathNotCanonical, seg)
		}
	}
	if upper != nil {
		return string(upper), nil
	}
	return raw, nil
}

// checkEscaped refuses escapes whose byte is ambiguous or should not be
// escaped at all.
func checkEscaped(b byte, esc string) error {
	switch {
	case b == '.' || b == '/' || b == '\\' || b == '%':
		return fmt.Errorf("%w: %s encodes %q, which is refused", ErrPathNotCanonical, esc, b)
	case b < 0x20 || b == 0x7f:
		return fmt.Errorf("%w: %s encodes a control byte", ErrPathNotCanonical, esc)
	case isUnreserved(b):
		return fmt.Errorf("%w: %s encodes %q; send it unencoded", ErrPathNotCanonical, esc, b)
	}
	return nil
}

// isUnreserved: RFC 3986 unreserved characters.
func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// isPathChar: unreserved, sub-delims, ':', '@' and '/' ('%' is handled
// apart).
func isPathChar(c byte) bool {
	if isUnreserved(c) {
		return true
	}
	return strings.IndexByte("!$&'()*+,;=:@/", c) >= 0
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isLowerHex(c byte) bool { return 'a' <= c && c <= 'f' }

func toUpperHex(c byte) byte {
	if isLowerHex(c) {
		return c - 'a' + 'A'
	}
	return c
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// matchPath reports whether path matches pattern, where '*' in pattern
// matches any run of bytes, '/' included, and every other byte matches
// itself. Both are expected canonical.
func matchPath(pattern, path string) bool {
	// Iterative glob with backtracking to the last star: O(len(pattern) *
	// len(path)) at worst, and both are bounded.
	p, s := 0, 0
	star, mark := -1, 0
	for s < len(path) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, s
			p++
		case p < len(pattern) && pattern[p] == path[s]:
			p++
			s++
		case star >= 0:
			mark++
			s = mark
			p = star + 1
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}
