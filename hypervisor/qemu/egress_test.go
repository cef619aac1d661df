package qemu

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/hypervisor/vmkit"
	"paddock.dev/paddock/internal/testutil"
	"paddock.dev/paddock/internal/testutil/egressstub"
)

// egressStandIns serves stand-ins for the host's egress sockets in dir,
// answering as who (egressstub).
func egressStandIns(t *testing.T, dir, who string) { egressstub.Serve(t, dir, who) }

// egressBackend is a qemu backend on the mini image, or a skip saying why
// VMs cannot run here.
func egressBackend(t *testing.T) *Backend {
	t.Helper()
	if testing.Short() {
		t.Skip("boots VMs under TCG")
	}
	testutil.RequiresRoot(t)
	b, err := New(hypervisor.Config{StateDir: t.TempDir(), GuestBinary: testutil.GuestBinary(t),
		ImagesDir: testutil.MiniImages(t), Options: map[string]string{"cache": vmCache(t)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close backend: %v", err)
		}
	})
	if c := b.Capabilities(); !c.Available {
		t.Skipf("the qemu backend cannot run here: %s", c.Reason)
	}
	return b
}

func vmExec(t *testing.T, c *client.Client, line string) *api.ExecResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := c.Exec(ctx, api.ExecRequest{Command: api.Command{Shell: line, TimeoutSeconds: 60}})
	if err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	return res
}

func vmMustExec(t *testing.T, c *client.Client, line string) string {
	t.Helper()
	res := vmExec(t, c, line)
	if res.ExitCode != 0 {
		t.Fatalf("%q: exit %d: %s", line, res.ExitCode, res.Stderr)
	}
	return string(res.Stdout)
}

func vmClient(m hypervisor.Machine) *client.Client {
	return client.New(func(ctx context.Context) (net.Conn, error) { return m.Dial(ctx) })
}

