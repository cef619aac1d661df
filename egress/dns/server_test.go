package dns

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	miekg "github.com/miekg/dns"

	"paddock.dev/paddock/egress"
)

func TestAllowedAnswers(t *testing.T) {
	h := newHarness(t, nil)
	tests := []struct {
		name     string
		qtype    uint16
		want     result
		upstream []string // the queries the upstream must have seen
	}{{
		name:     "allowed.test.",
		qtype:    miekg.TypeA,
		want:     result{Rcode: "NOERROR", Answer: []string{"allowed.test. 60 IN A 93.184.216.34"}},
		upstream: []string{"allowed.test. A"},
	}, {
		name:     "allowed.test.",
		qtype:    miekg.TypeAAAA,
		want:     result{Rcode: "NOERROR", Answer: []string{"allowed.test. 60 IN AAAA 2606:2800:220:1:248:1893:25c8:1946"}},
		upstream: []string{"allowed.test. AAAA"},
	}, {
		name:  "www.ok.test.",
		qtype: miekg.TypeA,
		want: result{Rcode: "NOERROR", Answer: []string{
			"www.ok.test. 60 IN A 203.0.113.10",
			"www.ok.test. 60 IN A 203.0.113.11",
		}},
		upstream: []string{"www.ok.test. A"},
	}, {
		// The asked case is kept (0x20 randomisation); the policy and
		// the upstream see the canonical name.
		name:     "WwW.oK.TeSt.",
		qtype:    miekg.TypeAAAA,
		want:     result{Rcode: "NOERROR", Answer: []string{"WwW.oK.TeSt. 60 IN AAAA 2001:db8::10"}},
		upstream: []string{"www.ok.test. AAAA"},
	}, {
		// CNAME chains are flattened: the address under the asked name,
		// the target (not allowed) never shown.
		name:     "alias.ok.test.",
		qtype:    miekg.TypeA,
		want:     result{Rcode: "NOERROR", Answer: []string{"alias.ok.test. 60 IN A 198.51.100.20"}},
		upstream: []string{"alias.ok.test. A"},
	}, {
		name:     "v4only.ok.test.",
		qtype:    miekg.TypeAAAA,
		want:     result{Rcode: "NOERROR"}, // NODATA
		upstream: []string{"v4only.ok.test. AAAA"},
	}, {
		// Allowed but missing upstream: NODATA, not NXDOMAIN (see lookup).
		name:     "missing.ok.test.",
		qtype:    miekg.TypeA,
		want:     result{Rcode: "NOERROR"},
		upstream: []string{"missing.ok.test. A"},
	}, {
		name:  "broken.ok.test.",
		qtype: miekg.TypeA,
		want:  result{Rcode: "SERVFAIL"},
	}}
	for _, tt := range tests {
		t.Run(tt.name+"/"+miekg.TypeToString[tt.qtype], func(t *testing.T) {
			before := len(h.up.seen())
			req := query(tt.name, tt.qtype)
			resp := h.exchange(t, req)
			checkMirrors(t, req, resp)
			if diff := cmp.Diff(tt.want, summarise(resp)); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
			if strings.Contains(resp.String(), "hidden") {
				t.Errorf("response shows a CNAME target:\n%s", resp)
			}
			if tt.upstream != nil {
				if diff := cmp.Diff(tt.upstream, h.up.seen()[before:]); diff != "" {
					t.Errorf("upstream queries (-want +got):\n%s", diff)
				}
			}
		})
	}
	if evs := h.events.take(); len(evs) != 0 {
		t.Errorf("answers were recorded: %v", evs)
	}
}

