package addr

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// describe renders CanonicalHost's answer for comparison: "name x",
// "ip x" or "error".
func describe(h Host, err error) string {
	switch {
	case err != nil:
		return "error"
	case h.IsIP() && h.Name != "":
		return "both " + h.Name + " " + h.IP.String()
	case h.IsIP():
		return "ip " + h.IP.String()
	default:
		return "name " + h.Name
	}
}

func TestCanonicalHostNames(t *testing.T) {
	tests := []struct{ in, want string }{
		{"example.com", "example.com"},
		{"EXAMPLE.com.", "example.com"},
		{"Example.COM", "example.com"},
		{"localhost", "localhost"},
		{"localhost.", "localhost"}, // a name: the proxy resolves it, and 127.0.0.1 is then denied
		{"LOCALHOST", "localhost"},
		{"a", "a"},
		{"a-b.c-d.example", "a-b.c-d.example"},
		{"123.example", "123.example"},
		{"1.2.3.com", "1.2.3.com"},
		{"0x7f.example", "0x7f.example"},
		{"1e100.net", "1e100.net"},
		{"deadbeef", "deadbeef"},                                       // hex without 0x is not a number to any IPv4 parser
		{"cafe.bad", "cafe.bad"},                                       // nor are hex letters
		{"1.2.3.0x1g", "1.2.3.0x1g"},                                   // "0x1g" is not a number, so this is a name
		{"1.2.3.4a", "1.2.3.4a"},                                       // nor is "4a"
		{"0deadbeef", "0deadbeef"},                                     // octal prefix, not octal digits
		{"r3---sn-abc.googlevideo.com", "r3---sn-abc.googlevideo.com"}, // "--" in third and fourth place
		{"ab--cd.example", "ab--cd.example"},
		{"_dmarc.example.com", "_dmarc.example.com"}, // underscores are accepted in ASCII labels
		{"my_host.example", "my_host.example"},
		{"_", "_"},
		// Internationalised names become A-labels.
		{"bücher.example", "xn--bcher-kva.example"},
		{"BÜCHER.example.", "xn--bcher-kva.example"},
		{"xn--bcher-kva.example", "xn--bcher-kva.example"},
		{"XN--BCHER-KVA.EXAMPLE", "xn--bcher-kva.example"},
		{"ß.de", "xn--zca.de"},               // non-transitional
		{"例え.テスト", "xn--r8jz45g.xn--zckzah"}, // Japanese
		{"example。com", "example.com"},       // ideographic full stop is a dot
		{"example．com", "example.com"},       // full-width full stop
		{"ＥＸＡＭＰＬＥ.com", "example.com"},       // full-width letters map to ASCII
		{"exa\u00admple.com", "example.com"}, // a soft hyphen is ignored by IDNA
		{"Ⅻ.com", "xii.com"},
		{strings.Repeat("a", 63) + ".example", strings.Repeat("a", 63) + ".example"},
		{longName(253), longName(253)},
		{longName(253) + ".", longName(253)},
	}
	for _, tt := range tests {
		h, err := CanonicalHost(tt.in)
		if got := describe(h, err); got != "name "+tt.want {
			t.Errorf("CanonicalHost(%q) = %s (%v), want name %s", tt.in, got, err, tt.want)
		}
	}
}

// longName is a name of exactly n bytes: labels of 63 bytes and a
// shorter last one.
func longName(n int) string {
	var b strings.Builder
	for b.Len()+64 < n {
		b.WriteString(strings.Repeat("a", 63) + ".")
	}
	b.WriteString(strings.Repeat("b", n-b.Len()))
	return b.String()
}

