// Package addr canonicalises the hosts a sandbox asks for and classifies
// the addresses they resolve to, so that the egress proxy and resolver
// judge one spelling of each destination and never dial a loopback,
// private, link-local or cloud metadata address by accident.
//
// Hosts (CanonicalHost, SplitHostPort):
//
//   - A name comes out lower case, without its trailing dot, with
//     internationalised labels as A-labels (xn--…), and checked as a DNS
//     name: labels of 1 to 63 bytes of a-z, 0-9, '-' and '_', not starting
//     or ending with '-', 253 bytes at most.
//   - Anything an IPv4 parser could take for an address comes out as an
//     IP, never as a name: inet_aton's shorthands ("127.1", "2130706433",
//     "0x7f.1", "0177.0.0.1", "017700000001") as well as dotted decimal.
//     A name whose last label is a number ("foo.123", "1.2.3.4.5",
//     "256.0.0.1") is an IPv4 attempt that failed, and is refused: no
//     top-level domain is numeric, and a resolver would otherwise be
//     left to guess.
//   - IPv6 literals are accepted with or without brackets; IPv4-mapped
//     ones (::ffff:a.b.c.d) come out as the IPv4 address they are. Zone
//     identifiers are refused.
//   - Refused outright: empty input, more than 255 bytes, whitespace,
//     control characters, '%' (percent-encoding or an IPv6 zone), '@'
//     (userinfo), and any other character that has no place in a host.
//
// Underscores are accepted in ASCII labels (as egress/rules and egress/dns
// accept them, and as real hosts use them); a name with a non-ASCII label
// goes through IDNA's STD3 rules, which do not allow them.
//
// IDNA uses golang.org/x/net/idna's lookup profile with one change: hyphen
// checks (CheckHyphens) are off, as in browsers, because labels like
// "r3---sn-abc" are in common use. Labels may still not start or end with
// '-'.
//
// Addresses (Classify, Checker): every address has one Class. IPv6 forms
// that carry an IPv4 address (IPv4-mapped, IPv4-compatible and
// -translated, NAT64, 6to4, Teredo, ISATAP) are classified by what they
// carry as well, and the most restrictive class wins, so that
// 64:ff9b::a9fe:a9fe is as much a metadata address as 169.254.169.254.
// A Checker permits public addresses, and private ones an operator
// listed, but never loopback, unspecified, "this network", broadcast,
// multicast, metadata, or the host's own addresses.
package addr
