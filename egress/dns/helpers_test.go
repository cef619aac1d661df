package dns

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	miekg "github.com/miekg/dns"

	"paddock.dev/paddock/egress"
)

// testPolicy allows "allowed.test" and every name under "ok.test" (not
// ok.test itself).
type testPolicy struct{}

var _ egress.Policy = testPolicy{}

func (testPolicy) AllowsName(host string) bool {
	return host == "allowed.test" || strings.HasSuffix(host, ".ok.test")
}
func (testPolicy) Tunnel(string, int) egress.Decision    { return egress.Decision{} }
func (testPolicy) Decide(egress.Request) egress.Decision { return egress.Decision{} }

// refuseInternal stands in for the host's address check.
func refuseInternal(a netip.Addr) error {
	switch {
	case a.IsLoopback():
		return errors.New("loopback")
	case a.IsLinkLocalUnicast():
		return errors.New("link-local")
	case a.IsPrivate():
		return errors.New("private")
	case a.IsUnspecified():
		return errors.New("unspecified")
	}
	return nil
}

// events collects what a Server records.
type events struct {
	mu  sync.Mutex
	evs []egress.Event
}

func (e *events) record(ev egress.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.evs = append(e.evs, ev)
}

func (e *events) take() []egress.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	evs := e.evs
	e.evs = nil
	return evs
}

// testZone is what the fake upstream serves.
const testZone = `
allowed.test.        300 IN A     93.184.216.34
allowed.test.        300 IN AAAA  2606:2800:220:1:248:1893:25c8:1946
allowed.test.        300 IN TXT   "upstream txt must never be seen"
allowed.test.        300 IN MX    10 mail.allowed.test.
www.ok.test.         300 IN A     203.0.113.10
www.ok.test.         300 IN A     203.0.113.11
www.ok.test.         300 IN AAAA  2001:db8::10
v4only.ok.test.      300 IN A     203.0.113.20
loop.ok.test.        300 IN A     127.0.0.1
loop.ok.test.        300 IN AAAA  ::1
meta.ok.test.        300 IN A     169.254.169.254
mixed.ok.test.       300 IN A     127.0.0.1
mixed.ok.test.       300 IN A     198.51.100.7
mixed.ok.test.       300 IN A     10.0.0.1
alias.ok.test.       300 IN CNAME target.hidden.test.
target.hidden.test.  300 IN A     198.51.100.20
intranet.ok.test.    300 IN CNAME db.corp.hidden.test.
db.corp.hidden.test. 300 IN A     10.1.2.3
denied.example.      300 IN A     192.0.2.66
`

// upstream is a real DNS server on 127.0.0.1 serving testZone, counting
// every query it receives.
type upstream struct {
	addr string // udp

	mu      sync.Mutex
	queries []string // "name TYPE"
	rrs     map[string][]miekg.RR
}

func startUpstream(t *testing.T) *upstream {
	t.Helper()
	u := &upstream{rrs: make(map[string][]miekg.RR)}
	for line := range strings.SplitSeq(testZone, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		rr, err := miekg.NewRR(line)
		if err != nil {
			t.Fatalf("zone line %q: %v", line, err)
		}
		u.rrs[rr.Header().Name] = append(u.rrs[rr.Header().Name], rr)
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u.addr = pc.LocalAddr().String()
	started := make(chan struct{})
	srv := &miekg.Server{PacketConn: pc, Handler: miekg.HandlerFunc(u.serve), NotifyStartedFunc: func() { close(started) }}
	go srv.ActivateAndServe()
	<-started
	t.Cleanup(func() { srv.Shutdown() })
	return u
}

func (u *upstream) serve(w miekg.ResponseWriter, req *miekg.Msg) {
	m := new(miekg.Msg)
	m.SetReply(req)
	m.Authoritative = true
	if len(req.Question) != 1 {
		m.Rcode = miekg.RcodeFormatError
		w.WriteMsg(m)
		return
	}
	q := req.Question[0]
	name := strings.ToLower(q.Name)
	u.mu.Lock()
	u.queries = append(u.queries, name+" "+miekg.TypeToString[q.Qtype])
	u.mu.Unlock()
	if name == "broken.ok.test." {
		m.Rcode = miekg.RcodeServerFailure
		w.WriteMsg(m)
		return
	}
	if _, ok := u.rrs[name]; !ok {
		m.Rcode = miekg.RcodeNameError
		w.WriteMsg(m)
		return
	}
	for range 8 { // follow CNAMEs, as a recursive resolver would
		rrs := u.rrs[name]
		next := ""
		for _, rr := range rrs {
			switch {
			case rr.Header().Rrtype == q.Qtype:
				m.Answer = append(m.Answer, rr)
			case rr.Header().Rrtype == miekg.TypeCNAME:
				m.Answer = append(m.Answer, rr)
				next = rr.(*miekg.CNAME).Target
			}
		}
		if next == "" {
			break
		}
		name = next
	}
	w.WriteMsg(m)
}

// seen returns the queries received so far.
func (u *upstream) seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.queries...)
}

// resolver is the host's resolver, pointed at the upstream.
func (u *upstream) resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", u.addr)
	}}
}

// fakeResolver answers every name with addrs, at the edge, no network.
// It fails the test if it is asked about a name the policy denies.
type fakeResolver struct {
	addrs []netip.Addr
	err   error
	block bool // wait for ctx instead of answering

	mu       sync.Mutex
	calls    []string
	violated []string
}