func TestDeniedNamesNotForwarded(t *testing.T) {
	h := newHarness(t, nil)
	names := []string{
		"denied.example.", // in the upstream's zone, all the same
		"ok.test.",        // the wildcard's apex is not allowed
		"xallowed.test.",  // suffix without a dot
		"allowed.test.evil.example.",
		"sub.allowed.test.", // only allowed.test itself is allowed
		"www.ok.test.attacker.example.",
		"localhost.",
	}
	var want []egress.Event
	for _, name := range names {
		for _, qtype := range []uint16{miekg.TypeA, miekg.TypeAAAA} {
			req := query(name, qtype)
			resp := h.exchange(t, req)
			checkMirrors(t, req, resp)
			if diff := cmp.Diff(result{Rcode: "NXDOMAIN"}, summarise(resp)); diff != "" {
				t.Errorf("%s %s (-want +got):\n%s", name, miekg.TypeToString[qtype], diff)
			}
			want = append(want, egress.Event{Sandbox: "sbx-test", Kind: "dns.deny", Host: strings.TrimSuffix(name, "."), Reason: reasonNotAllowed})
		}
	}
	if got := h.up.seen(); len(got) != 0 {
		t.Errorf("denied names reached the upstream: %q", got)
	}
	if diff := cmp.Diff(want, h.events.take()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestExfiltrationNotForwarded(t *testing.T) {
	h := newHarness(t, nil)
	c := h.dial(t) // one connection, as a tool tunnelling data would use
	label := func(n int) string {
		b := make([]byte, n/2)
		rand.Read(b)
		return hex.EncodeToString(b)
	}
	var sent int
	for i := range 20 {
		// Up to three 62-byte labels of "data" under a denied domain,
		// and under an allowed name that does not allow subdomains.
		parts := []string{label(62)}
		for range i % 3 {
			parts = append(parts, label(62))
		}
		parent := "secret-data.attacker.example."
		if i%2 == 1 {
			parent = "allowed.test."
		}
		name := strings.Join(parts, ".") + "." + parent
		for _, qtype := range []uint16{miekg.TypeA, miekg.TypeAAAA, miekg.TypeTXT, miekg.TypeNULL, miekg.TypeCNAME, miekg.TypeMX} {
			resp := exchangeOn(t, c, query(name, qtype))
			if resp.Rcode != miekg.RcodeNameError && resp.Rcode != miekg.RcodeRefused {
				t.Errorf("%s %s: %s, want NXDOMAIN or REFUSED", name, miekg.TypeToString[qtype], miekg.RcodeToString[resp.Rcode])
			}
			if len(resp.Answer)+len(resp.Ns) != 0 {
				t.Errorf("%s: records in a denial: %v", name, resp)
			}
			sent++
		}
	}
	if got := h.up.seen(); len(got) != 0 {
		t.Errorf("exfiltration queries reached the upstream: %q", got)
	}
	evs := h.events.take()
	if len(evs) != sent {
		t.Errorf("%d events for %d denied queries", len(evs), sent)
	}
	for _, ev := range evs {
		if ev.Kind != "dns.deny" || ev.Host == "" || ev.Reason == "" {
			t.Errorf("event %+v: want a dns.deny with host and reason", ev)
		}
	}
}

func TestOtherTypesRefused(t *testing.T) {
	h := newHarness(t, nil)
	types := []uint16{
		miekg.TypeTXT, miekg.TypeANY, miekg.TypeMX, miekg.TypeNULL, miekg.TypeAXFR,
		miekg.TypeIXFR, miekg.TypeSRV, miekg.TypePTR, miekg.TypeCNAME, miekg.TypeNS,
		miekg.TypeSOA, miekg.TypeHTTPS, miekg.TypeSVCB, miekg.TypeCAA, 65280,
	}
	var want []egress.Event
	for _, qtype := range types {
		for _, name := range []string{"allowed.test.", "denied.example."} {
			req := query(name, qtype)
			resp := h.exchange(t, req)
			checkMirrors(t, req, resp)
			if diff := cmp.Diff(result{Rcode: "REFUSED"}, summarise(resp)); diff != "" {
				t.Errorf("%s %s (-want +got):\n%s", name, typeString(qtype), diff)
			}
			want = append(want, egress.Event{
				Sandbox: "sbx-test", Kind: "dns.deny", Host: strings.TrimSuffix(name, "."),
				Reason: "query type " + typeString(qtype) + " not answered",
			})
		}
	}
	if got := h.up.seen(); len(got) != 0 {
		t.Errorf("refused types reached the upstream: %q", got)
	}
	if diff := cmp.Diff(want, h.events.take()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestCheckWithholdsAddresses(t *testing.T) {
	h := newHarness(t, nil)
	tests := []struct {
		name   string
		qtype  uint16
		want   result
		reason string // of the one dns.deny event
	}{{
		name:   "loop.ok.test.",
		qtype:  miekg.TypeA,
		want:   result{Rcode: "NOERROR"},
		reason: "address refused: 127.0.0.1: loopback",
	}, {
		name:   "loop.ok.test.",
		qtype:  miekg.TypeAAAA,
		want:   result{Rcode: "NOERROR"},
		reason: "address refused: ::1: loopback",
	}, {
		name:   "meta.ok.test.",
		qtype:  miekg.TypeA,
		want:   result{Rcode: "NOERROR"},
		reason: "address refused: 169.254.169.254: link-local",
	}, {
		name:   "mixed.ok.test.",
		qtype:  miekg.TypeA,
		want:   result{Rcode: "NOERROR", Answer: []string{"mixed.ok.test. 60 IN A 198.51.100.7"}},
		reason: "address refused: 127.0.0.1: loopback; 10.0.0.1: private",
	}, {
		// Behind a CNAME: still checked, and the target still not shown.
		name:   "intranet.ok.test.",
		qtype:  miekg.TypeA,
		want:   result{Rcode: "NOERROR"},
		reason: "address refused: 10.1.2.3: private",
	}}
	for _, tt := range tests {
		t.Run(tt.name+"/"+miekg.TypeToString[tt.qtype], func(t *testing.T) {
			req := query(tt.name, tt.qtype)
			resp := h.exchange(t, req)
			checkMirrors(t, req, resp)
			if diff := cmp.Diff(tt.want, summarise(resp)); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
			want := []egress.Event{{Sandbox: "sbx-test", Kind: "dns.deny", Host: strings.TrimSuffix(tt.name, "."), Reason: tt.reason}}
			if diff := cmp.Diff(want, h.events.take()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNoCheckAnswersEverything(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Check = nil })
	resp := h.exchange(t, query("loop.ok.test.", miekg.TypeA))
	if diff := cmp.Diff(result{Rcode: "NOERROR", Answer: []string{"loop.ok.test. 60 IN A 127.0.0.1"}}, summarise(resp)); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
}

func TestQueryChecks(t *testing.T) {
	h := newHarness(t, nil)
	withOpt := func(m *miekg.Msg, version uint8, do bool, opts ...miekg.EDNS0) *miekg.Msg {
		m.SetEdns0(4096, do)
		o := m.IsEdns0()
		o.SetVersion(version)
		o.Option = opts
		return m
	}
	tests := []struct {
		desc  string
		req   *miekg.Msg
		rcode int
		// reason of the one dns.deny event; "" for none
		reason string
	}{
		{"ip literal v4", query("127.0.0.1.", miekg.TypeA), miekg.RcodeNameError, reasonIPLiteral},
		{"ip literal metadata", query("169.254.169.254.", miekg.TypeA), miekg.RcodeNameError, reasonIPLiteral},
		{"ip literal v6", query("::1.", miekg.TypeAAAA), miekg.RcodeNameError, reasonIPLiteral},
		{"ip literal shorthand", query("127.1.", miekg.TypeA), miekg.RcodeNameError, reasonIPLiteral},
		{"ip literal decimal", query("2130706433.", miekg.TypeA), miekg.RcodeNameError, reasonIPLiteral},
		{"escaped byte", query(`a\000b.ok.test.`, miekg.TypeA), miekg.RcodeNameError, reasonInvalidName},
		{"escaped dot", query(`a\.b.ok.test.`, miekg.TypeA), miekg.RcodeNameError, reasonInvalidName},
		{"space", query(`a\032b.ok.test.`, miekg.TypeA), miekg.RcodeNameError, reasonInvalidName},
		{"root", query(".", miekg.TypeA), miekg.RcodeNameError, reasonInvalidName},
		{"class CH", func() *miekg.Msg {
			m := query("version.bind.", miekg.TypeTXT)
			m.Question[0].Qclass = miekg.ClassCHAOS
			return m
		}(), miekg.RcodeRefused, "class CH not answered"},
		{"class ANY", func() *miekg.Msg {
			m := query("allowed.test.", miekg.TypeA)
			m.Question[0].Qclass = miekg.ClassANY
			return m
		}(), miekg.RcodeRefused, "class ANY not answered"},
		{"opcode NOTIFY", func() *miekg.Msg {
			m := query("allowed.test.", miekg.TypeSOA)
			m.Opcode = miekg.OpcodeNotify
			return m
		}(), miekg.RcodeNotImplemented, "opcode NOTIFY not implemented"},
		{"opcode UPDATE", func() *miekg.Msg {
			m := query("ok.test.", miekg.TypeSOA)
			m.Opcode = miekg.OpcodeUpdate
			m.Ns = []miekg.RR{&miekg.A{Hdr: miekg.RR_Header{Name: "x.ok.test.", Rrtype: miekg.TypeA, Class: miekg.ClassINET}, A: net.IPv4(1, 2, 3, 4)}}
			return m
		}(), miekg.RcodeNotImplemented, "opcode UPDATE not implemented"},
		{"edns version 1", withOpt(query("allowed.test.", miekg.TypeA), 1, false), miekg.RcodeBadVers, "edns version 1 not supported"},
		{"edns with options", withOpt(query("allowed.test.", miekg.TypeA), 0, true,
			&miekg.EDNS0_NSID{Code: miekg.EDNS0NSID},
			&miekg.EDNS0_COOKIE{Code: miekg.EDNS0COOKIE, Cookie: "0123456789abcdef"},
			&miekg.EDNS0_PADDING{Padding: make([]byte, 40)},
			&miekg.EDNS0_LOCAL{Code: 65001, Data: []byte("secret")},
		), miekg.RcodeSuccess, ""},
		{"rd clear, cd set", func() *miekg.Msg {
			m := query("allowed.test.", miekg.TypeA)
			m.RecursionDesired, m.CheckingDisabled = false, true
			return m
		}(), miekg.RcodeSuccess, ""},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			before := len(h.up.seen())
			resp := h.exchange(t, tt.req)
			checkMirrors(t, tt.req, resp)
			if resp.Rcode != tt.rcode {
				t.Errorf("rcode %s, want %s", miekg.RcodeToString[resp.Rcode], miekg.RcodeToString[tt.rcode])
			}
			if tt.rcode != miekg.RcodeSuccess {
				if got := h.up.seen()[before:]; len(got) != 0 {
					t.Errorf("upstream was asked %q", got)
				}
				if len(resp.Answer) != 0 {
					t.Errorf("answers in a denial: %v", resp.Answer)
				}
			}
			reqOpt, respOpt := tt.req.IsEdns0(), resp.IsEdns0()
			switch {
			case reqOpt == nil && respOpt != nil:
				t.Errorf("OPT in the response to a query without one: %v", respOpt)
			case reqOpt != nil && respOpt == nil:
				t.Errorf("no OPT in the response to a query with one")
			case respOpt != nil:
				if len(respOpt.Option) != 0 || respOpt.Version() != 0 || respOpt.Do() != reqOpt.Do() || respOpt.UDPSize() != ednsPayload {
					t.Errorf("response OPT %v, want version 0, size %d, DO %v, no options", respOpt, ednsPayload, reqOpt.Do())
				}
			}
			var want []egress.Event
			if tt.reason != "" {
				// The name as the server unpacked it (checkMirrors
				// compared it with the query's).
				want = []egress.Event{{Sandbox: "sbx-test", Kind: "dns.deny", Host: eventName(resp.Question[0].Name), Reason: tt.reason}}
			}
			if diff := cmp.Diff(want, h.events.take()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// rawConn talks DNS-over-TCP framing by hand, to send what a client
// library would not.
type rawConn struct {
	t *testing.T
	c net.Conn
}

func (r rawConn) send(b []byte) {
	r.t.Helper()
	r.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.c.Write(b); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

// recv reads one response; an error (EOF when the server closed the
// connection) is returned.
func (r rawConn) recv(timeout time.Duration) (*miekg.Msg, error) {
	r.c.SetReadDeadline(time.Now().Add(timeout))
	var prefix [2]byte
	if _, err := io.ReadFull(r.c, prefix[:]); err != nil {
		return nil, err
	}
	b := make([]byte, int(prefix[0])<<8|int(prefix[1]))
	if _, err := io.ReadFull(r.c, b); err != nil {
		return nil, err
	}
	m := new(miekg.Msg)
	if err := m.Unpack(b); err != nil {
		r.t.Fatalf("response does not parse: %v", err)
	}
	return m, nil
}

func TestMalformedKeepsConnection(t *testing.T) {
	h := newHarness(t, nil)
	valid := query("allowed.test.", miekg.TypeA)
	twoQuestions := query("allowed.test.", miekg.TypeA)
	twoQuestions.Question = append(twoQuestions.Question, miekg.Question{Name: "www.ok.test.", Qtype: miekg.TypeA, Qclass: miekg.ClassINET})
	withAnswer := query("allowed.test.", miekg.TypeA)
	withAnswer.Answer = []miekg.RR{&miekg.A{Hdr: miekg.RR_Header{Name: "allowed.test.", Rrtype: miekg.TypeA, Class: miekg.ClassINET}, A: net.IPv4(1, 2, 3, 4)}}
	twoOpts := query("allowed.test.", miekg.TypeA)
	twoOpts.SetEdns0(1232, false)
	twoOpts.SetEdns0(1232, false)
	asResponse := query("allowed.test.", miekg.TypeA)
	asResponse.Response = true
	noQuestion := query("allowed.test.", miekg.TypeA)
	noQuestion.Question = nil

	tests := []struct {
		desc  string
		msg   []byte
		rcode int // -1: no response at all
	}{
		{"short header", []byte{0x12, 0x34, 0x01, 0x00, 0x00}, -1},
		{"header only, one question promised", []byte{0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0}, miekg.RcodeFormatError},
		{"truncated question", pack(t, valid)[:20], miekg.RcodeFormatError},
		{"label past the end", append(pack(t, valid)[:12], 63, 'a', 'b'), miekg.RcodeFormatError},
		{"compression loop", []byte{0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1}, miekg.RcodeFormatError},
		{"two questions", pack(t, twoQuestions), miekg.RcodeFormatError},
		{"no question", pack(t, noQuestion), miekg.RcodeFormatError},
		{"answer in a query", pack(t, withAnswer), miekg.RcodeFormatError},
		{"two OPT records", pack(t, twoOpts), miekg.RcodeFormatError},
		{"a response", pack(t, asResponse), -1},
		{"garbage", []byte(strings.Repeat("\xff\x00garbage", 30)), miekg.RcodeFormatError},
		{"garbage response", []byte(strings.Repeat("\xff\x00\xffgarbage", 30)), -1},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			r := rawConn{t, h.dial(t)}
			r.send(frame(tt.msg))
			// A valid query after it, on the same connection: the
			// connection must still work, and no other response may
			// come first (responses can be reordered, so match by ID).
			r.send(frame(pack(t, valid)))
			var gotBad, gotValid bool
			for !gotValid {
				m, err := r.recv(5 * time.Second)
				if err != nil {
					t.Fatalf("connection failed after a malformed query: %v", err)
				}
				switch {
				case m.Id == valid.Id && len(m.Question) == 1 && m.Rcode == miekg.RcodeSuccess:
					gotValid = true
					if len(m.Answer) != 1 {
						t.Errorf("valid query answered %v", m)
					}
				case tt.rcode < 0:
					t.Errorf("unexpected response to a malformed message: %v", m)
				default:
					gotBad = true
					if m.Id != uint16(tt.msg[0])<<8|uint16(tt.msg[1]) || m.Rcode != tt.rcode || len(m.Answer) != 0 {
						t.Errorf("response %v, want rcode %s for ID %#x", m, miekg.RcodeToString[tt.rcode], tt.msg[:2])
					}
				}
			}
			if tt.rcode >= 0 && !gotBad {
				// Ordered or not, it must have come by now or never.
				m, err := r.recv(2 * time.Second)
				if err != nil || m.Rcode != tt.rcode {
					t.Errorf("no %s response (got %v, %v)", miekg.RcodeToString[tt.rcode], m, err)
				}
			}
		})
	}
	if got := h.up.seen(); len(got) != len(tests) {
		t.Errorf("upstream saw %q, want only the %d valid queries", got, len(tests))
	}
}

func TestBadFramingClosesConnection(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.IdleTimeout = 300 * time.Millisecond })
	tests := []struct {
		desc string
		send []byte
	}{
		{"huge length prefix", []byte{0xff, 0xff, 1, 2, 3}},
		{"longer than MaxQueryBytes", append([]byte{0x04, 0x01}, make([]byte, 1025)...)},
		{"zero length", []byte{0, 0}},
		{"length then stall", []byte{0, 100, 1, 2, 3, 4, 5}},
		{"half a prefix", []byte{0}},
		{"nothing (idle)", nil},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			r := rawConn{t, h.dial(t)}
			if tt.send != nil {
				r.send(tt.send)
			}
			start := time.Now()
			m, err := r.recv(5 * time.Second)
			if err == nil {
				t.Fatalf("got a response %v, want the connection closed", m)
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("connection still open after %v", time.Since(start))
			}
		})
	}
}

func TestIdleTimeoutResetByQueries(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.IdleTimeout = 300 * time.Millisecond })
	c := h.dial(t)
	for range 4 { // 4 × 150 ms: longer than the idle timeout in all
		time.Sleep(150 * time.Millisecond)
		exchangeOn(t, c, query("allowed.test.", miekg.TypeA))
	}
}

func TestManyQueriesOneConnection(t *testing.T) {
	h := newHarness(t, nil)
	r := rawConn{t, h.dial(t)}
	names := []string{"allowed.test.", "www.ok.test.", "denied.example.", "v4only.ok.test.", "loop.ok.test."}
	want := make(map[uint16]*miekg.Msg)
	var burst []byte
	for i := range 40 {
		m := query(names[i%len(names)], []uint16{miekg.TypeA, miekg.TypeAAAA, miekg.TypeTXT}[i%3])
		m.Id = uint16(1000 + i)
		want[m.Id] = m
		burst = append(burst, frame(pack(t, m))...)
	}
	r.send(burst) // pipelined: all written before any is read
	for range len(want) {
		resp, err := r.recv(10 * time.Second)
		if err != nil {
			t.Fatalf("%d responses missing: %v", len(want), err)
		}
		req, ok := want[resp.Id]
		if !ok {
			t.Fatalf("response with unknown or repeated ID %d", resp.Id)
		}
		delete(want, resp.Id)
		checkMirrors(t, req, resp)
		wantRcode := miekg.RcodeSuccess
		switch {
		case req.Question[0].Qtype == miekg.TypeTXT:
			wantRcode = miekg.RcodeRefused
		case req.Question[0].Name == "denied.example.":
			wantRcode = miekg.RcodeNameError
		}
		if resp.Rcode != wantRcode {
			t.Errorf("%v: rcode %s, want %s", req.Question[0], miekg.RcodeToString[resp.Rcode], miekg.RcodeToString[wantRcode])
		}
	}
}

func TestConcurrentConnections(t *testing.T) {
	h := newHarness(t, nil)
	var wg sync.WaitGroup
	for i := range 24 {
		wg.Go(func() {
			c, err := net.Dial("unix", h.path)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			co := &miekg.Conn{Conn: c}
			for j := range 10 {
				name, want := "allowed.test.", miekg.RcodeSuccess
				if (i+j)%2 == 1 {
					name, want = fmt.Sprintf("c%d-%d.denied.example.", i, j), miekg.RcodeNameError
				}
				req := query(name, miekg.TypeA)
				c.SetDeadline(time.Now().Add(10 * time.Second))
				if err := co.WriteMsg(req); err != nil {
					t.Error(err)
					return
				}
				resp, err := co.ReadMsg()
				if err != nil {
					t.Error(err)
					return
				}
				if resp.Id != req.Id || resp.Rcode != want {
					t.Errorf("%s: %v", name, resp)
				}
			}
		})
	}
	wg.Wait()
	for _, q := range h.up.seen() {
		if q != "allowed.test. A" {
			t.Errorf("upstream asked %q", q)
		}
	}
}

func TestMaxConns(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxConns = 2 })
	c1, c2 := h.dial(t), h.dial(t)
	exchangeOn(t, c1, query("allowed.test.", miekg.TypeA)) // both served by now
	exchangeOn(t, c2, query("allowed.test.", miekg.TypeA))
	r := rawConn{t, h.dial(t)}
	if m, err := r.recv(5 * time.Second); err == nil {
		t.Fatalf("third connection got %v, want it closed", m)
	} else if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("third connection left open")
	}
	c1.Close()
	// The slot frees once the server has seen c1 go.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c := h.dial(t)
		co := &miekg.Conn{Conn: c}
		c.SetDeadline(time.Now().Add(time.Second))
		if co.WriteMsg(query("allowed.test.", miekg.TypeA)) == nil {
			if _, err := co.ReadMsg(); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no connection served after one closed")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRateLimit(t *testing.T) {
	ev := &events{}
	up := &fakeResolver{addrs: []netip.Addr{netip.MustParseAddr("192.0.2.1")}}
	s := New(Config{Sandbox: "sbx-test", Policy: testPolicy{}, Upstream: up, Record: ev.record, RatePerSecond: 5, Burst: 5})
	defer s.Close()
	clock := time.Unix(1_000_000, 0)
	s.now = func() time.Time { return clock }

	ask := func(name string) int {
		t.Helper()
		req := query(name, miekg.TypeA)
		resp := new(miekg.Msg)
		if err := resp.Unpack(s.handle(context.Background(), pack(t, req))); err != nil {
			t.Fatal(err)
		}
		checkMirrors(t, req, resp)
		return resp.Rcode
	}
	expect := func(desc string, n int, name string, rcode int) {
		t.Helper()
		for i := range n {
			if got := ask(name); got != rcode {
				t.Fatalf("%s: query %d: %s, want %s", desc, i, miekg.RcodeToString[got], miekg.RcodeToString[rcode])
			}
		}
	}
	rateEvent := egress.Event{Sandbox: "sbx-test", Kind: "dns.deny", Host: "allowed.test", Reason: "query rate limit exceeded (5 a second, burst 5)"}

	expect("burst", 5, "allowed.test.", miekg.RcodeSuccess)
	expect("over the limit", 20, "allowed.test.", miekg.RcodeRefused)
	// Denied names count too, and are not recorded one by one while
	// the limit holds.
	expect("denied, over the limit", 20, "flood.attacker.example.", miekg.RcodeRefused)
	if diff := cmp.Diff([]egress.Event{rateEvent}, ev.take()); diff != "" {
		t.Errorf("one event for the whole flood (-want +got):\n%s", diff)
	}
	if n := up.callCount(); n != 5 {
		t.Errorf("upstream asked %d times, want 5", n)
	}

	clock = clock.Add(200 * time.Millisecond) // one token back
	expect("after 200ms", 1, "allowed.test.", miekg.RcodeSuccess)
	expect("after 200ms, over", 3, "allowed.test.", miekg.RcodeRefused)
	if evs := ev.take(); len(evs) != 0 {
		t.Errorf("recorded again within a second: %v", evs)
	}

	clock = clock.Add(10 * time.Second) // recovered, the burst at most
	expect("recovered", 5, "allowed.test.", miekg.RcodeSuccess)
	expect("recovered, over", 1, "allowed.test.", miekg.RcodeRefused)
	if diff := cmp.Diff([]egress.Event{rateEvent}, ev.take()); diff != "" {
		t.Errorf("a second later, one event again (-want +got):\n%s", diff)
	}
}

func TestUpstreamTimeout(t *testing.T) {
	up := &fakeResolver{block: true}
	s := New(Config{Sandbox: "sbx-test", Policy: testPolicy{}, Upstream: up, LookupTimeout: 100 * time.Millisecond})
	defer s.Close()
	start := time.Now()
	resp := new(miekg.Msg)
	if err := resp.Unpack(s.handle(context.Background(), pack(t, query("allowed.test.", miekg.TypeA)))); err != nil {
		t.Fatal(err)
	}
	if resp.Rcode != miekg.RcodeServerFailure {
		t.Errorf("rcode %s, want SERVFAIL", miekg.RcodeToString[resp.Rcode])
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v, want about the lookup timeout", d)
	}
	if diff := cmp.Diff([]string{"ip4 allowed.test."}, up.calls); diff != "" {
		t.Errorf("upstream calls (-want +got):\n%s", diff)
	}
}

func TestAnswersCappedAndFiltered(t *testing.T) {
	var addrs []netip.Addr
	for i := range 20 {
		addrs = append(addrs, netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}))
	}
	addrs = append(addrs,
		netip.AddrFrom4([4]byte{192, 0, 2, 0}), // a duplicate
		netip.MustParseAddr("2001:db8::1"),     // wrong family for A
		netip.MustParseAddr("::ffff:10.0.0.1"), // mapped private: refused
		netip.MustParseAddr("fe80::1%eth0"),    // zone dropped, then refused
	)
	ev := &events{}
	up := &fakeResolver{addrs: addrs}
	s := New(Config{Sandbox: "sbx-test", Policy: testPolicy{}, Upstream: up, Check: refuseInternal, Record: ev.record, TTL: time.Hour})
	defer s.Close()
	for _, qtype := range []uint16{miekg.TypeA, miekg.TypeAAAA} {
		resp := new(miekg.Msg)
		if err := resp.Unpack(s.handle(context.Background(), pack(t, query("many.ok.test.", qtype)))); err != nil {
			t.Fatal(err)
		}
		if qtype == miekg.TypeA && len(resp.Answer) != maxAnswers {
			t.Errorf("A: %d answers, want %d", len(resp.Answer), maxAnswers)
		}
		if qtype == miekg.TypeAAAA {
			if diff := cmp.Diff(result{Rcode: "NOERROR", Answer: []string{"many.ok.test. 60 IN AAAA 2001:db8::1"}}, summarise(resp)); diff != "" {
				t.Errorf("AAAA (-want +got):\n%s", diff)
			}
		}
		for _, rr := range resp.Answer {
			if rr.Header().Ttl != 60 {
				t.Errorf("TTL %d, want it capped at 60", rr.Header().Ttl)
			}
		}
		if b, _ := resp.Pack(); len(b) > 512 {
			t.Errorf("%s response is %d bytes, want at most 512", typeString(qtype), len(b))
		}
	}
	want := []egress.Event{
		{Sandbox: "sbx-test", Kind: "dns.deny", Host: "many.ok.test", Reason: "address refused: 10.0.0.1: private"},
		{Sandbox: "sbx-test", Kind: "dns.deny", Host: "many.ok.test", Reason: "address refused: fe80::1: link-local"},
	}
	if diff := cmp.Diff(want, ev.take()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestGoClient resolves through the server the way a program in the
// sandbox would (Go's resolver over the forwarded stream), in particular
// that a NODATA answer is "not found", not a lame referral.
func TestGoClient(t *testing.T) {
	h := newHarness(t, nil)
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "unix", h.path)
		// Hide *UnixConn's ReadFrom and WriteTo, or Go's resolver takes
		// it for a datagram socket and leaves out the length prefix.
		return struct{ net.Conn }{c}, err
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	got, err := r.LookupNetIP(ctx, "ip", "allowed.test.")
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Addr{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("2606:2800:220:1:248:1893:25c8:1946")}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("allowed.test (-want +got):\n%s", diff)
	}
	for _, tt := range []struct{ network, name string }{
		{"ip6", "v4only.ok.test."},
		{"ip4", "loop.ok.test."},
		{"ip4", "denied.example."},
		{"ip", "127.0.0.1.attacker.example."},
	} {
		_, err := r.LookupNetIP(ctx, tt.network, tt.name)
		var de *net.DNSError
		if !errors.As(err, &de) || !de.IsNotFound || de.IsTemporary {
			t.Errorf("%s %s: %v, want not found", tt.network, tt.name, err)
		}
	}
	if _, err := r.LookupTXT(ctx, "allowed.test."); err == nil {
		t.Error("TXT lookup succeeded")
	}
	for _, q := range h.up.seen() {
		if strings.Contains(q, "denied") || strings.Contains(q, "attacker") || strings.Contains(q, "TXT") {
			t.Errorf("upstream asked %q", q)
		}
	}
}

