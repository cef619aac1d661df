package rules

import (
	"fmt"
	"net/netip"
	"strings"
)

// MaxHostLen is the longest host pattern, in bytes, once its trailing dot
// is removed (the longest DNS name).
const MaxHostLen = 253

// hostPattern is one compiled host pattern: an exact name, a wildcard
// ("*.suffix": names below suffix, not suffix itself), or an IP literal.
type hostPattern struct {
	text   string     // canonical form, as written back in summaries and rules
	suffix string     // for a wildcard: ".suffix"
	ip     netip.Addr // for an IP literal
}

// parseHostPattern checks and canonicalises a host pattern from a policy:
// ASCII only, lower-cased, one trailing dot removed, labels of letters,
// digits, '-' and '_' (1 to 63 bytes each), '*' only as a whole first
// label followed by at least two labels, and IP literals in their
// canonical form. It is deliberately lighter than egress/addr: a pattern
// that addr would never produce simply matches nothing.
func parseHostPattern(raw string) (hostPattern, error) {
	for i := 0; i < len(raw); i++ {
		if raw[i] >= 0x80 {
			return hostPattern{}, fmt.Errorf("host %q is not ASCII; write internationalised names as A-labels (xn--…)", raw)
		}
	}
	h := strings.ToLower(raw) // ASCII only, so byte-wise
	h = strings.TrimSuffix(h, ".")
	if h == "" {
		return hostPattern{}, fmt.Errorf("host is empty")
	}
	if len(h) > MaxHostLen {
		return hostPattern{}, fmt.Errorf("host is %d bytes, more than %d", len(h), MaxHostLen)
	}
	if strings.HasPrefix(h, "[") || strings.Contains(h, ":") {
		ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))
		if err != nil || ip.Zone() != "" {
			return hostPattern{}, fmt.Errorf("host %q is neither a name nor an IP address", raw)
		}
		ip = ip.Unmap()
		return hostPattern{text: ip.String(), ip: ip}, nil
	}
	if ip, err := netip.ParseAddr(h); err == nil {
		return hostPattern{text: ip.String(), ip: ip}, nil
	}
	name, wildcard := strings.CutPrefix(h, "*.")
	if err := checkName(name); err != nil {
		return hostPattern{}, fmt.Errorf("host %q: %w", raw, err)
	}
	if !wildcard {
		return hostPattern{text: name}, nil
	}
	if !strings.Contains(name, ".") {
		return hostPattern{}, fmt.Errorf("host %q: a wildcard needs at least two labels after *. (*.example.com, not *.com)", raw)
	}
	return hostPattern{text: h, suffix: "." + name}, nil
}

// checkName checks a lower-cased DNS name without a wildcard.
func checkName(name string) error {
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" {
			return fmt.Errorf("empty label")
		}
		if len(l) > 63 {
			return fmt.Errorf("label of %d bytes, more than 63", len(l))
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			switch {
			case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_':
			case c == '*':
				return fmt.Errorf("* is allowed only as the whole first label (*.example.com)")
			default:
				return fmt.Errorf("%q is not allowed in a host name", c)
			}
		}
	}
	if allDigits(labels[len(labels)-1]) {
		return fmt.Errorf("the last label is numeric, but the host is not an IP address")
	}
	return nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// normalHost lightly normalises a host handed to the policy, which should
// be canonical already: ASCII lower case, one trailing dot removed,
// brackets around an IPv6 literal removed.
func normalHost(h string) string {
	h = strings.TrimSuffix(h, ".")
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	for i := 0; i < len(h); i++ {
		if 'A' <= h[i] && h[i] <= 'Z' {
			return asciiLower(h)
		}
	}
	return h
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// matches reports whether host (normalised) is covered by the pattern.
func (p hostPattern) matches(host string) bool {
	switch {
	case p.ip.IsValid():
		ip, err := netip.ParseAddr(host)
		return err == nil && ip.Zone() == "" && ip.Unmap() == p.ip
	case p.suffix != "":
		return len(host) > len(p.suffix) && strings.HasSuffix(host, p.suffix)
	default:
		return host == p.text
	}
}

// CanonicalHostPattern checks a host pattern (an exact name, an IP
// literal, or "*.suffix" with at least two labels after the star) the way
// a policy's allow entry is checked, and returns its canonical form.
// Credential grants name their hosts with it.
func CanonicalHostPattern(raw string) (string, error) {
	p, err := parseHostPattern(raw)
	if err != nil {
		return "", err
	}
	return p.text, nil
}
