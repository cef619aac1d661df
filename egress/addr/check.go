package addr

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// ErrDenied: an address a sandbox may not reach. Errors from Check wrap
// it and are *DeniedError.
var ErrDenied = errors.New("address not allowed")

// ErrInvalidCIDR: an allowed range that is malformed or too wide.
var ErrInvalidCIDR = errors.New("invalid allowed range")

// Checker decides which addresses a sandbox's connections may go to,
// after a name has been resolved (or for an IP literal). Its zero value
// permits public addresses only. A Checker is safe for concurrent use as
// long as its fields are not changed.
type Checker struct {
	// AllowCIDRs are private ranges the operator permits (on-premises
	// services, a test's own network namespaces). Build them with
	// ParseCIDRs. They never open loopback, unspecified, "this network",
	// broadcast, multicast or metadata addresses, whatever they cover.
	AllowCIDRs []netip.Prefix
	// HostAddrs returns the host's own addresses, which are never
	// permitted (a service bound to 0.0.0.0 answers on them). It is
	// called on every Check, so it should be cheap (a cached list). Nil
	// means none are known.
	HostAddrs func() []netip.Addr
}

// DeniedError says why Check refused an address.
type DeniedError struct {
	Addr  netip.Addr // the address checked (unmapped, without zone)
	Class Class      // its class, the most restrictive found
	// Carried and Via are set when the class came from an IPv4 address
	// the IPv6 address carries, or when that carried address is one of
	// the host's own; Via says how ("NAT64", "6to4", "Teredo client"…).
	Carried netip.Addr
	Via     string
	// HostOwn: the address (or the one it carries) is one of the host's.
	HostOwn bool
}

func (e *DeniedError) Error() string {
	if !e.Addr.IsValid() {
		return "not a valid address"
	}
	var b strings.Builder
	b.WriteString(e.Addr.String())
	b.WriteString(" is ")
	if e.HostOwn {
		b.WriteString("one of this host's own addresses")
	} else {
		b.WriteString(e.Class.Words())
	}
	if e.Carried.IsValid() {
		fmt.Fprintf(&b, " (it carries %s via %s)", e.Carried, e.Via)
	}
	if !e.HostOwn && e.Class.Overridable() {
		b.WriteString("; an operator must add a range covering it to the allowed ranges to reach it")
	}
	return b.String()
}

func (e *DeniedError) Unwrap() error { return ErrDenied }

// Check returns nil if a sandbox may connect to a, and a *DeniedError
// (wrapping ErrDenied) if not. It permits public addresses and addresses
// inside AllowCIDRs, except that it never permits loopback, unspecified,
// "this network", broadcast, multicast or metadata addresses, or one of
// the host's own addresses, whatever AllowCIDRs say.
func (c *Checker) Check(a netip.Addr) error {
	if !a.IsValid() {
		return &DeniedError{Class: Invalid}
	}
	a = a.WithZone("").Unmap()
	class, via := classify(a)
	deny := &DeniedError{Addr: a, Class: class}
	if via != nil {
		deny.Carried, deny.Via = via.addr, via.how
	}
	if class != Public && !class.Overridable() {
		return deny
	}
	if c.HostAddrs != nil {
		carried := embeddedIPv4(a)
		for _, h := range c.HostAddrs() {
			h = h.WithZone("").Unmap()
			if h == a {
				return &DeniedError{Addr: a, Class: class, HostOwn: true}
			}
			for _, e := range carried {
				if h == e.addr {
					return &DeniedError{Addr: a, Class: class, HostOwn: true, Carried: e.addr, Via: e.how}
				}
			}
		}
	}
	if class == Public {
		return nil
	}
	for _, p := range c.AllowCIDRs {
		if p.Contains(a) {
			return nil
		}
	}
	return deny
}

// loopbackPrefixes, metadataPrefixes and embeddingPrefixes (which can
// carry either) are what an allowed range may not touch.
var loopbackPrefixes = []netip.Prefix{
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("::1/128"),
}

// ParseCIDRs parses an operator's allowed ranges ("10.20.0.0/16",
// "fd12:3456::/48"; a bare address is a /32 or /128). Surrounding spaces
// are ignored. IPv4-mapped ranges are turned into IPv4 ones. It refuses a
// range with host bits set (did you mean the network?), and a range that
// covers a loopback or metadata address, or any of the IPv6 transition
// ranges (NAT64, 6to4, Teredo, IPv4-compatible and -translated), which
// can carry them: list the ranges you need, not 0.0.0.0/0.
func ParseCIDRs(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, raw := range list {
		p, err := parseCIDR(raw)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func parseCIDR(raw string) (netip.Prefix, error) {
	s := strings.TrimSpace(raw)
	var p netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return netip.Prefix{}, fmt.Errorf("%w %q: not a CIDR (%v)", ErrInvalidCIDR, raw, err)
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("%w %q: neither a CIDR nor an address", ErrInvalidCIDR, raw)
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("%w %q: has host bits set; did you mean %s?", ErrInvalidCIDR, raw, p.Masked())
	}
	if a := p.Addr(); a.Is4In6() {
		if p.Bits() < 96 {
			return netip.Prefix{}, fmt.Errorf("%w %q: reaches beyond the IPv4-mapped range; write the IPv4 range", ErrInvalidCIDR, raw)
		}
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	for _, q := range loopbackPrefixes {
		if p.Overlaps(q) {
			return netip.Prefix{}, fmt.Errorf("%w %q: covers loopback addresses (%s)", ErrInvalidCIDR, raw, q)
		}
	}
	for _, q := range metadataPrefixes {
		if p.Overlaps(q) {
			return netip.Prefix{}, fmt.Errorf("%w %q: covers cloud metadata addresses (%s)", ErrInvalidCIDR, raw, prefixText(q))
		}
	}
	for _, q := range embeddingPrefixes {
		if p.Overlaps(q.p) {
			return netip.Prefix{}, fmt.Errorf("%w %q: covers %s addresses (%s), which can carry loopback and metadata addresses", ErrInvalidCIDR, raw, q.name, q.p)
		}
	}
	return p, nil
}

// prefixText is p, or its address alone when p is a single address.
func prefixText(p netip.Prefix) string {
	if p.IsSingleIP() {
		return p.Addr().String()
	}
	return p.String()
}
