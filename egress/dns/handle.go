package dns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"

	miekg "github.com/miekg/dns"
)

// Why a query was denied: the Reason of its dns.deny event.
const (
	reasonNotAllowed = "name not allowed by policy"
	reasonNoPolicy   = "no policy: every name is denied"
	reasonMalformed  = "malformed query"
)

// headerLen is the size of a DNS header: a message shorter than that has
// no ID to answer to.
const headerLen = 12

// handle answers one query (a DNS message without its length prefix) and
// returns the packed response, or nil when there is nothing to answer: a
// message too short to carry an ID, or a response (answering those could
// loop). It never panics on any input (FuzzHandle).
func (s *Server) handle(ctx context.Context, query []byte) []byte {
	if len(query) < headerLen || query[2]&0x80 != 0 {
		return nil
	}
	req := new(miekg.Msg)
	// A header of 12 bytes always unpacks, so req.MsgHdr is the query's
	// even when the rest does not parse.
	err := req.Unpack(query)

	resp := &miekg.Msg{MsgHdr: miekg.MsgHdr{
		Id:                 req.Id,
		Response:           true,
		Opcode:             req.Opcode,
		RecursionDesired:   req.RecursionDesired,
		CheckingDisabled:   req.CheckingDisabled,
		RecursionAvailable: req.Opcode == miekg.OpcodeQuery,
	}, Compress: true}
	var (
		opt  *miekg.OPT
		nopt int
	)
	if err == nil {
		for _, rr := range req.Extra {
			if o, ok := rr.(*miekg.OPT); ok {
				opt, nopt = o, nopt+1
			}
		}
		if nopt == 1 {
			// Our own OPT: no option of the query is echoed.
			resp.SetEdns0(ednsPayload, opt.Do())
		}
		if len(req.Question) == 1 {
			resp.Question = []miekg.Question{req.Question[0]}
		}
	}
	s.answer(ctx, req, err, opt, nopt, resp)
	return s.pack(resp)
}

// answer fills in resp's rcode and records; resp already mirrors req.
func (s *Server) answer(ctx context.Context, req *miekg.Msg, unpackErr error, opt *miekg.OPT, nopt int, resp *miekg.Msg) {
	var name string // for the ledger
	if len(resp.Question) == 1 {
		name = eventName(resp.Question[0].Name)
	}
	if ok, record := s.limit.take(s.now()); !ok {
		if record {
			s.deny(name, fmt.Sprintf("query rate limit exceeded (%d a second, burst %d)", s.cfg.RatePerSecond, s.cfg.Burst))
		}
		resp.Rcode = miekg.RcodeRefused
		return
	}

	formErr := func(reason string) {
		s.deny(name, reason)
		resp.Rcode = miekg.RcodeFormatError
		resp.Question, resp.Extra = nil, nil
	}
	switch {
	case unpackErr != nil:
		formErr(reasonMalformed)
		return
	case req.Opcode != miekg.OpcodeQuery:
		s.deny(name, fmt.Sprintf("opcode %s not implemented", opcodeString(req.Opcode)))
		resp.Rcode = miekg.RcodeNotImplemented
		return
	case len(req.Question) != 1:
		formErr(fmt.Sprintf("%s: %d questions, want 1", reasonMalformed, len(req.Question)))
		return
	case len(req.Answer) != 0 || len(req.Ns) != 0:
		formErr(reasonMalformed + ": records in the answer or authority section")
		return
	case nopt > 1:
		formErr(reasonMalformed + ": more than one OPT record")
		return
	case nopt == 1 && opt.Version() != 0:
		s.deny(name, fmt.Sprintf("edns version %d not supported", opt.Version()))
		resp.Rcode = miekg.RcodeBadVers
		return
	}

	q := req.Question[0]
	if q.Qclass != miekg.ClassINET {
		s.deny(name, fmt.Sprintf("class %s not answered", classString(q.Qclass)))
		resp.Rcode = miekg.RcodeRefused
		return
	}
	if q.Qtype != miekg.TypeA && q.Qtype != miekg.TypeAAAA {
		s.deny(name, fmt.Sprintf("query type %s not answered", typeString(q.Qtype)))
		resp.Rcode = miekg.RcodeRefused
		return
	}
	host, reason := canonicalName(q.Name)
	if reason != "" {
		s.deny(name, reason)
		resp.Rcode = miekg.RcodeNameError
		return
	}
	// The exfiltration guard: nothing about a name the policy does not
	// allow goes further than this.
	if s.cfg.Policy == nil {
		s.deny(host, reasonNoPolicy)
		resp.Rcode = miekg.RcodeNameError
		return
	}
	if !s.cfg.Policy.AllowsName(host) {
		s.deny(host, reasonNotAllowed)
		resp.Rcode = miekg.RcodeNameError
		return
	}
	s.lookup(ctx, q, host, resp)
}

