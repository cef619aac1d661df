package dns

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	miekg "github.com/miekg/dns"

	"paddock.dev/paddock/egress"
)

// FuzzHandle feeds the query handler raw messages. Whatever comes in, it
// must not panic, must answer every message that has a header and is not
// a response, with a response that parses and carries the query's ID, and
// must never look up, let alone answer, a name the policy denies (the
// fake upstream reports any such lookup). The checked-in corpus in
// testdata/fuzz/FuzzHandle runs with every go test.
func FuzzHandle(f *testing.F) {
	for _, m := range []*miekg.Msg{
		query("allowed.test.", miekg.TypeA),
		query("www.ok.test.", miekg.TypeAAAA),
		query("denied.example.", miekg.TypeA),
		query("allowed.test.", miekg.TypeTXT),
	} {
		f.Add(pack(f, m))
	}
	up := &fakeResolver{addrs: []netip.Addr{
		netip.MustParseAddr("192.0.2.1"),
		netip.MustParseAddr("127.0.0.1"),
		netip.MustParseAddr("2001:db8::1"),
		netip.MustParseAddr("::ffff:192.0.2.2"),
	}}
	s := New(Config{
		Sandbox:       "sbx-fuzz",
		Policy:        testPolicy{},
		Upstream:      up,
		Check:         refuseInternal,
		Record:        func(egress.Event) {},
		RatePerSecond: 1 << 30,
	})
	f.Cleanup(func() { s.Close() })

	f.Fuzz(func(t *testing.T, msg []byte) {
		out := s.handle(context.Background(), msg)
		if v := up.violations(); len(v) != 0 {
			t.Fatalf("upstream asked about denied names %q", v)
		}
		if out == nil {
			if len(msg) >= headerLen && msg[2]&0x80 == 0 {
				t.Fatal("no response to a query")
			}
			return
		}
		resp := new(miekg.Msg)
		if err := resp.Unpack(out); err != nil {
			t.Fatalf("response does not parse: %v\n% x", err, out)
		}
		if resp.Id != uint16(msg[0])<<8|uint16(msg[1]) || !resp.Response {
			t.Fatalf("response %v does not answer query % x", resp, msg)
		}
		if len(resp.Answer) == 0 {
			return
		}
		if resp.Rcode != miekg.RcodeSuccess || len(resp.Question) != 1 {
			t.Fatalf("records in %v", resp)
		}
		q := resp.Question[0]
		host, reason := canonicalName(q.Name)
		if reason != "" || !(testPolicy{}).AllowsName(host) {
			t.Fatalf("answered %q, which the policy denies", q.Name)
		}
		for _, rr := range resp.Answer {
			if rr.Header().Rrtype != q.Qtype || !strings.EqualFold(rr.Header().Name, q.Name) {
				t.Fatalf("answer %v to question %v", rr, q)
			}
			var a netip.Addr
			switch rr := rr.(type) {
			case *miekg.A:
				a, _ = netip.AddrFromSlice(rr.A.To4())
			case *miekg.AAAA:
				a, _ = netip.AddrFromSlice(rr.AAAA)
			}
			if refuseInternal(a) != nil {
				t.Fatalf("answered refused address %v", a)
			}
		}
	})
}