func TestClose(t *testing.T) {
	h := newHarness(t, nil)
	r := rawConn{t, h.dial(t)}
	exchangeOn(t, r.c, query("allowed.test.", miekg.TypeA))
	if err := h.srv.Close(); err != nil {
		t.Fatal(err)
	}
	if m, err := r.recv(5 * time.Second); err == nil {
		t.Fatalf("response %v after Close", m)
	}
	select {
	case err := <-h.served:
		if !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v", err)
		}
		h.served <- err // for the cleanup
	case <-time.After(5 * time.Second):
		t.Fatal("Serve still running after Close")
	}
	if err := h.srv.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.srv.Serve(l); !errors.Is(err, ErrServerClosed) {
		t.Errorf("Serve after Close: %v", err)
	}
	if _, err := net.Dial("tcp", l.Addr().String()); err == nil {
		t.Error("Serve after Close left its listener open")
	}
	c1, c2 := net.Pipe()
	defer c2.Close()
	h.srv.ServeConn(c1) // returns at once, closing c1
	if _, err := c2.Write([]byte{0}); err == nil {
		t.Error("ServeConn after Close left the connection open")
	}
}

func TestNew(t *testing.T) {
	got := New(Config{Sandbox: "s", TTL: -1, RatePerSecond: -5, MaxConns: -1}).cfg
	if got.Upstream != net.DefaultResolver {
		t.Errorf("Upstream %v, want net.DefaultResolver", got.Upstream)
	}
	got.Upstream = nil
	want := Config{Sandbox: "s", RatePerSecond: DefaultRatePerSecond, Burst: DefaultBurst, TTL: DefaultTTL,
		MaxQueryBytes: DefaultMaxQueryBytes, IdleTimeout: DefaultIdleTimeout, LookupTimeout: DefaultLookupTimeout, MaxConns: DefaultMaxConns}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	if got := New(Config{RatePerSecond: 7}).cfg.Burst; got != 14 {
		t.Errorf("Burst for 7/s: %d, want 14", got)
	}
	for _, tt := range []struct {
		in   time.Duration
		want uint32
	}{{0, 60}, {time.Hour, 60}, {5 * time.Second, 5}, {time.Millisecond, 1}} {
		if s := New(Config{TTL: tt.in}); s.ttl != tt.want {
			t.Errorf("TTL %v: %d, want %d", tt.in, s.ttl, tt.want)
		}
	}
}