// lookup answers an allowed A or AAAA question through the upstream.
func (s *Server) lookup(ctx context.Context, q miekg.Question, host string, resp *miekg.Msg) {
	network := "ip4"
	if q.Qtype == miekg.TypeAAAA {
		network = "ip6"
	}
	lctx, cancel := context.WithTimeout(ctx, s.cfg.LookupTimeout)
	defer cancel()
	// Fully qualified, so the host's search domains are never tried.
	addrs, err := s.cfg.Upstream.LookupNetIP(lctx, network, host+".")
	if err != nil {
		var de *net.DNSError
		if errors.As(err, &de) && de.IsNotFound {
			// The host's resolver cannot say whether the name is missing
			// or has no records of this family; NODATA is right for
			// both as far as the sandbox is concerned, and unlike
			// NXDOMAIN does not deny the other family (RFC 8020).
			return
		}
		s.log.Debug("upstream lookup failed", slog.String("name", host), slog.String("network", network), slog.Any("error", err))
		resp.Rcode = miekg.RcodeServerFailure
		return
	}

	var (
		seen    = make(map[netip.Addr]bool, len(addrs))
		refused []string
	)
	// A answers carry IPv4 addresses, unmapped; AAAA answers carry IPv6
	// addresses that are not IPv4-mapped (Go's resolver drops those too,
	// and Check would see them as IPv6). Duplicates go, then what Check
	// refuses; at most maxAnswers remain.
	for _, a := range addrs {
		a = a.WithZone("")
		if q.Qtype == miekg.TypeA {
			a = a.Unmap()
			if !a.Is4() {
				continue
			}
		} else if !a.Is6() || a.Is4In6() {
			continue
		}
		if seen[a] {
			continue
		}
		seen[a] = true
		if s.cfg.Check != nil {
			if err := s.cfg.Check(a); err != nil {
				// "10.0.0.1: private", or the error alone when it
				// names the address itself (addr.Checker's do).
				msg := err.Error()
				if !strings.HasPrefix(msg, a.String()) {
					msg = a.String() + ": " + msg
				}
				refused = append(refused, msg)
				continue
			}
		}
		if len(resp.Answer) == maxAnswers {
			continue // keep checking, so the event lists every refusal
		}
		hdr := miekg.RR_Header{Name: q.Name, Rrtype: q.Qtype, Class: miekg.ClassINET, Ttl: s.ttl}
		if q.Qtype == miekg.TypeA {
			resp.Answer = append(resp.Answer, &miekg.A{Hdr: hdr, A: net.IP(a.AsSlice())})
		} else {
			resp.Answer = append(resp.Answer, &miekg.AAAA{Hdr: hdr, AAAA: net.IP(a.AsSlice())})
		}
	}
	if len(refused) > 0 {
		const shown = 4
		reason := "address refused: " + strings.Join(refused[:min(len(refused), shown)], "; ")
		if len(refused) > shown {
			reason += fmt.Sprintf(" and %d more", len(refused)-shown)
		}
		s.deny(host, reason)
	}
}

// pack packs resp; should its question not pack again (miekg accepts a
// little more than it writes), it answers without the question, then not
// at all.
func (s *Server) pack(resp *miekg.Msg) []byte {
	out, err := resp.Pack()
	if err == nil {
		return out
	}
	s.log.Debug("dns response did not pack", slog.Any("error", err))
	bare := &miekg.Msg{MsgHdr: resp.MsgHdr}
	if bare.Rcode > 0xF || bare.Rcode == miekg.RcodeSuccess {
		bare.Rcode = miekg.RcodeServerFailure
	}
	out, err = bare.Pack()
	if err != nil {
		return nil
	}
	return out
}

// eventName is a question name as the ledger shows it: canonical when it
// is a host name, else its escaped presentation form, lower case, cut to
// the length of a name.
func eventName(qname string) string {
	if host, reason := canonicalName(qname); reason == "" {
		return host
	}
	n := strings.ToLower(strings.TrimSuffix(qname, "."))
	if len(n) > 255 {
		n = n[:255]
	}
	return n
}

func typeString(t uint16) string {
	if s, ok := miekg.TypeToString[t]; ok {
		return s
	}
	return fmt.Sprintf("TYPE%d", t)
}

func classString(c uint16) string {
	if s, ok := miekg.ClassToString[c]; ok {
		return s
	}
	return fmt.Sprintf("CLASS%d", c)
}

func opcodeString(o int) string {
	if s, ok := miekg.OpcodeToString[o]; ok {
		return s
	}
	return fmt.Sprintf("OPCODE%d", o)
}
