package proxy

import (
	"errors"
	"net/http"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBasicCanonicalHost(t *testing.T) {
	cases := []struct {
		in, want string
		ip       bool
		err      bool
	}{
		{in: "Allowed.Test.", want: "allowed.test"},
		{in: "xn--bcher-kva.example", want: "xn--bcher-kva.example"},
		{in: "127.0.0.1", want: "127.0.0.1", ip: true},
		{in: "::FFFF:127.0.0.1", want: "::ffff:127.0.0.1", ip: true},
		{in: "2001:DB8::1", want: "2001:db8::1", ip: true},
		{in: "fe80::1%eth0", err: true},
		{in: "bücher.example", err: true},
		{in: "2130706433", err: true},
		{in: "127.1", err: true},
		{in: "0x7f.1", err: true},
		{in: "a..b", err: true},
		{in: "a b", err: true},
		{in: "", err: true},
		{in: ".", err: true},
	}
	for _, c := range cases {
		got, ip, err := basicCanonicalHost(c.in)
		if (err != nil) != c.err || got != c.want || ip.IsValid() != c.ip {
			t.Errorf("basicCanonicalHost(%q) = %q, %v, %v", c.in, got, ip, err)
		}
	}
}

func TestBasicCanonicalPath(t *testing.T) {
	ok := []string{"/", "/a/b", "/a.b/c..d", "/%41", "/a-b_c~d"}
	bad := []string{"a", "/a/../b", "/..", "/a/./b", "/a//b", `/a\b`, "/%2e%2e/x", "/%2E", "/a%2fb", "/a%2Fb", "/a%5cb", "/%252e"}
	for _, p := range ok {
		if got, err := basicCanonicalPath(p); err != nil || got != p {
			t.Errorf("basicCanonicalPath(%q) = %q, %v", p, got, err)
		}
	}
	for _, p := range bad {
		if _, err := basicCanonicalPath(p); err == nil {
			t.Errorf("basicCanonicalPath(%q) accepted an ambiguous path", p)
		}
	}
	if got, _ := basicCanonicalPath(""); got != "/" {
		t.Errorf("empty path became %q", got)
	}
}

func TestBasicCheckAddr(t *testing.T) {
	refused := []string{
		"127.0.0.1", "::1", "10.0.0.1", "172.16.0.1", "192.168.1.1", "169.254.169.254", "fe80::1",
		"100.64.0.1", "0.0.0.0", "::", "224.0.0.1", "ff02::1", "fd00::1", "::ffff:127.0.0.1",
		"::ffff:169.254.169.254", "240.0.0.1", "255.255.255.255", "192.0.0.170",
	}
	for _, a := range refused {
		if basicCheckAddr(netip.MustParseAddr(a)) == nil {
			t.Errorf("%s was allowed", a)
		}
	}
	for _, a := range []string{"203.0.113.10", "8.8.8.8", "2606:4700::1111"} {
		if err := basicCheckAddr(netip.MustParseAddr(a)); err != nil {
			t.Errorf("%s refused: %v", a, err)
		}
	}
	if basicCheckAddr(netip.Addr{}) == nil {
		t.Error("the zero Addr was allowed")
	}
}

func TestSplitAuthority(t *testing.T) {
	type result struct {
		Host     string
		Port     int
		Explicit bool
		Err      bool
	}
	cases := map[string]result{
		"a.test":          {"a.test", 80, false, false},
		"a.test:8080":     {"a.test", 8080, true, false},
		"a.test:":         {"a.test", 80, false, false},
		"[::1]":           {"::1", 80, false, false},
		"[::1]:443":       {"::1", 443, true, false},
		"::1":             {Err: true},
		"[a.test]":        {Err: true},
		"[::1":            {Err: true},
		"[::1]x":          {Err: true},
		"a.test:0":        {Host: "a.test", Err: true},
		"a.test:65536":    {Host: "a.test", Err: true},
		"a.test:+80":      {Host: "a.test", Err: true},
		"a.test:0x50":     {Host: "a.test", Err: true},
		"a.test:00000080": {Host: "a.test", Err: true},
		":80":             {Err: true},
	}
	for in, want := range cases {
		h, p, e, err := splitAuthority(in, 80)
		got := result{h, p, e, err != nil}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("splitAuthority(%q) (-want +got):\n%s", in, diff)
		}
	}
	if _, _, _, err := splitAuthority("a.test", 0); err == nil {
		t.Error("a required port was not required")
	}
}

func TestHostLines(t *testing.T) {
	hosts, ok := hostLines([]byte("GET http://a/ HTTP/1.1\r\nhOsT:  a.test \r\nX-Host: b\r\n\r\n"))
	if !ok || !cmp.Equal(hosts, []string{"a.test"}) {
		t.Errorf("got %q %v", hosts, ok)
	}
	if _, ok := hostLines([]byte("GET / HTTP/1.1\nHost: a\n  .evil\n\n")); ok {
		t.Error("a folded line was accepted")
	}
}

func TestRawPath(t *testing.T) {
	cases := []struct {
		uri      string
		absolute bool
		want     string
	}{
		{"/a%2e/b?x=/..", false, "/a%2e/b"},
		{"http://h.test/a\\b?q", true, "/a\\b"},
		{"http://h.test", true, ""},
		{"http://h.test?q=1", true, ""},
		{"http://u@h.test:80//x", true, "//x"},
	}
	for _, c := range cases {
		if got := rawPath(c.uri, c.absolute); got != c.want {
			t.Errorf("rawPath(%q) = %q, want %q", c.uri, got, c.want)
		}
	}
}

func TestStatusOf(t *testing.T) {
	cases := map[error]int{
		ErrBadRequest: 400, ErrHeaderTooLarge: 431, ErrMethodRefused: 405, ErrUnsupported: 501,
		ErrDenied: 403, ErrAddressRefused: 403, ErrNeedsInterception: 403, ErrTooManyTunnels: 429,
		ErrUnresolvable: 502, ErrUpstream: 502, errors.New("other"): 500,
	}
	for err, want := range cases {
		wrapped := &refusal{err: err, target: "h.test:80", reason: "r"}
		if got := statusOf(wrapped); got != want {
			t.Errorf("statusOf(%v) = %d, want %d", err, got, want)
		}
	}
	if http.StatusText(statusOf(ErrDenied)) != "Forbidden" {
		t.Error("unexpected status text")
	}
}
