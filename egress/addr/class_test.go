package addr

import (
	"net/netip"
	"testing"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		addr string
		want Class
	}{
		// IPv4.
		{"8.8.8.8", Public},
		{"1.1.1.1", Public},
		{"93.184.216.34", Public},
		{"0.0.0.0", Unspecified},
		{"0.0.0.1", ThisNetwork},
		{"0.255.255.255", ThisNetwork},
		{"10.0.0.1", Private},
		{"10.255.255.255", Private},
		{"100.63.255.255", Public},
		{"100.64.0.1", CGNAT},
		{"100.127.255.255", CGNAT},
		{"100.128.0.0", Public},
		{"127.0.0.1", Loopback},
		{"127.255.255.254", Loopback},
		{"169.254.0.1", LinkLocal},
		{"169.254.169.253", LinkLocal},
		{"172.15.255.255", Public},
		{"172.16.0.1", Private},
		{"172.31.255.255", Private},
		{"172.32.0.0", Public},
		{"192.0.0.1", Reserved},
		{"192.0.2.1", Reserved},
		{"192.88.99.1", Reserved},
		{"192.168.1.1", Private},
		{"198.18.0.1", Reserved},
		{"198.19.255.255", Reserved},
		{"198.20.0.0", Public},
		{"198.51.100.7", Reserved},
		{"203.0.113.9", Reserved},
		{"224.0.0.1", Multicast},
		{"239.255.255.255", Multicast},
		{"240.0.0.1", Reserved},
		{"255.255.255.254", Reserved},
		{"255.255.255.255", Broadcast},
		// Cloud metadata.
		{"169.254.169.254", Metadata},
		{"169.254.170.2", Metadata},
		{"169.254.170.23", Metadata},
		{"169.254.0.23", Metadata},
		{"169.254.42.42", Metadata},
		{"100.100.100.200", Metadata},
		{"168.63.129.16", Metadata},
		{"192.0.0.192", Metadata},
		{"fd00:ec2::254", Metadata},
		{"fd00:ec2::23", Metadata},
		{"fd00:ec2::253", Metadata},
		{"fd20:ce::254", Metadata},
		{"fd00:c1::a9fe:a9fe", Metadata},
		{"fd00:42::42", Metadata},
		{"fd00:a9fe:a9fe::1", Metadata},
		{"fd00:100::100:200", Metadata},
		// IPv6.
		{"2606:4700:4700::1111", Public},
		{"2001:4860:4860::8888", Public},
		{"::", Unspecified},
		{"::1", Loopback},
		{"fc00::1", Private},
		{"fd12:3456::1", Private},
		{"fec0::1", Private},
		{"fe80::1", LinkLocal},
		{"fe80::1%eth0", LinkLocal},
		{"febf::1", LinkLocal},
		{"ff02::1", Multicast},
		{"ff0e::1", Multicast},
		{"2001:db8::1", Reserved},
		{"3fff::1", Reserved},
		{"100::1", Reserved},
		{"100::ffff:ffff:ffff:ffff", Reserved},
		{"100:0:0:1::1", Reserved},
		{"2001:2::1", Reserved},
		{"2001:10::1", Reserved},
		{"2001:1::1", Public},
		{"2001:20::1", Public},
		{"5f00::1", Reserved},
		{"4000::1", Reserved}, // outside 2000::/3
		{"::1:0:0:0", Reserved},
		// IPv4-mapped: the IPv4 address itself.
		{"::ffff:8.8.8.8", Public},
		{"::ffff:127.0.0.1", Loopback},
		{"::ffff:7f00:1", Loopback},
		{"::ffff:169.254.169.254", Metadata},
		{"::ffff:10.0.0.1", Private},
		// IPv4-compatible (deprecated, and never public itself).
		{"::7f00:1", Loopback},
		{"::127.0.0.1", Loopback},
		{"::a9fe:a9fe", Metadata},
		{"::808:808", Reserved},
		{"::2", ThisNetwork},
		{"::a00:1", Reserved},
		// IPv4-translated.
		{"::ffff:0:7f00:1", Loopback},
		{"::ffff:0:808:808", Reserved},
		// NAT64, well-known prefix: as public as what it carries.
		{"64:ff9b::808:808", Public},
		{"64:ff9b::8.8.8.8", Public},
		{"64:ff9b::a9fe:a9fe", Metadata},
		{"64:ff9b::7f00:1", Loopback},
		{"64:ff9b::a00:1", Private},
		{"64:ff9b::6464:64c8", Metadata}, // 100.100.100.200
		{"64:ff9b::e000:1", Multicast},
		{"64:ff9b::", Unspecified},
		// NAT64, local-use prefix: every RFC 6052 placement.
		// The placements overlap, so the zeros of one read as 0.0.0.0 in
		// another: such addresses are never public anyway.
		{"64:ff9b:1::808:808", Unspecified},
		{"64:ff9b:1::a9fe:a9fe", Metadata},       // /96
		{"64:ff9b:1:0:a9:fea9:fe00:0", Metadata}, // /64
		{"64:ff9b:1:a9:fe:a9fe::", Metadata},     // /56
		{"64:ff9b:1:a9fe:a9:fe00::", Metadata},   // /48
		{"64:ff9b:1:7f00:0:1::", Loopback},       // /48
		// 6to4: the IPv4 address in bits 16 to 47.
		{"2002:808:808::1", Public},
		{"2002:a9fe:a9fe::", Metadata},
		{"2002:a9fe:a9fe:1:2:3:4:5", Metadata},
		{"2002:7f00:1::", Loopback},
		{"2002:a00:1::1", Private},
		{"2002:c000:201::1", Reserved},
		{"2002::1", Unspecified},
		// Teredo: server in bits 32 to 63, client in the last 32 bits
		// inverted.
		{"2001:0:4136:e378:8000:63bf:f7f7:f7f7", Public},   // server 65.54.227.120, client 8.8.8.8
		{"2001:0:4136:e378:8000:63bf:80ff:fffe", Loopback}, // client 127.0.0.1
		{"2001:0:4136:e378:8000:63bf:5601:5601", Metadata}, // client 169.254.169.254
		{"2001:0:a00:1:8000:63bf:f7f7:f7f7", Private},      // server 10.0.0.1
		{"2001:0:a9fe:a9fe::f7f7:f7f7", Metadata},          // server 169.254.169.254
		{"2001:0:4136:e378::", Broadcast},                  // client 255.255.255.255
		{"2001::", Unspecified},                            // server 0.0.0.0
		// ISATAP interface identifiers, under any prefix.
		{"2600::5efe:808:808", Public},
		{"2600::5efe:7f00:1", Loopback},
		{"2600::200:5efe:a00:1", Private},
		{"2600::100:5efe:a9fe:a9fe", Metadata},
		{"fe80::5efe:7f00:1", Loopback},
		{"fe80::5efe:808:808", LinkLocal},
		{"2600::400:5efe:7f00:1", Public}, // not an ISATAP identifier
		// Not an address.
		{"", Invalid},
	}
	for _, tt := range tests {
		var a netip.Addr
		if tt.addr != "" {
			a = netip.MustParseAddr(tt.addr)
		}
		if got := Classify(a); got != tt.want {
			t.Errorf("Classify(%s) = %v, want %v", tt.addr, got, tt.want)
		}
	}
}