func TestCanonicalHostIPs(t *testing.T) {
	tests := []struct{ in, want string }{
		// Dotted decimal and inet_aton's other spellings of 127.0.0.1.
		{"127.0.0.1", "127.0.0.1"},
		{"127.0.0.1.", "127.0.0.1"},
		{"2130706433", "127.0.0.1"},
		{"0x7f000001", "127.0.0.1"},
		{"0X7F000001", "127.0.0.1"},
		{"0x7f.0.0.1", "127.0.0.1"},
		{"0x7f.1", "127.0.0.1"},
		{"0x7F.0x0.0x0.0x1", "127.0.0.1"},
		{"0177.0.0.1", "127.0.0.1"},
		{"0177.1", "127.0.0.1"},
		{"017700000001", "127.0.0.1"},
		{"0000000000000000000000000177.1", "127.0.0.1"},
		{"0x00000000000000007f000001", "127.0.0.1"},
		{"127.000.000.001", "127.0.0.1"},
		{"127.1", "127.0.0.1"},
		{"127.0.1", "127.0.0.1"},
		{"127.0.0x1", "127.0.0.1"},
		{"0177.0x0.1", "127.0.0.1"}, // mixed octal, hex and decimal
		{"10.1", "10.0.0.1"},
		{"10.65536", "10.1.0.0"},
		{"1.16777215", "1.255.255.255"},
		{"1.2.65535", "1.2.255.255"},
		{"0", "0.0.0.0"},
		{"00", "0.0.0.0"},
		{"0x", "0.0.0.0"}, // WHATWG and BSD read "0x" as 0
		{"0x.0x.0x.0x", "0.0.0.0"},
		{"4294967295", "255.255.255.255"},
		{"0xffffffff", "255.255.255.255"},
		{"037777777777", "255.255.255.255"},
		{"169.254.169.254", "169.254.169.254"},
		{"0xa9fea9fe", "169.254.169.254"},
		{"0251.0376.0251.0376", "169.254.169.254"},
		{"2852039166", "169.254.169.254"},
		{"８.８.８.８", "8.8.8.8"}, // full-width digits map to ASCII, then parse
		{"１２７.０.０.１", "127.0.0.1"},
		{"127。0。0。1", "127.0.0.1"},
		{"０ｘ７ｆ.１", "127.0.0.1"},
		// IPv6, with and without brackets.
		{"::1", "::1"},
		{"[::1]", "::1"},
		{"[0:0:0:0:0:0:0:1]", "::1"},
		{"[::]", "::"},
		{"[2001:DB8::1]", "2001:db8::1"},
		{"2001:0db8:0000:0000:0000:0000:0000:0001", "2001:db8::1"},
		{"[fe80::1]", "fe80::1"},
		// IPv4-mapped comes out as IPv4; other embeddings stay IPv6
		// (Classify looks inside them).
		{"[::ffff:127.0.0.1]", "127.0.0.1"},
		{"[::ffff:7f00:1]", "127.0.0.1"},
		{"::FFFF:7F00:1", "127.0.0.1"},
		{"::ffff:169.254.169.254", "169.254.169.254"},
		{"[::7f00:1]", "::7f00:1"},
		{"::127.0.0.1", "::7f00:1"},
		{"64:ff9b::a9fe:a9fe", "64:ff9b::a9fe:a9fe"},
		{"[64:ff9b::169.254.169.254]", "64:ff9b::a9fe:a9fe"},
		{"2002:a9fe:a9fe::", "2002:a9fe:a9fe::"},
		{"[2001:0:4136:e378:8000:63bf:80ff:fffe]", "2001:0:4136:e378:8000:63bf:80ff:fffe"},
	}
	for _, tt := range tests {
		h, err := CanonicalHost(tt.in)
		if got := describe(h, err); got != "ip "+tt.want {
			t.Errorf("CanonicalHost(%q) = %s (%v), want ip %s", tt.in, got, err, tt.want)
		}
	}
}

