package addr

import (
	"net/netip"
)

// Class is what kind of destination an address is. The zero Class is
// Invalid.
type Class uint8

// The classes, from the IANA special-purpose address registries and the
// cloud providers' documentation.
const (
	// Invalid is the class of the zero netip.Addr.
	Invalid Class = iota
	// Public: globally reachable unicast.
	Public
	// Private: 10/8, 172.16/12, 192.168/16, fc00::/7 (ULA), fec0::/10
	// (deprecated site-local).
	Private
	// CGNAT: the shared address space 100.64/10 (carrier-grade NAT,
	// and tailnets).
	CGNAT
	// Reserved: documentation, benchmarking, IETF protocol assignments,
	// 240/4, discard-only and unassigned IPv6 space.
	Reserved
	// LinkLocal: 169.254/16, fe80::/10.
	LinkLocal
	// ThisNetwork: 0/8 other than 0.0.0.0 (Linux can treat it as local).
	ThisNetwork
	// Broadcast: 255.255.255.255.
	Broadcast
	// Multicast: 224/4, ff00::/8.
	Multicast
	// Unspecified: 0.0.0.0 and ::, which reach the local host.
	Unspecified
	// Loopback: 127/8, ::1.
	Loopback
	// Metadata: cloud instance metadata and platform endpoints
	// (169.254.169.254, fd00:ec2::254, 100.100.100.200, …), which hand
	// out credentials.
	Metadata
)

var classNames = [...]string{
	Invalid:     "invalid",
	Public:      "public",
	Private:     "private",
	CGNAT:       "cgnat",
	Reserved:    "reserved",
	LinkLocal:   "link-local",
	ThisNetwork: "this-network",
	Broadcast:   "broadcast",
	Multicast:   "multicast",
	Unspecified: "unspecified",
	Loopback:    "loopback",
	Metadata:    "metadata",
}

var classWords = [...]string{
	Invalid:     "not a valid address",
	Public:      "a public address",
	Private:     "a private address",
	CGNAT:       "a carrier-grade NAT (shared) address",
	Reserved:    "a reserved or special-purpose address",
	LinkLocal:   "a link-local address",
	ThisNetwork: `a "this network" address (0.0.0.0/8)`,
	Broadcast:   "the broadcast address",
	Multicast:   "a multicast address",
	Unspecified: "the unspecified address",
	Loopback:    "a loopback address",
	Metadata:    "a cloud metadata address",
}

// String is the class's short name ("link-local"), for logs and ledgers.
func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return "invalid"
}

// Words describes the class in plain words ("a cloud metadata address").
func (c Class) Words() string {
	if int(c) < len(classWords) {
		return classWords[c]
	}
	return classWords[Invalid]
}

// Overridable reports whether an operator's allowed ranges
// (Checker.AllowCIDRs) can permit addresses of this class. Public needs
// no permission; loopback, unspecified, "this network", broadcast,
// multicast, metadata and invalid addresses are never permitted.
func (c Class) Overridable() bool {
	switch c {
	case Private, CGNAT, Reserved, LinkLocal:
		return true
	}
	return false
}

// rank orders the classes from least (Public) to most restrictive.
func (c Class) rank() int {
	if c == Invalid || int(c) >= len(classNames) {
		return len(classNames)
	}
	return int(c)
}

// stricter returns the more restrictive of a and b.
func stricter(a, b Class) Class {
	if b.rank() > a.rank() {
		return b
	}
	return a
}

type classPrefix struct {
	p netip.Prefix
	c Class
}

func cp(s string, c Class) classPrefix { return classPrefix{netip.MustParsePrefix(s), c} }

// v4Table and v6Table classify by longest prefix match. Embedded IPv4
// addresses are classified separately (embeddedIPv4) and the stricter
// class wins; the entries for the transition ranges below are for the
// outer address only.
var v4Table = []classPrefix{
	cp("0.0.0.0/0", Public),
	cp("0.0.0.0/8", ThisNetwork),
	cp("0.0.0.0/32", Unspecified),
	cp("10.0.0.0/8", Private),
	cp("100.64.0.0/10", CGNAT),
	cp("127.0.0.0/8", Loopback),
	cp("169.254.0.0/16", LinkLocal),
	cp("172.16.0.0/12", Private),
	cp("192.0.0.0/24", Reserved),   // IETF protocol assignments
	cp("192.0.2.0/24", Reserved),   // TEST-NET-1
	cp("192.88.99.0/24", Reserved), // 6to4 relay anycast (deprecated)
	cp("192.168.0.0/16", Private),
	cp("198.18.0.0/15", Reserved),   // benchmarking
	cp("198.51.100.0/24", Reserved), // TEST-NET-2
	cp("203.0.113.0/24", Reserved),  // TEST-NET-3
	cp("224.0.0.0/4", Multicast),
	cp("240.0.0.0/4", Reserved),
	cp("255.255.255.255/32", Broadcast),
}

