package addr

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func mustCIDRs(t *testing.T, list ...string) []netip.Prefix {
	t.Helper()
	p, err := ParseCIDRs(list)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func addrs(list ...string) func() []netip.Addr {
	return func() []netip.Addr {
		var out []netip.Addr
		for _, s := range list {
			out = append(out, netip.MustParseAddr(s))
		}
		return out
	}
}

func TestCheck(t *testing.T) {
	c := &Checker{
		AllowCIDRs: mustCIDRs(t, "10.0.0.0/8", "fd12:3456::/32", "192.0.2.0/24", "100.64.0.0/16", "169.254.1.0/24"),
		HostAddrs:  addrs("93.184.216.34", "2606:2800:220:1::1", "fe80::1%eth0", "::ffff:10.9.9.9"),
	}
	tests := []struct {
		addr    string
		allowed bool
		class   Class
		hostOwn bool
	}{
		{"8.8.8.8", true, Public, false},
		{"2606:4700:4700::1111", true, Public, false},
		{"::ffff:8.8.8.8", true, Public, false},
		{"64:ff9b::808:808", true, Public, false},
		{"2002:808:808::1", true, Public, false},
		// Inside the allowed ranges.
		{"10.1.2.3", true, Private, false},
		{"::ffff:10.1.2.3", true, Private, false},
		{"fd12:3456::1", true, Private, false},
		{"192.0.2.5", true, Reserved, false},
		{"100.64.1.1", true, CGNAT, false},
		{"169.254.1.1", true, LinkLocal, false},
		// Outside them.
		{"172.16.0.1", false, Private, false},
		{"192.168.1.1", false, Private, false},
		{"198.51.100.1", false, Reserved, false},
		{"100.65.0.1", false, CGNAT, false},
		{"169.254.2.1", false, LinkLocal, false},
		{"fe80::2", false, LinkLocal, false},
		{"fd99::1", false, Private, false},
		{"64:ff9b::a01:203", false, Private, false}, // NAT64 of an allowed address is not allowed
		{"2002:a01:203::", false, Private, false},
		// Never, whatever the ranges.
		{"127.0.0.1", false, Loopback, false},
		{"::1", false, Loopback, false},
		{"::ffff:127.0.0.1", false, Loopback, false},
		{"0.0.0.0", false, Unspecified, false},
		{"::", false, Unspecified, false},
		{"0.1.2.3", false, ThisNetwork, false},
		{"255.255.255.255", false, Broadcast, false},
		{"224.0.0.1", false, Multicast, false},
		{"ff02::1", false, Multicast, false},
		{"169.254.169.254", false, Metadata, false},
		{"100.100.100.200", false, Metadata, false},
		{"168.63.129.16", false, Metadata, false},
		{"fd00:ec2::254", false, Metadata, false},
		{"64:ff9b::a9fe:a9fe", false, Metadata, false},
		{"2002:a9fe:a9fe::", false, Metadata, false},
		{"2001:0:4136:e378:8000:63bf:80ff:fffe", false, Loopback, false},
		// The host's own addresses, in any form.
		{"93.184.216.34", false, Public, true},
		{"::ffff:93.184.216.34", false, Public, true},
		{"64:ff9b::5db8:d822", false, Public, true},
		{"2002:5db8:d822::1", false, Public, true},
		{"2606:2800:220:1::1", false, Public, true},
		{"10.9.9.9", false, Private, true},
		{"fe80::1%eth1", false, LinkLocal, true}, // zones do not matter
	}
	for _, tt := range tests {
		a := netip.MustParseAddr(tt.addr)
		err := c.Check(a)
		if (err == nil) != tt.allowed {
			t.Errorf("Check(%s) = %v, want allowed %v", tt.addr, err, tt.allowed)
			continue
		}
		if Classify(a) != tt.class {
			t.Errorf("Classify(%s) = %v, want %v", tt.addr, Classify(a), tt.class)
		}
		if err == nil {
			continue
		}
		if !errors.Is(err, ErrDenied) {
			t.Errorf("Check(%s) = %v, which does not wrap ErrDenied", tt.addr, err)
		}
		var d *DeniedError
		if !errors.As(err, &d) {
			t.Errorf("Check(%s) = %v, not a *DeniedError", tt.addr, err)
			continue
		}
		if d.Class != tt.class || d.HostOwn != tt.hostOwn {
			t.Errorf("Check(%s) = %+v, want class %v, host own %v", tt.addr, d, tt.class, tt.hostOwn)
		}
	}
}

// A Checker whose ranges cover everything (built by hand, since
// ParseCIDRs refuses such ranges) still refuses what is never allowed.
func TestCheckWideRanges(t *testing.T) {
	c := &Checker{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}}
	for _, s := range []string{
		"127.0.0.1", "::1", "0.0.0.0", "::", "0.0.0.7", "255.255.255.255", "224.0.0.251", "ff02::fb",
		"169.254.169.254", "169.254.170.2", "100.100.100.200", "168.63.129.16", "fd00:ec2::254", "fd20:ce::254",
		"::ffff:169.254.169.254", "64:ff9b::7f00:1", "2002:7f00:1::", "::7f00:1",
	} {
		if err := c.Check(netip.MustParseAddr(s)); err == nil {
			t.Errorf("Check(%s) allowed with 0.0.0.0/0 and ::/0 listed", s)
		}
	}
	for _, s := range []string{"10.0.0.1", "172.16.0.1", "192.168.0.1", "100.64.0.1", "169.254.1.1", "fe80::1", "fd12::1", "198.18.0.1", "2001:db8::1", "8.8.8.8"} {
		if err := c.Check(netip.MustParseAddr(s)); err != nil {
			t.Errorf("Check(%s) = %v with 0.0.0.0/0 and ::/0 listed", s, err)
		}
	}
}