func TestCanonicalHostRefused(t *testing.T) {
	tests := []struct{ name, in string }{
		{"empty", ""},
		{"root only", "."},
		{"space", "exa mple.com"},
		{"leading space", " example.com"},
		{"trailing space", "example.com "},
		{"tab", "example.com\t"},
		{"newline", "example.com\n"},
		{"CR LF injection", "example.com\r\nX-Evil: 1"},
		{"NUL", "127.0.0.1\x00.example.com"},
		{"DEL", "example.com\x7f"},
		{"C1 control", "example\u0085.com"},
		{"no-break space", "exa\u00a0mple.com"},
		{"ideographic space", "exa\u3000mple.com"},
		{"line separator", "example\u2028.com"},
		{"invalid UTF-8", "exa\xffmple.com"},
		{"percent-encoding", "exa%6dple.com"},
		{"percent-encoded dot", "127%2e0.0.1"},
		{"userinfo", "user@example.com"},
		{"userinfo with password", "user:pass@example.com"},
		{"slash", "example.com/"},
		{"backslash", "example.com\\evil.com"},
		{"query", "example.com?x"},
		{"fragment", "example.com#x"},
		{"asterisk", "*.example.com"},
		{"comma", "a,b.example"},
		{"quote", "\"example.com\""},
		{"too long", strings.Repeat("a", 256)},
		{"too long with dots", strings.Repeat("a.", 128)},
		{"name too long", longName(254)},
		{"label too long", strings.Repeat("a", 64) + ".example"},
		{"empty label", "a..b"},
		{"leading dot", ".example.com"},
		{"two trailing dots", "example.com.."},
		{"label starts with hyphen", "-a.example"},
		{"label ends with hyphen", "a-.example"},
		{"bad A-label", "xn--a.example"},
		{"A-label of ASCII", "xn--abc-.example"},
		{"bidi override", "ab\u202e.com"},
		{"zero-width joiner", "a\u200db.com"},
		{"maps to disallowed", "⒈.com"},
		{"underscore in IDN", "_dmarc.bücher.example"},
		{"full-width at sign", "user＠example.com"},
		{"full-width colon", "example.com：80"},
		// IPv4 attempts that fail.
		{"five parts", "1.2.3.4.5"},
		{"octet too big", "256.0.0.1"},
		{"last part too big", "1.2.3.256"},
		{"short form too big", "1.16777216"},
		{"number too big", "4294967296"},
		{"hex too big", "0x100000000"},
		{"octal 8", "08.0.0.1"},
		{"octal 9", "0179.0.0.1"},
		{"numeric TLD", "foo.123"},
		{"hex TLD", "foo.0x1f"},
		{"empty hex TLD", "foo.0x"},
		{"empty part", "127..1"},
		{"leading dot number", ".127.0.0.1"},
		{"two trailing dots number", "127.0.0.1.."},
		{"huge number", "99999999999999999999999999999999"},
		// IPv6 trouble.
		{"port", "[::1]:80"},
		{"unclosed", "[::1"},
		{"unopened", "::1]"},
		{"double brackets", "[[::1]]"},
		{"IPv4 in brackets", "[127.0.0.1]"},
		{"name in brackets", "[example.com]"},
		{"empty brackets", "[]"},
		{"bracket in name", "exa]mple.com"},
		{"IPvFuture", "[v1.fe]"},
		{"zone", "fe80::1%eth0"},
		{"zone in brackets", "[fe80::1%25eth0]"},
		{"host:port", "example.com:80"},
		{"IPv4:port", "127.0.0.1:80"},
		{"bad IPv6", "1:2:3:4:5:6:7:8:9"},
		{"IPv6 short IPv4 tail", "::ffff:127.1"},
		{"IPv6 hex IPv4 tail", "::ffff:0x7f.0.0.1"},
		{"IPv6 trailing dot", "::1."},
		{"one colon", ":"},
	}
	for _, tt := range tests {
		h, err := CanonicalHost(tt.in)
		if err == nil {
			t.Errorf("%s: CanonicalHost(%q) = %s, want an error", tt.name, tt.in, describe(h, err))
			continue
		}
		if !errors.Is(err, ErrInvalidHost) {
			t.Errorf("%s: CanonicalHost(%q) error %v does not wrap ErrInvalidHost", tt.name, tt.in, err)
		}
		if h != (Host{}) {
			t.Errorf("%s: CanonicalHost(%q) returned %+v with its error", tt.name, tt.in, h)
		}
	}
}

// The error says what is wrong, and never echoes more than the input.
func TestCanonicalHostErrorWords(t *testing.T) {
	tests := []struct{ in, words string }{
		{"exa mple.com", "whitespace"},
		{"user@example.com", "user information"},
		{"exa%6dple.com", "percent-encoding"},
		{"fe80::1%eth0", "zone"},
		{strings.Repeat("a", 300), "300 bytes, more than 255"},
		{"foo.123", "ends in a number"},
		{"example.com:80", "SplitHostPort"},
	}
	for _, tt := range tests {
		_, err := CanonicalHost(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.words) {
			t.Errorf("CanonicalHost(%q) error = %v, want it to mention %q", tt.in, err, tt.words)
		}
	}
}

func TestHostString(t *testing.T) {
	tests := []struct {
		h       Host
		str, hp string
	}{
		{Host{Name: "example.com"}, "example.com", "example.com:443"},
		{Host{IP: netip.MustParseAddr("127.0.0.1")}, "127.0.0.1", "127.0.0.1:443"},
		{Host{IP: netip.MustParseAddr("2001:db8::1")}, "2001:db8::1", "[2001:db8::1]:443"},
		{Host{}, "", ":443"},
	}
	for _, tt := range tests {
		if got := tt.h.String(); got != tt.str {
			t.Errorf("%+v.String() = %q, want %q", tt.h, got, tt.str)
		}
		if got := tt.h.HostPort(443); got != tt.hp {
			t.Errorf("%+v.HostPort(443) = %q, want %q", tt.h, got, tt.hp)
		}
	}
}