// Classifying the canonical host agrees with classifying the address,
// whatever the spelling.
func TestClassifySpellings(t *testing.T) {
	tests := []struct {
		host string
		want Class
	}{
		{"0x7f.1", Loopback},
		{"017700000001", Loopback},
		{"127.000.000.001", Loopback},
		{"2130706433", Loopback},
		{"[::ffff:127.0.0.1]", Loopback},
		{"[::ffff:7f00:1]", Loopback},
		{"0xa9fea9fe", Metadata},
		{"0251.0376.0251.0376", Metadata},
		{"64:ff9b::a9fe:a9fe", Metadata},
		{"[64:ff9b::169.254.169.254]", Metadata},
		{"2002:a9fe:a9fe::", Metadata},
		{"[2001:0:4136:e378:8000:63bf:80ff:fffe]", Loopback},
		{"0", Unspecified},
		{"0x", Unspecified},
		{"[::]", Unspecified},
		{"10.1", Private},
		{"0xc0a80001", Private},
		{"１２７.０.０.１", Loopback},
	}
	for _, tt := range tests {
		h, err := CanonicalHost(tt.host)
		if err != nil {
			t.Errorf("CanonicalHost(%q): %v", tt.host, err)
			continue
		}
		if got := Classify(h.IP); got != tt.want {
			t.Errorf("Classify(CanonicalHost(%q) = %s) = %v, want %v", tt.host, h, got, tt.want)
		}
	}
}

