package addr

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// MaxInput is the longest host CanonicalHost looks at, in bytes, before
// any processing.
const MaxInput = 255

// MaxName is the longest canonical name, in bytes, without a trailing dot.
const MaxName = 253

// Errors, to check with errors.Is. The errors returned wrap one of these
// and say what was wrong.
var (
	// ErrInvalidHost: the host is not a name or IP literal Paddock accepts.
	ErrInvalidHost = errors.New("invalid host")
	// ErrInvalidPort: the port is missing, malformed or out of range.
	ErrInvalidPort = errors.New("invalid port")
)

// Host is a canonical host: either a DNS name or an IP address, never
// both.
type Host struct {
	// Name is a lower-case DNS name without a trailing dot, with
	// internationalised labels as A-labels. Empty for an IP.
	Name string
	// IP is set when the host was an IP literal, in any spelling. It
	// has no zone and is never IPv4-mapped IPv6 (that comes out as the
	// IPv4 address).
	IP netip.Addr
}

// IsIP reports whether h is an IP address rather than a name.
func (h Host) IsIP() bool { return h.IP.IsValid() }

// String is the canonical text of h: the name, or the address without
// brackets ("127.0.0.1", "2001:db8::1"). CanonicalHost gives h back for it.
func (h Host) String() string {
	if h.IP.IsValid() {
		return h.IP.String()
	}
	return h.Name
}

// HostPort is h and port joined for dialling: "example.com:443",
// "[2001:db8::1]:443".
func (h Host) HostPort(port int) string {
	return net.JoinHostPort(h.String(), strconv.Itoa(port))
}

// idnaProfile is the lookup profile (mapping for lookup, STD3 rules, the
// Bidi and joiner rules, non-transitional) without CheckHyphens, which
// refuses labels with "--" in their third and fourth places
// ("r3---sn-abc.googlevideo.com"); browsers leave it off for that reason.
var idnaProfile = idna.New(
	idna.MapForLookup(),
	idna.BidiRule(),
	idna.Transitional(false),
	idna.CheckHyphens(false), // after MapForLookup, which turns it on
)

func hostError(raw, format string, args ...any) error {
	return fmt.Errorf("%w %q: %s", ErrInvalidHost, raw, fmt.Sprintf(format, args...))
}

// CanonicalHost checks raw, a host as a client wrote it (a URL's host, a
// CONNECT target without its port, a Host header without its port), and
// returns its canonical form. See the package documentation for what is
// accepted and how it is spelled.
func CanonicalHost(raw string) (Host, error) {
	if err := precheck(raw); err != nil {
		return Host{}, err
	}
	if raw[0] == '[' || strings.IndexByte(raw, ':') >= 0 {
		return parseIPv6Literal(raw)
	}
	if strings.ContainsAny(raw, "[]") {
		return Host{}, hostError(raw, "brackets belong around an IPv6 address only")
	}
	s, err := toASCII(raw)
	if err != nil {
		return Host{}, hostError(raw, "%s", err)
	}
	// One trailing dot (the root) is dropped; a second would leave an
	// empty label, refused below.
	s = strings.TrimSuffix(s, ".")
	if s == "" {
		return Host{}, hostError(raw, "is only the root; name a host")
	}
	if ip, ok := parseIPv4Loose(s); ok {
		return Host{IP: ip}, nil
	}
	if endsInNumber(s) {
		return Host{}, hostError(raw, "ends in a number, so it is an IPv4 address, but not a valid one")
	}
	if err := checkName(s); err != nil {
		return Host{}, hostError(raw, "%s", err)
	}
	// The canonical form must be a fixed point; it is by construction,
	// and this makes sure of it (IDNA has corner cases).
	if again, err := toASCII(s); err != nil || again != s {
		return Host{}, hostError(raw, "has no stable canonical form")
	}
	return Host{Name: s}, nil
}

// precheck refuses what no host may contain, before any parsing.
func precheck(raw string) error {
	if raw == "" {
		return fmt.Errorf("%w: empty", ErrInvalidHost)
	}
	if len(raw) > MaxInput {
		return fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidHost, len(raw), MaxInput)
	}
	if !utf8.ValidString(raw) {
		return hostError(raw, "is not valid UTF-8")
	}
	for _, r := range raw {
		switch {
		case r == '%':
			if strings.IndexByte(raw, ':') >= 0 {
				return hostError(raw, "has an IPv6 zone; zones are not allowed")
			}
			return hostError(raw, "contains '%%'; percent-encoding is not allowed in a host")
		case r == '@':
			return hostError(raw, "contains '@'; user information is not allowed")
		case unicode.IsSpace(r):
			return hostError(raw, "contains whitespace")
		case unicode.IsControl(r):
			return hostError(raw, "contains a control character")
		case r < utf8.RuneSelf && !hostByte(byte(r)):
			return hostError(raw, "contains %q, which has no place in a host", r)
		}
	}
	return nil
}

// hostByte reports whether c, an ASCII byte, may appear in a host as
// written: letters, digits, '-', '.', '_', and ':', '[' and ']' for IPv6.
func hostByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == ':' || c == '[' || c == ']'
}

