package egress_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	mdns "github.com/miekg/dns"

	"paddock.dev/paddock/egress/rules"
	"paddock.dev/paddock/hostd/sandboxes"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hypervisor/procbox"
)

// zone is a DNS server for the test's names (in the upstream namespace,
// or on loopback); it counts the
// questions it gets per name. A record "a|b" answers a, then b, then a…
// (DNS rebinding).
type zone struct {
	addr string
	mu   sync.Mutex
	seen map[string]int
	// seenA counts A questions only, for the rebinding answers.
	seenA map[string]int
}

func startZone(t *testing.T, records map[string]string, ns *upstreamNS) *zone {
	t.Helper()
	z := &zone{seen: map[string]int{}, seenA: map[string]int{}}
	var pc net.PacketConn
	var err error
	if ns != nil {
		pc, err = ns.listenPacket(netip.AddrPortFrom(zoneAddr, 53))
	} else {
		pc, err = net.ListenPacket("udp", "127.0.0.1:0")
	}
	if err != nil {
		t.Fatal(err)
	}
	z.addr = pc.LocalAddr().String()
	srv := &mdns.Server{PacketConn: pc, Handler: mdns.HandlerFunc(func(w mdns.ResponseWriter, q *mdns.Msg) {
		m := new(mdns.Msg)
		m.SetReply(q)
		name := strings.ToLower(q.Question[0].Name)
		z.mu.Lock()
		z.seen[name]++
		z.seenA[name] += map[bool]int{true: 1}[q.Question[0].Qtype == mdns.TypeA]
		n := z.seenA[name]
		z.mu.Unlock()
		ip, ok := records[name]
		if alts := strings.Split(ip, "|"); len(alts) > 1 {
			// A rebinding name: each A question gets the next answer.
			ip = alts[(max(n, 1)-1)%len(alts)]
		}
		if ok && q.Question[0].Qtype == mdns.TypeA {
			rr, _ := mdns.NewRR(fmt.Sprintf("%s 60 IN A %s", name, ip))
			m.Answer = append(m.Answer, rr)
		} else if !ok {
			m.Rcode = mdns.RcodeNameError
		}
		w.WriteMsg(m)
	})}
	go srv.ActivateAndServe()
	t.Cleanup(func() { srv.Shutdown() })
	return z
}

func (z *zone) asked(name string) int {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.seen[name]
}

// TestEgressFromASandbox drives curl and python3 in a real sandbox (debian
// image) through the host's egress: the allowed name is reached over
// HTTP, HTTPS (CONNECT) and by a program that ignores the proxy (the
// redirect); another name is refused by the proxy and never resolved
// upstream; names that resolve to loopback or metadata are refused; UDP
// to an outside resolver fails; decisions are ledgered.
func TestEgressFromASandbox(t *testing.T) {
	onBackends(t, append([]string{procbox.Name + loopbackSuffix}, allBackends...), egressFromASandbox)
}