func TestCheckZero(t *testing.T) {
	var c Checker
	if err := c.Check(netip.MustParseAddr("8.8.8.8")); err != nil {
		t.Errorf("zero Checker refused a public address: %v", err)
	}
	for _, s := range []string{"10.0.0.1", "127.0.0.1", "169.254.169.254", "192.0.2.1"} {
		if err := c.Check(netip.MustParseAddr(s)); err == nil {
			t.Errorf("zero Checker allowed %s", s)
		}
	}
	if err := c.Check(netip.Addr{}); !errors.Is(err, ErrDenied) {
		t.Errorf("Check(zero Addr) = %v, want ErrDenied", err)
	}
}

func TestCheckMessages(t *testing.T) {
	c := &Checker{HostAddrs: addrs("93.184.216.34")}
	tests := []struct{ addr, want string }{
		{"169.254.169.254", "169.254.169.254 is a cloud metadata address"},
		{"::ffff:169.254.169.254", "169.254.169.254 is a cloud metadata address"},
		{"127.0.0.1", "127.0.0.1 is a loopback address"},
		{"64:ff9b::a9fe:a9fe", "64:ff9b::a9fe:a9fe is a cloud metadata address (it carries 169.254.169.254 via NAT64)"},
		{"2001:0:4136:e378:8000:63bf:80ff:fffe", "2001:0:4136:e378:8000:63bf:80ff:fffe is a loopback address (it carries 127.0.0.1 via Teredo client)"},
		{"10.0.0.1", "10.0.0.1 is a private address; an operator must add a range covering it to the allowed ranges to reach it"},
		{"93.184.216.34", "93.184.216.34 is one of this host's own addresses"},
		{"64:ff9b::5db8:d822", "64:ff9b::5db8:d822 is one of this host's own addresses (it carries 93.184.216.34 via NAT64)"},
	}
	for _, tt := range tests {
		err := c.Check(netip.MustParseAddr(tt.addr))
		if err == nil || err.Error() != tt.want {
			t.Errorf("Check(%s) = %v, want %q", tt.addr, err, tt.want)
		}
	}
	if got := c.Check(netip.Addr{}).Error(); got != "not a valid address" {
		t.Errorf("Check(zero Addr) = %q", got)
	}
}

func TestParseCIDRs(t *testing.T) {
	got, err := ParseCIDRs([]string{
		"10.0.0.0/8", " 172.16.0.0/12 ", "192.168.1.0/24", "100.64.0.0/16", "169.254.1.0/24",
		"fd12:3456::/32", "fe80::/64", "10.0.0.5", "2001:db8::1", "::ffff:10.20.0.0/112", "192.0.2.0/24",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{}
	for _, s := range []string{
		"10.0.0.0/8", "172.16.0.0/12", "192.168.1.0/24", "100.64.0.0/16", "169.254.1.0/24",
		"fd12:3456::/32", "fe80::/64", "10.0.0.5/32", "2001:db8::1/128", "10.20.0.0/16", "192.0.2.0/24",
	} {
		want = append(want, netip.MustParsePrefix(s))
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("ParseCIDRs (-want +got):\n%s", diff)
	}
	if got, err := ParseCIDRs(nil); err != nil || len(got) != 0 {
		t.Errorf("ParseCIDRs(nil) = %v, %v", got, err)
	}
}

func TestParseCIDRsRefused(t *testing.T) {
	for _, s := range []string{
		"", "garbage", "10.0.0.0/33", "10.0.0.0/-1", "10.0.0.5/8", "fd12::1/16", "fe80::1%eth0", "fe80::/64%eth0",
		"0.0.0.0/0", "::/0", "127.0.0.0/8", "127.0.0.1", "127.0.0.1/32", "126.0.0.0/7", "::1", "::1/128",
		"169.254.0.0/16", "169.254.169.254/32", "169.254.170.0/24", "100.64.0.0/10", "100.100.0.0/16",
		"168.63.129.16", "192.0.0.0/24", "fd00::/8", "fd00:ec2::/32", "fd00:ec2::254", "fd20:ce::/32", "fc00::/7",
		"::ffff:127.0.0.1", "::ffff:0:0/96", "::ffff:169.254.0.0/112", "::ffff:0:0/95",
		"64:ff9b::/96", "64:ff9b::/64", "64:ff9b:1::/48", "2002::/16", "2002:a00::/24", "2001::/32", "2001::/16", "2000::/3",
		"::/96", "::/64", "::ffff:0:0:0/96",
	} {
		if got, err := ParseCIDRs([]string{"10.0.0.0/8", s}); err == nil {
			t.Errorf("ParseCIDRs(%q) = %v, want an error", s, got)
		} else if !errors.Is(err, ErrInvalidCIDR) {
			t.Errorf("ParseCIDRs(%q) error %v does not wrap ErrInvalidCIDR", s, err)
		}
	}
}