func TestClassNames(t *testing.T) {
	for c := Invalid; c <= Metadata; c++ {
		if c.String() == "" || c.Words() == "" {
			t.Errorf("class %d has no name or words", c)
		}
		if c != Invalid && c.String() == "invalid" {
			t.Errorf("class %d is named invalid", c)
		}
	}
	if got := Class(200).String(); got != "invalid" {
		t.Errorf("Class(200).String() = %q, want invalid", got)
	}
	if got := Metadata.Words(); got != "a cloud metadata address" {
		t.Errorf("Metadata.Words() = %q", got)
	}
}

func TestOverridable(t *testing.T) {
	want := map[Class]bool{Private: true, CGNAT: true, Reserved: true, LinkLocal: true}
	for c := Invalid; c <= Metadata; c++ {
		if got := c.Overridable(); got != want[c] {
			t.Errorf("%v.Overridable() = %v, want %v", c, got, want[c])
		}
	}
}

// The order of restriction: every class is stricter than Public, the
// never-allowed classes are stricter than every overridable one, and
// Metadata and Invalid are the strictest.
func TestStricter(t *testing.T) {
	for c := Invalid; c <= Metadata; c++ {
		if c != Public && stricter(Public, c) != c {
			t.Errorf("stricter(Public, %v) = %v", c, stricter(Public, c))
		}
		if stricter(c, Invalid) != Invalid {
			t.Errorf("stricter(%v, Invalid) is not Invalid", c)
		}
		if c != Invalid && stricter(c, Metadata) != Metadata {
			t.Errorf("stricter(%v, Metadata) is not Metadata", c)
		}
		for d := Invalid; d <= Metadata; d++ {
			if c.Overridable() && d != Public && !d.Overridable() && stricter(c, d) != d {
				t.Errorf("stricter(%v, %v) = %v, want %v", c, d, stricter(c, d), d)
			}
		}
	}
}

// The tables hold canonical prefixes of the right family.
func TestTables(t *testing.T) {
	for _, e := range v4Table {
		if e.p.Masked() != e.p || !e.p.Addr().Is4() {
			t.Errorf("v4Table: %s is not a canonical IPv4 prefix", e.p)
		}
	}
	for _, e := range v6Table {
		if e.p.Masked() != e.p || !e.p.Addr().Is6() || e.p.Addr().Is4In6() {
			t.Errorf("v6Table: %s is not a canonical IPv6 prefix", e.p)
		}
	}
	for _, p := range metadataPrefixes {
		if Classify(p.Addr()) != Metadata {
			t.Errorf("metadata prefix %s is classified %v", p, Classify(p.Addr()))
		}
	}
}

func TestEmbeddedIPv4(t *testing.T) {
	tests := []struct {
		addr string
		want []string // "how addr"
	}{
		{"8.8.8.8", nil},
		{"::ffff:127.0.0.1", nil},
		{"::", nil},
		{"::1", nil},
		{"2606:4700::1111", nil},
		{"::7f00:1", []string{"IPv4-compatible IPv6 127.0.0.1"}},
		{"::ffff:0:7f00:1", []string{"IPv4-translated IPv6 127.0.0.1"}},
		{"64:ff9b::a9fe:a9fe", []string{"NAT64 169.254.169.254"}},
		{"64:ff9b:1:102:3:400::", []string{"NAT64 /48 1.2.3.4", "NAT64 /56 2.3.4.0", "NAT64 /64 3.4.0.0", "NAT64 /96 0.0.0.0"}},
		{"2002:a9fe:a9fe::", []string{"6to4 169.254.169.254"}},
		{"2001:0:4136:e378:8000:63bf:80ff:fffe", []string{"Teredo server 65.54.227.120", "Teredo client 127.0.0.1"}},
		{"2600::200:5efe:a00:1", []string{"ISATAP 10.0.0.1"}},
		{"2002:808:808:0:200:5efe:a00:1", []string{"6to4 8.8.8.8", "ISATAP 10.0.0.1"}},
	}
	for _, tt := range tests {
		var got []string
		for _, e := range embeddedIPv4(netip.MustParseAddr(tt.addr)) {
			got = append(got, e.how+" "+e.addr.String())
		}
		if len(got) != len(tt.want) {
			t.Errorf("embeddedIPv4(%s) = %q, want %q", tt.addr, got, tt.want)
			continue
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("embeddedIPv4(%s) = %q, want %q", tt.addr, got, tt.want)
				break
			}
		}
	}
}