// TestEgressModes boots VMs (mini image, TCG) in proxy and transparent
// mode against stand-in egress sockets and checks, as the guest user: the
// agent channel the egress rides on is out of reach, the proxy and
// resolver answer on loopback, the environment and resolv.conf point
// there, and only transparent mode carries a connection to an outside
// address (to the redirect socket, naming where it was going; other ports
// refused). A fork child speaks on its own sockets (the sibling directory
// named after it), never its parent's: in proxy mode from a disk
// checkpoint (a fresh boot), in transparent mode from a memory checkpoint
// (the child keeps the rules PID 1 installed; nothing installs them
// twice), and the parent restored from that checkpoint still redirects.
func TestEgressModes(t *testing.T) {
	b := egressBackend(t)
	ctx := context.Background()
	root := t.TempDir()
	for _, mode := range []string{hypervisor.NetworkProxy, hypervisor.NetworkTransparent} {
		if m, err := b.Create(ctx, hypervisor.MachineSpec{Image: testutil.MiniImageName, Network: mode}); err == nil {
			m.Stop(ctx)
			t.Errorf("%s mode without an egress directory was accepted", mode)
		}
	}
	// bash, for /dev/tcp and /dev/udp (the image's sh is dash).
	bash := func(script string) string { return "bash -c '" + strings.ReplaceAll(script, "'", `'\''`) + "'" }
	httpGet := `exec 3<>/dev/tcp/%s; printf "GET %s HTTP/1.0\r\nHost: x\r\n\r\n" >&3; timeout 5 cat <&3`
	for _, mode := range []string{hypervisor.NetworkProxy, hypervisor.NetworkTransparent} {
		t.Run(mode, func(t *testing.T) {
			dir := filepath.Join(root, mode)
			start := time.Now()
			cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
			defer cancel()
			m, err := b.Create(cctx, hypervisor.MachineSpec{Image: testutil.MiniImageName, Network: mode, EgressDir: dir})
			if errors.Is(err, vmkit.ErrNoKernel) {
				t.Skipf("no guest kernel: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer m.Stop(ctx)
			t.Logf("%s: boot %v", mode, time.Since(start).Round(time.Millisecond))
			egressStandIns(t, dir, "parent")
			c := vmClient(m)

			if res := vmExec(t, c, "ls /.paddock/dev"); res.ExitCode == 0 {
				t.Errorf("the guest user reaches the agent channel's devices: %s", res.Stdout)
			}
			if out := vmMustExec(t, c, "echo $http_proxy; cat /etc/resolv.conf"); !strings.Contains(out, "http://127.0.0.1:3128") || !strings.Contains(out, "nameserver 127.0.0.1") {
				t.Errorf("environment and resolver: %q", out)
			}
			if out := vmMustExec(t, c, bash(fmt.Sprintf(httpGet, "127.0.0.1/3128", "http://example.test/x"))); !strings.Contains(out, "parent-proxy GET http://example.test/x") {
				t.Errorf("through the proxy: %q", out)
			}
			// A 12-byte "query" over UDP comes back from the host resolver.
			if out := vmMustExec(t, c, bash(`exec 3<>/dev/udp/127.0.0.1/53; printf abcdefghijkl >&3; timeout 5 head -c 12 <&3`)); out != "ABCDEFGHIJKL" {
				t.Errorf("through the resolver: %q", out)
			}
			outside := bash(fmt.Sprintf(httpGet, "203.0.113.7/80", "/"))
			res := vmExec(t, c, outside)
			switch mode {
			case hypervisor.NetworkProxy:
				if res.ExitCode == 0 {
					t.Errorf("proxy mode reached an outside address directly: %q", res.Stdout)
				}
			case hypervisor.NetworkTransparent:
				if !strings.Contains(string(res.Stdout), "parent PADDOCK-REDIRECT 203.0.113.7:80") {
					t.Errorf("transparent mode: exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
				}
				if res := vmExec(t, c, bash(fmt.Sprintf(httpGet, "198.51.100.9/443", "/"))); !strings.Contains(string(res.Stdout), "parent PADDOCK-REDIRECT 198.51.100.9:443") {
					t.Errorf("transparent mode, port 443: %q", res.Stdout)
				}
				if res := vmExec(t, c, bash("timeout 10 bash -c \"exec 3<>/dev/tcp/203.0.113.7/22\"")); res.ExitCode == 0 {
					t.Error("transparent mode let TCP to port 22 out")
				}
			}
			// A fork child speaks on its own sockets, in the sibling
			// directory named after it: nothing until the host serves
			// them, and never through the parent's.
			memory := mode == hypervisor.NetworkTransparent
			snap, err := m.Checkpoint(cctx, "e", memory)
			if err != nil {
				t.Fatal(err)
			}
			fstart := time.Now()
			kids, err := m.Fork(cctx, snap, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer kids[0].Stop(ctx)
			t.Logf("%s: fork (memory %v) %v", mode, memory, time.Since(fstart).Round(time.Millisecond))
			kc := vmClient(kids[0])
			get := bash(fmt.Sprintf(httpGet, "127.0.0.1/3128", "http://child.test/"))
			if res := vmExec(t, kc, get); strings.Contains(string(res.Stdout), "-proxy") {
				t.Errorf("a fork child reached a proxy before its host served one: %q", res.Stdout)
			}
			egressStandIns(t, filepath.Join(filepath.Dir(dir), kids[0].ID()), "child")
			if out := vmMustExec(t, kc, get); !strings.Contains(out, "child-proxy GET http://child.test/") {
				t.Errorf("the child's own proxy: %q", out)
			}
			if mode == hypervisor.NetworkTransparent {
				if res := vmExec(t, kc, outside); !strings.Contains(string(res.Stdout), "child PADDOCK-REDIRECT 203.0.113.7:80") {
					t.Errorf("the child's redirect: exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
				}
				if res := vmExec(t, kc, bash("timeout 10 bash -c \"exec 3<>/dev/tcp/203.0.113.7/22\"")); res.ExitCode == 0 {
					t.Error("the child let TCP to port 22 out")
				}
				rstart := time.Now()
				if err := m.Restore(cctx, snap); err != nil {
					t.Fatal(err)
				}
				t.Logf("%s: restore %v", mode, time.Since(rstart).Round(time.Millisecond))
				if res := vmExec(t, c, outside); !strings.Contains(string(res.Stdout), "parent PADDOCK-REDIRECT 203.0.113.7:80") {
					t.Errorf("the restored parent's redirect: exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
				}
			}
		})
	}
}