func TestSplitHostPort(t *testing.T) {
	tests := []struct {
		in          string
		defaultPort int
		host        string // describe() form, or "error"
		port        int
	}{
		{"example.com:443", 0, "name example.com", 443},
		{"EXAMPLE.COM.:443", 0, "name example.com", 443},
		{"example.com", 80, "name example.com", 80},
		{"example.com:", 80, "name example.com", 80}, // empty port is the default (RFC 3986)
		{"example.com:8080", 80, "name example.com", 8080},
		{"example.com:1", 0, "name example.com", 1},
		{"example.com:65535", 0, "name example.com", 65535},
		{"example.com:080", 0, "name example.com", 80},
		{"bücher.example:443", 0, "name xn--bcher-kva.example", 443},
		{"[::1]:8080", 0, "ip ::1", 8080},
		{"[::1]", 443, "ip ::1", 443},
		{"[::1]:", 443, "ip ::1", 443},
		{"[::ffff:127.0.0.1]:80", 0, "ip 127.0.0.1", 80},
		{"[2001:DB8::1]:443", 0, "ip 2001:db8::1", 443},
		{"0x7f.1:80", 0, "ip 127.0.0.1", 80},
		{"2130706433:80", 0, "ip 127.0.0.1", 80},
		{"127.0.0.1:80", 0, "ip 127.0.0.1", 80},
		{"localhost.:3000", 0, "name localhost", 3000},

		{"example.com", 0, "error", 0},  // port required
		{"example.com:", 0, "error", 0}, // port required
		{"[::1]", 0, "error", 0},
		{"example.com:0", 0, "error", 0},
		{"example.com:65536", 0, "error", 0},
		{"example.com:99999", 0, "error", 0},
		{"example.com:000080", 0, "error", 0},
		{"example.com:+80", 0, "error", 0},
		{"example.com:-80", 0, "error", 0},
		{"example.com: 80", 0, "error", 0},
		{"example.com:80 ", 0, "error", 0},
		{"example.com:0x50", 0, "error", 0},
		{"example.com:http", 0, "error", 0},
		{"example.com:80:90", 0, "error", 0},
		{"::1", 443, "error", 0},  // IPv6 needs brackets here
		{"::1:80", 0, "error", 0}, // ambiguous without them
		{"[::1]80", 0, "error", 0},
		{"[::1]x:80", 0, "error", 0},
		{"[::1", 443, "error", 0},
		{"[::1]:80]", 0, "error", 0},
		{"[127.0.0.1]:80", 0, "error", 0},
		{":80", 0, "error", 0},
		{"", 80, "error", 0},
		{"user@example.com:80", 0, "error", 0},
		{"exa mple.com:80", 0, "error", 0},
		{"[fe80::1%25eth0]:80", 0, "error", 0},
		{strings.Repeat("a", 256) + ":80", 0, "error", 0},
		{strings.Repeat("a", 300), 80, "error", 0},
		{"example.com", -1, "error", 0},
		{"example.com", 65536, "error", 0},
	}
	for _, tt := range tests {
		h, port, err := SplitHostPort(tt.in, tt.defaultPort)
		got := describe(h, err)
		if got != tt.host || port != tt.port {
			t.Errorf("SplitHostPort(%q, %d) = %s, %d (%v), want %s, %d", tt.in, tt.defaultPort, got, port, err, tt.host, tt.port)
		}
		if err != nil && !errors.Is(err, ErrInvalidHost) && !errors.Is(err, ErrInvalidPort) {
			t.Errorf("SplitHostPort(%q, %d) error %v wraps neither ErrInvalidHost nor ErrInvalidPort", tt.in, tt.defaultPort, err)
		}
	}
}

// Every name is a fixed point, and so is every address's text.
func TestCanonicalHostIdempotent(t *testing.T) {
	for _, in := range []string{"EXAMPLE.com.", "bücher.example", "0x7f.1", "[::ffff:7f00:1]", "64:ff9b::169.254.169.254", "ß.de", "１２７.０.０.１"} {
		h, err := CanonicalHost(in)
		if err != nil {
			t.Fatalf("CanonicalHost(%q): %v", in, err)
		}
		again, err := CanonicalHost(h.String())
		if err != nil || again != h {
			t.Errorf("CanonicalHost(%q) = %+v, but CanonicalHost(%q) = %+v, %v", in, h, h.String(), again, err)
		}
	}
}