func (f *fakeResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	f.mu.Lock()
	f.calls = append(f.calls, network+" "+host)
	if !strings.HasSuffix(host, ".") || !(testPolicy{}).AllowsName(strings.TrimSuffix(host, ".")) {
		f.violated = append(f.violated, host)
	}
	f.mu.Unlock()
	if f.block {
		<-ctx.Done()
		return nil, &net.DNSError{Err: ctx.Err().Error(), Name: host, IsTimeout: true}
	}
	if f.err != nil {
		return nil, f.err
	}
	return f.addrs, nil
}

func (f *fakeResolver) violations() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.violated...)
}

func (f *fakeResolver) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

// harness is a Server serving on a unix socket, as for a sandbox.
type harness struct {
	srv    *Server
	up     *upstream
	events *events
	path   string
	served chan error // Serve's result
}

// newHarness starts a Server whose upstream is a real DNS server, with
// Check refusing internal addresses and a rate limit tests do not reach;
// mod adjusts the Config first.
func newHarness(t *testing.T, mod func(*Config)) *harness {
	t.Helper()
	h := &harness{up: startUpstream(t), events: &events{}, served: make(chan error, 1)}
	cfg := Config{
		Sandbox:       "sbx-test",
		Policy:        testPolicy{},
		Upstream:      h.up.resolver(),
		Check:         refuseInternal,
		Record:        h.events.record,
		RatePerSecond: 100000,
		LookupTimeout: 2 * time.Second,
	}
	if mod != nil {
		mod(&cfg)
	}
	srv := New(cfg)
	h.srv = srv
	// Not t.TempDir: its long names can pass the 108-byte limit of a
	// unix socket path.
	dir, err := os.MkdirTemp("", "pdns")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	h.path = filepath.Join(dir, "dns.sock")
	l, err := net.Listen("unix", h.path)
	if err != nil {
		t.Fatal(err)
	}
	go func() { h.served <- srv.Serve(l) }()
	t.Cleanup(func() {
		srv.Close()
		select {
		case err := <-h.served:
			if !errors.Is(err, ErrServerClosed) {
				t.Errorf("Serve returned %v, want ErrServerClosed", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return after Close")
		}
	})
	return h
}

func (h *harness) dial(t *testing.T) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", h.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// exchange sends m on a fresh connection and returns the response.
func (h *harness) exchange(t *testing.T, m *miekg.Msg) *miekg.Msg {
	t.Helper()
	return exchangeOn(t, h.dial(t), m)
}

func exchangeOn(t *testing.T, c net.Conn, m *miekg.Msg) *miekg.Msg {
	t.Helper()
	co := &miekg.Conn{Conn: c}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := co.WriteMsg(m); err != nil {
		t.Fatalf("write %v: %v", m.Question, err)
	}
	resp, err := co.ReadMsg()
	if err != nil {
		t.Fatalf("read response to %v: %v", m.Question, err)
	}
	return resp
}

func query(name string, qtype uint16) *miekg.Msg {
	m := new(miekg.Msg)
	m.SetQuestion(name, qtype)
	return m
}

// result is a response as tests compare it.
type result struct {
	Rcode  string
	Answer []string
}

func summarise(m *miekg.Msg) result {
	r := result{Rcode: miekg.RcodeToString[m.Rcode]}
	for _, rr := range m.Answer {
		r.Answer = append(r.Answer, strings.Join(strings.Fields(rr.String()), " "))
	}
	return r
}

// checkMirrors fails unless resp answers req: same ID, opcode, question
// (on the wire: the presentation forms of odd bytes vary), RD and CD, QR
// set, RA set for a QUERY, AA, TC and AD clear.
func checkMirrors(t *testing.T, req, resp *miekg.Msg) {
	t.Helper()
	if resp.Id != req.Id || !resp.Response || resp.Opcode != req.Opcode ||
		resp.RecursionDesired != req.RecursionDesired || resp.CheckingDisabled != req.CheckingDisabled ||
		resp.RecursionAvailable != (req.Opcode == miekg.OpcodeQuery) ||
		resp.Authoritative || resp.Truncated || resp.AuthenticatedData || resp.Zero {
		t.Errorf("response header %+v does not mirror query header %+v", resp.MsgHdr, req.MsgHdr)
	}
	if len(resp.Question) != 1 || !sameQuestion(t, resp.Question[0], req.Question[0]) {
		t.Errorf("response question %v, want %v", resp.Question, req.Question)
	}
}

func sameQuestion(t *testing.T, a, b miekg.Question) bool {
	t.Helper()
	wire := func(name string) string {
		buf := make([]byte, 256)
		n, err := miekg.PackDomainName(name, buf, 0, nil, false)
		if err != nil {
			t.Fatalf("name %q: %v", name, err)
		}
		return string(buf[:n])
	}
	return a.Qtype == b.Qtype && a.Qclass == b.Qclass && wire(a.Name) == wire(b.Name)
}

// frame prefixes msg with its length.
func frame(msg []byte) []byte {
	return append([]byte{byte(len(msg) >> 8), byte(len(msg))}, msg...)
}

func pack(t testing.TB, m *miekg.Msg) []byte {
	t.Helper()
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
