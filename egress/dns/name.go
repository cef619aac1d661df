package dns

import (
	"net/netip"
	"strings"
)

// Why a name is not looked up, before the policy is asked.
const (
	reasonIPLiteral   = "name is an ip literal"
	reasonInvalidName = "name is not a valid host name"
)

// canonicalName turns a question name (miekg presentation form: escaped,
// fully qualified, any case) into the form egress.Policy expects: lower
// case, no trailing dot, labels of letters, digits, '-' and '_' only, not
// starting or ending with '-' (the names egress/addr.CanonicalHost gives
// back unchanged, so the resolver never answers a name the proxy would
// refuse).
// It returns a reason instead when the name is not a host name the
// resolver will look up: IP literals (a sandbox that asks for one is
// trying to smuggle an address past the policy, or is confused), names
// with escaped or non-LDH bytes, the root, and empty labels.
//
// The check is deliberately narrower than DNS: anything it refuses could
// not be reached through the proxy either.
func canonicalName(qname string) (name, reason string) {
	name = strings.ToLower(strings.TrimSuffix(qname, "."))
	if name == "" {
		return "", reasonInvalidName
	}
	// miekg escapes every byte outside printable ASCII and every byte
	// with a meaning in zone files ('\\', '.', '"', '(' …) with a
	// backslash; none of them belongs in a host name.
	if strings.ContainsRune(name, '\\') {
		return "", reasonInvalidName
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return "", reasonIPLiteral
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return "", reasonInvalidName
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return "", reasonInvalidName
			}
		}
	}
	// No top-level domain is all digits (RFC 3696 §2): such a name is an
	// IPv4 address in one of inet_aton's shorthands ("127.1", "2130706433").
	if allDigits(labels[len(labels)-1]) {
		return "", reasonIPLiteral
	}
	return name, ""
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
