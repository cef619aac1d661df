package dns

import "testing"

func TestCanonicalName(t *testing.T) {
	for _, tt := range []struct{ in, name, reason string }{
		{"Example.COM.", "example.com", ""},
		{"xn--bcher-kva.example.", "xn--bcher-kva.example", ""},
		{"_service.ok.test.", "_service.ok.test", ""},
		{"localhost.", "localhost", ""},
		{"a-b.c0.", "a-b.c0", ""},
		{".", "", reasonInvalidName},
		{"", "", reasonInvalidName},
		{"a..b.", "", reasonInvalidName},
		{`a\.b.example.`, "", reasonInvalidName},
		{`a\000.example.`, "", reasonInvalidName},
		{`caf\195\169.example.`, "", reasonInvalidName},
		{"a*b.example.", "", reasonInvalidName},
		{"*.ok.test.", "", reasonInvalidName},
		{"a/b.example.", "", reasonInvalidName},
		{"-a.example.", "", reasonInvalidName},
		{"a-.example.", "", reasonInvalidName},
		{"r3---sn-abc.example.", "r3---sn-abc.example", ""},
		{"10.0.0.1.", "", reasonIPLiteral},
		{"10.1.", "", reasonIPLiteral},
		{"4294967295.", "", reasonIPLiteral},
		{"fe80::1.", "", reasonIPLiteral},
		{"::ffff:127.0.0.1.", "", reasonIPLiteral},
		{"0x7f.1.", "", reasonIPLiteral},
		{"0177.0.0.1.", "", reasonIPLiteral},
		{"foo.123.", "", reasonIPLiteral},
		{"1.2.3.4.example.", "1.2.3.4.example", ""}, // a name like any other: the policy decides
	} {
		name, reason := canonicalName(tt.in)
		if name != tt.name || reason != tt.reason {
			t.Errorf("canonicalName(%q) = %q, %q; want %q, %q", tt.in, name, reason, tt.name, tt.reason)
		}
	}
}
