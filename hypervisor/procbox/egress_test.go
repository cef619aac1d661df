package procbox

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/internal/testutil"
	"paddock.dev/paddock/internal/testutil/egressstub"
)

// egressSockets serves stand-ins for the host's egress sockets in a new
// directory (egressstub, as "via").
func egressSockets(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	egressstub.Serve(t, dir, "via")
	return dir
}

// TestEgressModes boots sandboxes in proxy and transparent mode against
// stand-in egress sockets and checks, as the guest user: the sockets are
// out of reach, the proxy and resolver answer on loopback, the
// environment and resolv.conf point there, and only transparent mode
// carries a connection to an outside address (to the redirect socket,
// naming where it was going).
func TestEgressModes(t *testing.T) {
	testutil.RequiresRoot(t)
	ctx := context.Background()
	dir := egressSockets(t)
	b, err := New(hypervisor.Config{StateDir: t.TempDir(), GuestBinary: testutil.GuestBinary(t), ImagesDir: testutil.MiniImages(t), Options: map[string]string{"store": StoreTmpfs}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Create(ctx, hypervisor.MachineSpec{Image: "mini", Network: hypervisor.NetworkProxy}); err == nil {
		t.Error("proxy mode without an egress directory was accepted")
	}
	// bash, for /dev/tcp and /dev/udp (the image's sh is dash).
	bash := func(script string) string { return "bash -c '" + strings.ReplaceAll(script, "'", `'\''`) + "'" }
	httpGet := `exec 3<>/dev/tcp/%s; printf "GET %s HTTP/1.0\r\nHost: x\r\n\r\n" >&3; timeout 5 cat <&3`
	for _, mode := range []string{hypervisor.NetworkProxy, hypervisor.NetworkTransparent} {
		t.Run(mode, func(t *testing.T) {
			m, err := b.Create(ctx, hypervisor.MachineSpec{Image: "mini", Network: mode, EgressDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Stop(ctx)
			c := clientFor(m)
			if res := run(t, c, "ls /run/paddock/egress"); res.ExitCode == 0 {
				t.Errorf("the guest user reaches the egress sockets: %s", res.Stdout)
			}
			if out := mustRun(t, c, "echo $http_proxy; cat /etc/resolv.conf"); !strings.Contains(out, "http://127.0.0.1:3128") || !strings.Contains(out, "nameserver 127.0.0.1") {
				t.Errorf("environment and resolver: %q", out)
			}
			if out := mustRun(t, c, bash(fmt.Sprintf(httpGet, "127.0.0.1/3128", "http://example.test/x"))); !strings.Contains(out, "via-proxy GET http://example.test/x") {
				t.Errorf("through the proxy: %q", out)
			}
			// A 12-byte "query" over UDP comes back from the host resolver.
			if out := mustRun(t, c, bash(`exec 3<>/dev/udp/127.0.0.1/53; printf abcdefghijkl >&3; timeout 5 head -c 12 <&3`)); out != "ABCDEFGHIJKL" {
				t.Errorf("through the resolver: %q", out)
			}
			if mode == hypervisor.NetworkProxy {
				// A fork child speaks on its own sockets, in the sibling
				// directory named after it: nothing until the host
				// serves them, and never through the parent's.
				snap, err := m.Checkpoint(ctx, "e", false)
				if err != nil {
					t.Fatal(err)
				}
				kids, err := m.Fork(ctx, snap, 1)
				if err != nil {
					t.Fatal(err)
				}
				defer kids[0].Stop(ctx)
				kc := clientFor(kids[0])
				get := bash(fmt.Sprintf(httpGet, "127.0.0.1/3128", "http://child.test/"))
				if res := run(t, kc, get); strings.Contains(string(res.Stdout), "via-proxy") {
					t.Errorf("a fork child reached its parent's proxy: %q", res.Stdout)
				}
				kidDir := filepath.Join(filepath.Dir(dir), kids[0].ID())
				kl, err := net.Listen("unix", filepath.Join(kidDir, api.EgressProxySocket))
				if err != nil {
					t.Fatalf("the child's egress directory: %v", err)
				}
				defer kl.Close()
				go http.Serve(kl, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "child-proxy %s\n", r.URL) }))
				if out := mustRun(t, kc, get); !strings.Contains(out, "child-proxy http://child.test/") {
					t.Errorf("the child's own proxy: %q", out)
				}
			}
			res := run(t, c, bash(fmt.Sprintf(httpGet, "203.0.113.7/80", "/")))
			switch mode {
			case hypervisor.NetworkProxy:
				if res.ExitCode == 0 {
					t.Errorf("proxy mode reached an outside address directly: %q", res.Stdout)
				}
			case hypervisor.NetworkTransparent:
				if !strings.Contains(string(res.Stdout), "PADDOCK-REDIRECT 203.0.113.7:80") {
					t.Errorf("transparent mode: %+v", res)
				}
				if res := run(t, c, bash("exec 3<>/dev/tcp/203.0.113.7/22")); res.ExitCode == 0 {
					t.Error("transparent mode let TCP to port 22 out")
				}
			}
		})
	}
}