var v6Table = []classPrefix{
	cp("::/0", Reserved), // outside 2000::/3 nothing is assigned for unicast
	cp("::/128", Unspecified),
	cp("::1/128", Loopback),
	cp("64:ff9b::/96", Public),     // NAT64 well-known prefix: class from what it carries
	cp("64:ff9b:1::/48", Reserved), // NAT64 local use
	cp("100::/64", Reserved),       // discard-only
	cp("100:0:0:1::/64", Reserved), // dummy prefix (RFC 9780)
	cp("2000::/3", Public),
	cp("2001::/23", Reserved),     // IETF protocol assignments
	cp("2001::/32", Public),       // Teredo: class from the server and client it carries
	cp("2001:1::1/128", Public),   // PCP anycast
	cp("2001:1::2/128", Public),   // TURN anycast
	cp("2001:1::3/128", Public),   // DNS-SD service registration anycast
	cp("2001:3::/32", Public),     // AMT
	cp("2001:4:112::/48", Public), // AS112-v6
	cp("2001:20::/28", Public),    // ORCHIDv2
	cp("2001:30::/28", Public),    // drone remote ID
	cp("2001:db8::/32", Reserved), // documentation
	cp("2002::/16", Public),       // 6to4: class from what it carries
	cp("3fff::/20", Reserved),     // documentation (RFC 9637)
	cp("5f00::/16", Reserved),     // SRv6 SIDs
	cp("fc00::/7", Private),
	cp("fe80::/10", LinkLocal),
	cp("fec0::/10", Private), // site-local (deprecated)
	cp("ff00::/8", Multicast),
}

// metadataPrefixes are cloud instance metadata, credential and platform
// endpoints. Most sit in link-local or private space already; they are
// listed so that no allowed range can open them.
var metadataPrefixes = []netip.Prefix{
	netip.MustParsePrefix("169.254.169.254/32"),     // AWS, GCP, Azure, OCI, DigitalOcean, OpenStack, Linode, …
	netip.MustParsePrefix("169.254.170.2/32"),       // AWS ECS task credentials
	netip.MustParsePrefix("169.254.170.23/32"),      // AWS EKS Pod Identity agent
	netip.MustParsePrefix("169.254.0.23/32"),        // Tencent Cloud
	netip.MustParsePrefix("169.254.42.42/32"),       // Scaleway
	netip.MustParsePrefix("100.100.100.200/32"),     // Alibaba Cloud
	netip.MustParsePrefix("168.63.129.16/32"),       // Azure WireServer (a public address, Azure's own)
	netip.MustParsePrefix("192.0.0.192/32"),         // Oracle Cloud Infrastructure Classic
	netip.MustParsePrefix("fd00:ec2::/32"),          // AWS IPv6 services: IMDS ::254, EKS Pod Identity ::23, DNS, NTP
	netip.MustParsePrefix("fd20:ce::254/128"),       // Google Cloud
	netip.MustParsePrefix("fd00:c1::a9fe:a9fe/128"), // Oracle Cloud Infrastructure
	netip.MustParsePrefix("fd00:42::42/128"),        // Scaleway
	netip.MustParsePrefix("fd00:a9fe:a9fe::1/128"),  // Akamai / Linode
	netip.MustParsePrefix("fd00:100::100:200/128"),  // Alibaba Cloud
}

func init() {
	for _, p := range metadataPrefixes {
		e := classPrefix{p, Metadata}
		if p.Addr().Is4() {
			v4Table = append(v4Table, e)
		} else {
			v6Table = append(v6Table, e)
		}
	}
}

// Ranges whose addresses carry an IPv4 address (RFC 6052, 3056, 4380,
// 6145, 4291).
var (
	compatPrefix     = netip.MustParsePrefix("::/96")           // IPv4-compatible (deprecated)
	translatedPrefix = netip.MustParsePrefix("::ffff:0:0:0/96") // IPv4-translated (SIIT)
	nat64Prefix      = netip.MustParsePrefix("64:ff9b::/96")
	nat64LocalPrefix = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFourPrefix  = netip.MustParsePrefix("2002::/16")
	teredoPrefix     = netip.MustParsePrefix("2001::/32")
)