// parseIPv6Literal parses an IPv6 address, bracketed or not.
func parseIPv6Literal(raw string) (Host, error) {
	s := raw
	if s[0] == '[' {
		if len(s) < 2 || s[len(s)-1] != ']' {
			return Host{}, hostError(raw, "has an unclosed '[' (a port belongs in SplitHostPort)")
		}
		s = s[1 : len(s)-1]
	}
	if strings.ContainsAny(s, "[]") {
		return Host{}, hostError(raw, "has misplaced brackets")
	}
	if strings.IndexByte(s, ':') < 0 {
		return Host{}, hostError(raw, "brackets belong around an IPv6 address only")
	}
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is6() {
		return Host{}, hostError(raw, "contains ':' but is not an IPv6 address (a port belongs in SplitHostPort)")
	}
	if a.Zone() != "" { // unreachable: '%' is refused first
		return Host{}, hostError(raw, "has an IPv6 zone; zones are not allowed")
	}
	return Host{IP: a.Unmap()}, nil
}

// toASCII lower-cases s and turns its internationalised labels into
// A-labels. An ASCII name is only lower-cased (so that '_' survives), but
// its A-labels must be valid IDNA; a name with any non-ASCII character
// goes through IDNA whole.
func toASCII(s string) (string, error) {
	if isASCII(s) {
		s = strings.ToLower(s)
		for l := range strings.SplitSeq(s, ".") {
			if !strings.HasPrefix(l, "xn--") {
				continue
			}
			if a, err := idnaProfile.ToASCII(l); err != nil || a != l {
				return "", fmt.Errorf("label %q is not a valid A-label", l)
			}
		}
		return s, nil
	}
	a, err := idnaProfile.ToASCII(s)
	if err != nil {
		return "", fmt.Errorf("is not a valid internationalised name (%v)", err)
	}
	if !isASCII(a) { // defensive: ToASCII gives ASCII or an error
		return "", errors.New("is not a valid internationalised name")
	}
	return strings.ToLower(a), nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// checkName checks a lower-case ASCII name without a trailing dot.
func checkName(name string) error {
	if len(name) > MaxName {
		return fmt.Errorf("is %d bytes, more than %d", len(name), MaxName)
	}
	for l := range strings.SplitSeq(name, ".") {
		if l == "" {
			return errors.New("has an empty label")
		}
		if len(l) > 63 {
			return fmt.Errorf("has a label of %d bytes, more than 63", len(l))
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return fmt.Errorf("label %q starts or ends with '-'", l)
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("label %q contains %q", l, c)
			}
		}
	}
	return nil
}

// SplitHostPort splits hostport ("example.com:443", "[::1]:8080",
// "example.com") and canonicalises the host. An IPv6 address must be in
// brackets. A missing or empty port ("example.com", "example.com:") is
// defaultPort; defaultPort 0 means the port is required. A port is 1 to
// 5 digits, 1 to 65535.
func SplitHostPort(hostport string, defaultPort int) (Host, int, error) {
	if defaultPort < 0 || defaultPort > 65535 {
		return Host{}, 0, fmt.Errorf("%w: default port %d is out of range", ErrInvalidPort, defaultPort)
	}
	if len(hostport) > MaxInput+len("[]:65535") {
		return Host{}, 0, fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidHost, len(hostport), MaxInput)
	}
	host, port, hasPort := hostport, "", false
	if strings.HasPrefix(hostport, "[") {
		end := strings.IndexByte(hostport, ']')
		if end < 0 {
			return Host{}, 0, hostError(hostport, "has an unclosed '['")
		}
		host, rest := hostport[:end+1], hostport[end+1:]
		switch {
		case rest == "":
		case rest[0] == ':':
			port, hasPort = rest[1:], true
		default:
			return Host{}, 0, hostError(hostport, "has %q after ']'; expected :port", rest)
		}
		return finishHostPort(hostport, host, port, hasPort, defaultPort)
	}
	switch strings.Count(hostport, ":") {
	case 0:
	case 1:
		i := strings.IndexByte(hostport, ':')
		host, port, hasPort = hostport[:i], hostport[i+1:], true
	default:
		return Host{}, 0, hostError(hostport, "has more than one ':'; write an IPv6 address in brackets, as [2001:db8::1]:443")
	}
	return finishHostPort(hostport, host, port, hasPort, defaultPort)
}

func finishHostPort(hostport, host, port string, hasPort bool, defaultPort int) (Host, int, error) {
	n := defaultPort
	if hasPort && port != "" {
		var err error
		if n, err = parsePort(port); err != nil {
			return Host{}, 0, err
		}
	}
	if n == 0 {
		return Host{}, 0, fmt.Errorf("%w: %q has no port", ErrInvalidPort, hostport)
	}
	h, err := CanonicalHost(host)
	if err != nil {
		return Host{}, 0, err
	}
	return h, n, nil
}

func parsePort(s string) (int, error) {
	if len(s) > 5 {
		return 0, fmt.Errorf("%w %q: more than 5 digits", ErrInvalidPort, s)
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%w %q: not a number", ErrInvalidPort, s)
		}
		n = n*10 + int(c-'0')
	}
	if n < 1 || n > 65535 {
		return 0, fmt.Errorf("%w %q: ports are 1 to 65535", ErrInvalidPort, s)
	}
	return n, nil
}
