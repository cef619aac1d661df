package proxy

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// The stand-ins below keep the proxy safe to use on its own and in tests;
// the daemon passes egress/addr's and egress/rules' real functions in
// Config instead.

// basicCanonicalHost lower-cases raw, drops one trailing dot, and parses an
// IP literal in its standard spelling. It refuses what it cannot
// canonicalise: non-ASCII names, bad labels, and names that look like an
// IP address in another spelling (127.1, 0x7f.0.0.1, 2130706433).
func basicCanonicalHost(raw string) (string, netip.Addr, error) {
	h := strings.TrimSuffix(strings.ToLower(raw), ".")
	if h == "" {
		return "", netip.Addr{}, errors.New("empty host")
	}
	if ip, err := netip.ParseAddr(h); err == nil {
		if ip.Zone() != "" {
			return "", netip.Addr{}, fmt.Errorf("%q has a zone; zoned addresses are refused", raw)
		}
		return ip.String(), ip, nil
	}
	if len(h) > 253 {
		return "", netip.Addr{}, errors.New("host name longer than 253 characters")
	}
	labels := strings.Split(h, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return "", netip.Addr{}, fmt.Errorf("%q has an empty or over-long label", raw)
		}
		for _, c := range []byte(l) {
			switch {
			case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
			case c >= 0x80:
				return "", netip.Addr{}, fmt.Errorf("%q is not ASCII; use its A-label (xn--) form", raw)
			default:
				return "", netip.Addr{}, fmt.Errorf("%q has a character a host name cannot have", raw)
			}
		}
	}
	if looksNumeric(labels[len(labels)-1]) {
		return "", netip.Addr{}, fmt.Errorf("%q looks like an IP address in an unusual spelling; write it as a dotted quad", raw)
	}
	return h, netip.Addr{}, nil
}

// looksNumeric reports whether a last label would make the name parse as an
// IPv4 address in inet_aton's forms: all decimal digits, or 0x and hex.
func looksNumeric(l string) bool {
	if s, ok := strings.CutPrefix(l, "0x"); ok {
		l = s
		if l == "" {
			return true
		}
		for _, c := range []byte(l) {
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
		return true
	}
	for _, c := range []byte(l) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// basicCanonicalPath accepts an escaped path only when it has one obvious
// meaning, and returns it unchanged.
func basicCanonicalPath(raw string) (string, error) {
	if raw == "" {
		return "/", nil
	}
	if raw[0] != '/' {
		return "", fmt.Errorf("path %q does not start with /", raw)
	}
	if strings.Contains(raw, `\`) {
		return "", fmt.Errorf("path %q has a backslash", raw)
	}
	if strings.Contains(raw, "//") {
		return "", fmt.Errorf("path %q has an empty segment (//)", raw)
	}
	lower := strings.ToLower(raw)
	for _, enc := range []string{"%2e", "%2f", "%5c", "%25"} {
		if strings.Contains(lower, enc) {
			return "", fmt.Errorf("path %q has the ambiguous encoding %s", raw, enc)
		}
	}
	for seg := range strings.SplitSeq(raw[1:], "/") {
		if seg == "." || seg == ".." {
			return "", fmt.Errorf("path %q has a dot segment", raw)
		}
	}
	return raw, nil
}

var (
	cgnat      = netip.MustParsePrefix("100.64.0.0/10")
	thisNet    = netip.MustParsePrefix("0.0.0.0/8")
	reserved4  = netip.MustParsePrefix("240.0.0.0/4")
	ietfProto4 = netip.MustParsePrefix("192.0.0.0/24")
)

// basicCheckAddr refuses every address a sandbox must not reach without an
// operator's say-so, saying which address and why, as egress/addr does.
func basicCheckAddr(a netip.Addr) error {
	if !a.IsValid() {
		return errors.New("not a valid address")
	}
	u := a.Unmap()
	var what string
	switch {
	case u.Zone() != "":
		what = "a zoned address"
	case u.IsUnspecified():
		what = "an unspecified address"
	case u.IsLoopback():
		what = "a loopback address"
	case u.IsPrivate():
		what = "a private address"
	case u.IsLinkLocalUnicast():
		what = "a link-local address (cloud metadata lives here)"
	case u.IsMulticast(), u.IsLinkLocalMulticast(), u.IsInterfaceLocalMulticast():
		what = "a multicast address"
	case cgnat.Contains(u):
		what = "a shared (CGNAT) address"
	case thisNet.Contains(u), reserved4.Contains(u), ietfProto4.Contains(u):
		what = "a reserved address"
	default:
		return nil
	}
	return fmt.Errorf("%s is %s", a, what)
}
