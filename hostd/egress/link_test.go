package egress_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"paddock.dev/paddock/egress/rules"
	"paddock.dev/paddock/hostd/daemon/daemontest"
	hegress "paddock.dev/paddock/hostd/egress"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hypervisor/procbox"
	"paddock.dev/paddock/internal/testutil"
)

// TestLinksAcrossLifecycle follows a procbox sandbox's veth link through
// what gives it a new network namespace or a new daemon: a restore, a
// fork (each child its own link, on its own addresses) and a daemon
// restart (the new daemon's egress namespace, a new link for the adopted
// sandbox). After each, a program that ignores proxy settings still gets
// through the link to the allowed name, and to nothing else.
func TestLinksAcrossLifecycle(t *testing.T) {
	testutil.RequiresRoot(t)
	ctx := context.Background()
	allowed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s", r.URL.Path)
	}))
	defer allowed.Close()
	tn := newTestNet(t, map[string]string{"allowed.test.": "10.99.0.10", "other.test.": "10.99.0.11"},
		map[string]string{"10.99.0.10:80": allowed.Listener.Addr().String(), "10.99.0.11:80": allowed.Listener.Addr().String()})
	state := t.TempDir()
	// daemon is one run of a daemon on state (its backend adopts what an
	// earlier run left); keep: its Close leaves the sandboxes running.
	// It is not Run: the test calls Reattach itself.
	daemon := func(keep bool) *daemontest.Daemon {
		opts := []daemontest.Option{daemontest.WithStateDir(state), daemontest.WithoutRun()}
		if keep {
			opts = append(opts, daemontest.KeepSandboxes())
		}
		d := egressDaemon(t, procbox.Name, tn.egressConfig(), nil, engine(t), opts...)
		if err := d.Egress().Links(); err != nil {
			t.Skipf("no veth links here: %v", err)
		}
		return d
	}
	d := daemon(true)
	m := d.Manager()
	s, err := m.Create(ctx, "", session.CreateRequest{Policy: &session.PolicyRequest{PolicyInput: rules.PolicyInput{
		Network: &rules.Network{Default: "deny", Allow: []rules.AllowEntry{{Host: "allowed.test"}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	// check runs the probes in session id and returns its link's gateway.
	check := func(m *session.Manager, id, when string) string {
		t.Helper()
		res, err := m.Exec(ctx, "", id, session.ExecRequest{TimeoutSeconds: 60, Command: `
ls /sys/class/net | tr '\n' ' '; echo
awk '$2=="00000000"{print $3}' /proc/net/route
curl -sS --noproxy '*' http://allowed.test/` + when + `; echo
curl -s -o /dev/null -w '%{http_code}' --noproxy '*' http://10.99.0.11/; echo`})
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		lines := strings.Split(res.Stdout, "\n")
		if len(lines) < 4 || lines[0] != "eth0 lo " || lines[1] == "" || lines[2] != "hello /"+when || lines[3] != "403" {
			t.Fatalf("%s: %q %q, want eth0, a gateway, the allowed name's answer and 403 for another address", when, res.Stdout, res.Stderr)
		}
		return lines[1]
	}
	check(m, s.ID, "created")
	if _, err := m.Checkpoint(ctx, "", s.ID, -1, session.CheckpointRequest{Tag: "t1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Restore(ctx, "", s.ID, -1, session.RestoreRequest{Tag: "t1"}); err != nil {
		t.Fatal(err)
	}
	check(m, s.ID, "restored")
	kids, err := m.Fork(ctx, "", s.ID, -1, session.ForkRequest{Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	gws := map[string]bool{check(m, s.ID, "parent"): true}
	for i, k := range kids {
		gws[check(m, k.ID, fmt.Sprintf("child%d", i))] = true
	}
	if len(gws) != 3 {
		t.Errorf("parent and two children share link addresses: gateways %v", gws)
	}
	// A new daemon on the same state: the old one's egress namespace (and
	// with it every link) is gone; the adopted sandboxes get new ones.
	if err := d.Close(); err != nil { // leaves them running
		t.Fatal(err)
	}
	m = daemon(false).Manager()
	if adopted, lost := m.Reattach(ctx); adopted != 3 || lost != 0 {
		t.Fatalf("reattach: adopted %d, lost %d, want 3 and 0", adopted, lost)
	}
	check(m, s.ID, "adopted")
	check(m, kids[0].ID, "adopted-child")
}

// TestLinkHoldsAgainstRootInTheSandbox links a network namespace the test
// makes, and then acts in it with every capability (what a sandbox that
// broke out of its confinement into root of its own namespace could do):
// it changes its routes and dials the gateway, other ports, the upstream
// network and its resolver directly. Only web traffic gets out, and only
// through the proxy, which judges it: the host's egress namespace holds
// whatever the sandbox's namespace says.
func TestLinkHoldsAgainstRootInTheSandbox(t *testing.T) {
	testutil.RequiresRoot(t)
	allowed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s", r.URL.Path)
	}))
	defer allowed.Close()
	tn := newTestNet(t, map[string]string{"allowed.test.": "10.99.0.10"},
		map[string]string{"10.99.0.10:80": allowed.Listener.Addr().String(), "10.99.0.10:22": allowed.Listener.Addr().String()})
	if tn.ns == nil {
		t.Skip("no veth here")
	}
	eg := hegress.New(tn.egressConfig())
	defer eg.Shutdown()
	if err := eg.Links(); err != nil {
		t.Skipf("no veth links here: %v", err)
	}
	pol, err := rules.Compile(rules.PolicyInput{Network: &rules.Network{Default: "deny", Allow: []rules.AllowEntry{{Host: "allowed.test"}}}})
	if err != nil {
		t.Fatal(err)
	}
	const sb = "ses-rootinside0000"
	if err := eg.Open(sb, t.TempDir(), pol, nil); err != nil {
		t.Fatal(err)
	}
	var sbNS netns.NsHandle
	if err := onOwnThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return err
		}
		var err error
		sbNS, err = netns.Get()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer sbNS.Close()
	if err := eg.AttachLink(sb, fmt.Sprintf("/proc/self/fd/%d", int(sbNS))); err != nil {
		t.Fatal(err)
	}
	// inside runs fn on a thread in the sandbox's namespace, as root with
	// every capability.
	inside := func(fn func() string) string {
		var out string
		onOwnThread(func() error {
			if err := netns.Set(sbNS); err != nil {
				out = err.Error()
				return err
			}
			out = fn()
			return nil
		})
		return out
	}
	dial := func(addr string) string {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) || strings.Contains(err.Error(), "timeout") {
				return "timeout"
			}
			return "refused"
		}
		c.Close()
		return "connected"
	}
	get := func(addr, host string) string {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			return "dial: " + err.Error()
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "GET /x HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", host)
		b, _ := io.ReadAll(c)
		line, _, _ := strings.Cut(string(b), "\r\n")
		return line + " " + string(b[strings.LastIndex(string(b), "\n")+1:])
	}
	gw := inside(func() string {
		rs, err := netlink.RouteList(nil, netlink.FAMILY_V4)
		if err != nil {
			return ""
		}
		for _, r := range rs {
			if r.Gw != nil && (r.Dst == nil || r.Dst.IP.IsUnspecified()) {
				return r.Gw.String()
			}
		}
		return ""
	})
	if gw == "" {
		t.Fatal("the linked namespace has no default route")
	}
	// Web traffic to the allowed name goes through the proxy; another
	// Host, over the same address, is refused by it.
	if got := inside(func() string { return get("10.99.0.10:80", "allowed.test") }); !strings.Contains(got, "200") || !strings.Contains(got, "hello /x") {
		t.Errorf("allowed name: %q", got)
	}
	if got := inside(func() string { return get("10.99.0.10:80", "other.test") }); !strings.Contains(got, "403") {
		t.Errorf("another name: %q, want the proxy's 403", got)
	}
	// Through the gateway, nothing but the redirected ports passes, and
	// the rest is refused at once.
	for addr, want := range map[string]string{
		"10.99.0.10:22":            "refused", // served in the upstream network, never reached
		gw + ":3129":               "refused", // the proxy's listener, dialled straight
		gw + ":22":                 "refused",
		net.JoinHostPort(gw, "53"): "refused",
		"10.99.0.1:22":             "refused", // the host's end of the test's network
		"203.0.113.1:443":          "connected",
	} {
		if got := inside(func() string { return dial(addr) }); got != want {
			t.Errorf("root in the sandbox dialling %s: %s, want %s", addr, got, want)
		}
	}
	// Root routes the upstream network straight onto the link: nothing in
	// the egress namespace owns those addresses, so nothing answers.
	inside(func() string {
		l, err := netlink.LinkByName("eth0")
		if err != nil {
			return err.Error()
		}
		netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Scope: netlink.SCOPE_LINK, Dst: &net.IPNet{IP: net.IPv4(10, 99, 0, 0), Mask: net.CIDRMask(24, 32)}})
		return ""
	})
	for _, addr := range []string{"10.99.0.10:22", "10.99.0.1:22"} {
		if got := inside(func() string { return dial(addr) }); got == "connected" {
			t.Errorf("root in the sandbox, its own route, dialling %s: connected", addr)
		}
	}
	// UDP to the test's resolver, straight: no answer comes back.
	if got := inside(func() string {
		c, err := net.Dial("udp", "10.99.0.53:53")
		if err != nil {
			return "refused"
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Second))
		c.Write([]byte("\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07allowed\x04test\x00\x00\x01\x00\x01"))
		if _, err := c.Read(make([]byte, 512)); err != nil {
			return "no answer"
		}
		return "answered"
	}); got == "answered" {
		t.Error("root in the sandbox reached the resolver over UDP")
	}
}