func egressFromASandbox(t *testing.T, backend string) {
	ctx := context.Background()
	var otherHits atomic.Int64
	allowed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from allowed %s %s", r.Method, r.URL.Path)
	}))
	defer allowed.Close()
	allowedTLS := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello over tls %s", r.URL.Path)
	}))
	defer allowedTLS.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		otherHits.Add(1)
		fmt.Fprint(w, "you should not see this")
	}))
	defer other.Close()
	tn := newTestNet(t, map[string]string{
		"allowed.test.": "10.99.0.10",
		"other.test.":   "10.99.0.11",
		"loop.test.":    "127.0.0.1",
		"meta.test.":    "169.254.169.254",
		"paths.test.":   "10.99.0.10",
		"rebind.test.":  "10.99.0.10|127.0.0.1",
	}, map[string]string{
		"10.99.0.10:80":  allowed.Listener.Addr().String(),
		"10.99.0.10:443": allowedTLS.Listener.Addr().String(),
		"10.99.0.11:80":  other.Listener.Addr().String(),
	})
	z := tn.zone
	ecfg := tn.egressConfig()
	ecfg.Links = linksOn(backend)
	d := egressDaemon(t, backend, ecfg, nil, engine(t))
	m, eg, sbxs := d.Manager(), d.Egress(), d.Sandboxes()
	s, err := m.Create(ctx, "", session.CreateRequest{Policy: &session.PolicyRequest{PolicyInput: rules.PolicyInput{Network: &rules.Network{
		Default: "deny", Allow: []rules.AllowEntry{{Host: "allowed.test"}, {Host: "loop.test"}, {Host: "meta.test"}, {Host: "rebind.test"},
			{Host: "paths.test", Methods: []string{"GET"}, Paths: []string{"/ok/*"}}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Capabilities.Egress || s.Capabilities.HTTPPolicy {
		t.Errorf("capabilities without a CA: egress %v http_policy %v", s.Capabilities.Egress, s.Capabilities.HTTPPolicy)
	}
	if s.Policy.Mode != "allowlist" || !strings.HasPrefix(strings.Join(s.Policy.AllowHosts, ","), "allowed.test,") {
		t.Errorf("policy in the record: %+v", s.Policy)
	}
	run := func(cmd string) *session.ExecResult {
		t.Helper()
		res, err := m.Exec(ctx, "", s.ID, session.ExecRequest{Command: cmd, TimeoutSeconds: 60})
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return res
	}
	cases := []struct{ cmd, want string }{
		{"curl -sS http://allowed.test/x", "hello from allowed GET /x"},
		{"curl -sSk https://allowed.test/tls", "hello over tls /tls"},
		{"curl -sS --noproxy '*' http://allowed.test/direct", "hello from allowed GET /direct"},
		{"curl -s -o /dev/null -w '%{http_code}' http://other.test/", "403"},
		{"curl -s -o /dev/null -w '%{http_code}' --noproxy '*' http://10.99.0.11/", "403"},
		{"getent hosts allowed.test", "10.99.0.10"},
		{"getent hosts other.test || echo nxdomain", "nxdomain"},
		// Allowed names that resolve to loopback or metadata: the
		// resolver gives no address and the proxy refuses them.
		{"getent hosts loop.test || echo none", "none"},
		{"curl -s -w ' %{http_code}' http://loop.test/", "403"},
		{"curl -s -w ' %{http_code}' http://meta.test/latest/meta-data/", "403"},
		{"curl -s -o /dev/null -w '%{http_code}' http://169.254.169.254/", "403"},
		// Method and path rules, on the canonical path.
		{"curl -sS http://paths.test/ok/x", "hello from allowed GET /ok/x"},
		{"curl -s -o /dev/null -w '%{http_code}' -X POST http://paths.test/ok/x", "403"},
		{"curl -s -o /dev/null -w '%{http_code}' --path-as-is http://paths.test/ok/../secret", "40"},
		{"curl -s -o /dev/null -w '%{http_code}' --path-as-is http://paths.test/ok/%2e%2e/secret", "40"},
		{"curl -s -o /dev/null -w '%{http_code}' --path-as-is http://paths.test//ok/x", "40"},
		{"curl -s -o /dev/null -w '%{http_code}' --path-as-is 'http://paths.test/ok\\..\\secret'", "40"},
		// A limited host over HTTPS cannot be judged without
		// interception, so it is refused (fail closed).
		{"curl -sk -o /dev/null -w '%{http_connect}' https://paths.test/ok/x; echo", "403"},
		// Subdomain exfiltration through DNS goes nowhere.
		{"getent hosts c2VjcmV0.other.test || echo nxdomain", "nxdomain"},
	}
	for _, c := range cases {
		if res := run(c.cmd); !strings.Contains(res.Stdout, c.want) {
			t.Errorf("%s: exit %d stdout %q stderr %q, want %q", c.cmd, res.ExitCode, res.Stdout, res.Stderr, c.want)
		}
	}
	if n := otherHits.Load(); n != 0 {
		t.Errorf("the refused upstream was reached %d times", n)
	}
	if n := z.asked("c2vjcmv0.other.test."); n != 0 {
		t.Errorf("an exfiltration name was resolved upstream %d times", n)
	}
	if n := z.asked("other.test."); n != 0 {
		t.Errorf("a denied name was resolved upstream %d times", n)
	}
	// DNS rebinding: the name answers a reachable address, then loopback,
	// alternately. Every request is resolved once by the proxy and the
	// address it checked is the one it dials: the loopback answers are
	// refused, never dialled.
	var codes []string
	for i := 0; i < 4; i++ {
		res := run("curl -s -o /dev/null -w '%{http_code}' --noproxy '' http://rebind.test/r")
		codes = append(codes, strings.TrimSpace(res.Stdout))
	}
	if c := strings.Join(codes, ","); strings.Count(c, "200") == 0 || strings.Count(c, "403") == 0 {
		t.Errorf("rebinding: codes %s, want both 200 (the reachable answer) and 403 (the loopback one)", c)
	}
	tn.dialed.Range(func(k, _ any) bool {
		if a := k.(netip.AddrPort); a.Addr().IsLoopback() {
			t.Errorf("the proxy dialled %s", a)
		}
		return true
	})
	// Smuggling: two Host headers, or a Host that is not the URI's host.
	smuggle := `python3 -c "
import socket,sys
for req in [b'GET http://allowed.test/ HTTP/1.1\\r\\nHost: allowed.test\\r\\nHost: other.test\\r\\n\\r\\n',
            b'GET http://allowed.test/ HTTP/1.1\\r\\nHost: other.test\\r\\n\\r\\n']:
    c=socket.create_connection(('127.0.0.1',3128)); c.sendall(req); print(c.recv(64).split(b'\\r\\n')[0].decode())
"`
	if res := run(smuggle); strings.Count(res.Stdout, " 400")+strings.Count(res.Stdout, " 403") != 2 {
		t.Errorf("request smuggling: %q %q", res.Stdout, res.Stderr)
	}
	// A '#' in the target: net/http would forward "/ok/x#/../secret"
	// (which servers resolve to /secret) while a path cut at the '#'
	// looks allowed. It is refused, and the upstream sees nothing.
	frag := `python3 -c "
import socket
c=socket.create_connection(('127.0.0.1',3128)); c.sendall(b'GET http://paths.test/ok/x#/../secret HTTP/1.1\\r\\nHost: paths.test\\r\\n\\r\\n')
print(c.recv(64).split(b'\\r\\n')[0].decode())
"`
	if res := run(frag); !strings.Contains(res.Stdout, " 400") {
		t.Errorf("a '#' in the request target: %q %q", res.Stdout, res.Stderr)
	}
	// IP literals in other spellings reach the proxy as written (curl
	// would rewrite them) and are checked as the addresses they are.
	spellings := `python3 -c "
import socket
for h in ['2130706433','0x7f000001','0177.0.0.1','127.1','[::ffff:127.0.0.1]','0xa9fea9fe','[64:ff9b::a9fe:a9fe]']:
    c=socket.create_connection(('127.0.0.1',3128)); c.sendall(('GET http://%s/ HTTP/1.1\\r\\nHost: %s\\r\\n\\r\\n'%(h,h)).encode())
    print(h, c.recv(64).split(b'\\r\\n')[0].decode())
"`
	if res := run(spellings); strings.Count(res.Stdout, " 403 ")+strings.Count(res.Stdout, " 400 ") != 7 {
		t.Errorf("IP spellings: %q %q", res.Stdout, res.Stderr)
	}
	// A CONNECT to the allowed host whose ClientHello names the
	// path-limited one (same server) is cut before the ClientHello is
	// relayed: TLS ends with the proxy's access_denied alert.
	sni := `python3 -c "
import socket,ssl
c=socket.create_connection(('127.0.0.1',3128)); c.sendall(b'CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n')
print(c.recv(64).split(b'\r\n')[0].decode())
x=ssl.create_default_context(); x.check_hostname=False; x.verify_mode=ssl.CERT_NONE
try:
    t=x.wrap_socket(c,server_hostname='paths.test'); t.sendall(b'GET /secret HTTP/1.1\r\nHost: paths.test\r\n\r\n'); print('served', t.recv(256))
except (ssl.SSLError, OSError) as e: print('refused', e)
"`
	if res := run(sni); !strings.Contains(res.Stdout, " 200 ") || !strings.Contains(res.Stdout, "refused") ||
		!strings.Contains(res.Stdout, "ACCESS_DENIED") || strings.Contains(res.Stdout, "served") {
		t.Errorf("a ClientHello naming paths.test through CONNECT allowed.test: %q %q", res.Stdout, res.Stderr)
	}
	// A DNS TXT query is refused (rcode 5) and not forwarded.
	txt := `python3 -c "
import socket,struct
q=struct.pack('>HHHHHH',0x1234,0x0100,1,0,0,0)+b'\\x07allowed\\x04test\\x00'+struct.pack('>HH',16,1)
u=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); u.settimeout(5); u.sendto(q,('127.0.0.1',53))
print('rcode', u.recv(512)[3] & 15)
"`
	if res := run(txt); !strings.Contains(res.Stdout, "rcode 5") {
		t.Errorf("DNS TXT: %q %q", res.Stdout, res.Stderr)
	}
	// UDP to an outside resolver, and TCP to another port, have no way
	// out.
	if res := run(`python3 -c "
import socket,sys
u=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); u.settimeout(2)
try:
    u.sendto(b'x'*16,('198.51.100.53',53)); u.recv(64); print('udp answered')
except OSError as e: print('udp failed', e)
try:
    socket.create_connection(('198.51.100.53',22),timeout=2); print('tcp22 connected')
except OSError as e: print('tcp22 failed', e)
"`); strings.Contains(res.Stdout, "answered") || strings.Contains(res.Stdout, "connected") {
		t.Errorf("a way out besides the proxy: %q %q", res.Stdout, res.Stderr)
	}
	// The sandbox's interfaces: with links, lo and the veth end eth0,
	// whose gateway (the egress namespace) takes nothing but the
	// redirected connections: neither its proxy listener dialled
	// straight, nor any other port, nor UDP; with the loopback redirect,
	// lo alone.
	if strings.HasPrefix(backend, procbox.Name) {
		res := run("ls /sys/class/net | tr '\\n' ' '")
		want := "eth0 lo "
		if !linksOn(backend) || eg.Links() != nil {
			want = "lo "
		}
		if res.Stdout != want {
			t.Errorf("the sandbox's interfaces: %q, want %q", res.Stdout, want)
		}
		if want == "eth0 lo " {
			if res := run(`python3 -c "
import socket,struct
gw=[l.split() for l in open('/proc/net/route') if l.split()[1]=='00000000'][0][2]
gw=socket.inet_ntoa(struct.pack('<I',int(gw,16)))
for port in (3129,22,80,443):
    try:
        socket.create_connection((gw,port),timeout=3); print('tcp',port,'connected')
    except OSError as e: print('tcp',port,'failed',e)
u=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); u.settimeout(2)
try:
    u.sendto(b'x'*16,(gw,53)); u.recv(64); print('udp answered')
except OSError as e: print('udp failed', e)
"`); strings.Contains(res.Stdout, "3129 connected") || strings.Contains(res.Stdout, "22 connected") ||
				strings.Contains(res.Stdout, "answered") || strings.Count(res.Stdout, "failed") < 3 {
				t.Errorf("the link's gateway: %q %q", res.Stdout, res.Stderr)
			}
		}
	}
	// The lower sandbox API's allow_hosts is the same policy.
	sb, err := sbxs.Create(ctx, "", sandboxes.SandboxRequest{AllowHosts: []string{"allowed.test"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sbxs.Delete(ctx, "", sb.ID)
	if !sb.Offline || strings.Join(sb.AllowHosts, ",") != "allowed.test" {
		t.Errorf("sandbox with allow_hosts: %+v", sb)
	}
	for cmd, want := range map[string]string{
		"curl -sS http://allowed.test/sbx":                          "hello from allowed GET /sbx",
		"curl -s -o /dev/null -w '%{http_code}' http://other.test/": "403",
	} {
		if res, err := sbxs.Process(ctx, "", sb.ID, sandboxes.ProcessRequest{Command: cmd}); err != nil || !strings.Contains(res.Stdout, want) {
			t.Errorf("sandbox %s: %+v %v, want %q", cmd, res, err, want)
		}
	}
	evs, err := m.Events(ctx, "", s.ID)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, e.Kind+":"+string(e.Data))
	}
	all := strings.Join(kinds, "\n")
	for _, want := range []string{"egress.allow", "egress.deny", "other.test", `(SNI) \"paths.test\" is not allowed.test`} {
		if !strings.Contains(all, want) {
			t.Errorf("ledger lacks %q:\n%s", want, all)
		}
	}
}