// TestNoPolicyFailsClosed: a Server without a policy answers no name and
// asks the upstream nothing.
func TestNoPolicyFailsClosed(t *testing.T) {
	ev := &events{}
	up := &fakeResolver{addrs: []netip.Addr{netip.MustParseAddr("192.0.2.1")}}
	s := New(Config{Sandbox: "sbx-test", Upstream: up, Record: ev.record})
	defer s.Close()
	resp := new(miekg.Msg)
	if err := resp.Unpack(s.handle(context.Background(), pack(t, query("allowed.test.", miekg.TypeA)))); err != nil {
		t.Fatal(err)
	}
	if resp.Rcode != miekg.RcodeNameError || up.callCount() != 0 {
		t.Errorf("rcode %s, %d upstream calls; want NXDOMAIN and none", miekg.RcodeToString[resp.Rcode], up.callCount())
	}
	want := []egress.Event{{Sandbox: "sbx-test", Kind: "dns.deny", Host: "allowed.test", Reason: reasonNoPolicy}}
	if diff := cmp.Diff(want, ev.take()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestCheckErrorNamingTheAddress(t *testing.T) {
	ev := &events{}
	up := &fakeResolver{addrs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}
	s := New(Config{Sandbox: "sbx-test", Policy: testPolicy{}, Upstream: up, Record: ev.record,
		Check: func(a netip.Addr) error { return fmt.Errorf("%s is a loopback address", a) }})
	defer s.Close()
	s.handle(context.Background(), pack(t, query("allowed.test.", miekg.TypeA)))
	want := []egress.Event{{Sandbox: "sbx-test", Kind: "dns.deny", Host: "allowed.test", Reason: "address refused: 127.0.0.1 is a loopback address"}}
	if diff := cmp.Diff(want, ev.take()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}