// embeddingPrefixes are the ranges above, for ParseCIDRs.
var embeddingPrefixes = []struct {
	p    netip.Prefix
	name string
}{
	{compatPrefix, "IPv4-compatible"},
	{translatedPrefix, "IPv4-translated"},
	{nat64Prefix, "NAT64"},
	{nat64LocalPrefix, "NAT64"},
	{sixToFourPrefix, "6to4"},
	{teredoPrefix, "Teredo"},
}

// embedding is an IPv4 address an IPv6 address carries, and how.
type embedding struct {
	addr netip.Addr
	how  string
}

// embeddedIPv4 returns the IPv4 addresses an IPv6 address carries.
// IPv4-mapped addresses are not handled here: they are unmapped before
// classification, since they are the IPv4 address.
func embeddedIPv4(a netip.Addr) []embedding {
	if !a.Is6() || a.Is4In6() {
		return nil
	}
	b := a.As16()
	at := func(i, j, k, l int) netip.Addr {
		return netip.AddrFrom4([4]byte{b[i], b[j], b[k], b[l]})
	}
	var out []embedding
	switch {
	case compatPrefix.Contains(a):
		if a != netip.IPv6Unspecified() && a != netip.IPv6Loopback() {
			out = append(out, embedding{at(12, 13, 14, 15), "IPv4-compatible IPv6"})
		}
	case translatedPrefix.Contains(a):
		out = append(out, embedding{at(12, 13, 14, 15), "IPv4-translated IPv6"})
	case nat64Prefix.Contains(a):
		out = append(out, embedding{at(12, 13, 14, 15), "NAT64"})
	case nat64LocalPrefix.Contains(a):
		// The operator's prefix may be the /48 or any of RFC 6052's
		// longer lengths inside it; each puts the IPv4 address elsewhere
		// (skipping byte 8), so every placement is considered.
		out = append(out,
			embedding{at(6, 7, 9, 10), "NAT64 /48"},
			embedding{at(7, 9, 10, 11), "NAT64 /56"},
			embedding{at(9, 10, 11, 12), "NAT64 /64"},
			embedding{at(12, 13, 14, 15), "NAT64 /96"})
	case sixToFourPrefix.Contains(a):
		out = append(out, embedding{at(2, 3, 4, 5), "6to4"})
	case teredoPrefix.Contains(a):
		client := netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]})
		out = append(out,
			embedding{at(4, 5, 6, 7), "Teredo server"},
			embedding{client, "Teredo client"})
	}
	// An ISATAP interface identifier (RFC 5214), under any prefix:
	// 0000:5efe or 0200:5efe (the u/g bits may be set), then the IPv4
	// address. ISATAP is obsolete; a public address that happens to have
	// such an identifier is classified by the IPv4 address too.
	if b[8]&^0x03 == 0 && b[9] == 0 && b[10] == 0x5e && b[11] == 0xfe {
		out = append(out, embedding{at(12, 13, 14, 15), "ISATAP"})
	}
	return out
}

func lookup(table []classPrefix, a netip.Addr) Class {
	best, bits := Invalid, -1
	for _, e := range table {
		if e.p.Bits() > bits && e.p.Contains(a) {
			best, bits = e.c, e.p.Bits()
		}
	}
	return best
}

// Classify returns the class of a. An IPv4-mapped address is its IPv4
// address; an IPv6 address that carries IPv4 addresses (IPv4-compatible
// and -translated, NAT64, 6to4, Teredo server and client, ISATAP) gets the
// most restrictive of its own class and theirs. A zone is ignored.
//
// The local-use NAT64 prefix 64:ff9b:1::/48 may hold the operator's
// prefix at any of RFC 6052's lengths from /48 to /96, which place the
// IPv4 address differently; every placement is read and the strictest
// wins, so zeros that one placement reads as 0.0.0.0 often make such an
// address unspecified. It is never public in any case.
func Classify(a netip.Addr) Class {
	c, _ := classify(a)
	return c
}

// classify is Classify that also says which embedded address, if any,
// decided the class.
func classify(a netip.Addr) (Class, *embedding) {
	if !a.IsValid() {
		return Invalid, nil
	}
	a = a.WithZone("").Unmap()
	if a.Is4() {
		return lookup(v4Table, a), nil
	}
	c := lookup(v6Table, a)
	var via *embedding
	for _, e := range embeddedIPv4(a) {
		if ec := lookup(v4Table, e.addr); stricter(c, ec) != c {
			c, via = ec, &e
		}
	}
	return c, via
}
