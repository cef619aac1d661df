package egressfwd

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"paddock.dev/paddock/guest/api"
)

// inNewNetns runs fn on a thread in a fresh network namespace (with lo
// up). The thread is never given back to the scheduler.
func inNewNetns(t *testing.T, fn func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: makes a network namespace")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			t.Errorf("unshare: %v", err)
			return
		}
		lo, err := netlink.LinkByName("lo")
		if err == nil {
			err = netlink.LinkSetUp(lo)
		}
		if err != nil {
			t.Errorf("lo up: %v", err)
			return
		}
		fn()
	}()
	<-done
}

// hostSockets serves the three sockets the host would: the proxy echoes
// with a prefix, DNS answers each framed query with itself reversed, and
// redirect returns the header line it got.
func hostSockets(t *testing.T, dir string) {
	t.Helper()
	serve := func(name string, h func(net.Conn)) {
		l, err := net.Listen("unix", filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() { defer c.Close(); h(c) }()
			}
		}()
	}
	serve(api.EgressProxySocket, func(c net.Conn) {
		b, _ := bufio.NewReader(c).ReadString('\n')
		io.WriteString(c, "proxied:"+b)
	})
	serve(api.EgressDNSSocket, func(c net.Conn) {
		for {
			var l [2]byte
			if _, err := io.ReadFull(c, l[:]); err != nil {
				return
			}
			q := make([]byte, binary.BigEndian.Uint16(l[:]))
			if _, err := io.ReadFull(c, q); err != nil {
				return
			}
			for i, j := 0, len(q)-1; i < j; i, j = i+1, j-1 {
				q[i], q[j] = q[j], q[i]
			}
			c.Write(append(l[:], q...))
		}
	})
	serve(api.EgressRedirectSocket, func(c net.Conn) {
		line, _ := bufio.NewReader(c).ReadString('\n')
		io.WriteString(c, line)
	})
}

func TestForwarders(t *testing.T) {
	dir := t.TempDir()
	hostSockets(t, dir)
	inNewNetns(t, func() {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		f, err := Start(ctx, Config{Dir: dir})
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		c, err := net.Dial("tcp", api.ProxyAddr)
		if err != nil {
			t.Error(err)
			return
		}
		io.WriteString(c, "hello\n")
		got, _ := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if got != "proxied:hello\n" {
			t.Errorf("proxy forwarder: %q", got)
		}
		u, err := net.Dial("udp", api.DNSAddr)
		if err != nil {
			t.Error(err)
			return
		}
		q := []byte("0123456789abcdef")
		u.Write(q)
		u.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 512)
		n, err := u.Read(buf)
		if err != nil || string(buf[:n]) != "fedcba9876543210" {
			t.Errorf("dns over udp: %q %v", buf[:n], err)
		}
		u.Close()
	})
}

// TestTransparent: in a namespace set up as a sandbox's, TCP to ports 80
// and 443 of any address reaches the redirect socket with its original
// destination; other TCP ports, UDP to outside (DNS included) and IPv6
// fail.
func TestTransparent(t *testing.T) {
	dir := t.TempDir()
	hostSockets(t, dir)
	inNewNetns(t, func() {
		if err := SetupTransparent(); err != nil {
			t.Error(err)
			return
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		f, err := Start(ctx, Config{Dir: dir})
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		for _, dst := range []string{"203.0.113.7:80", "198.51.100.9:443"} {
			c, err := net.DialTimeout("tcp", dst, 5*time.Second)
			if err != nil {
				t.Errorf("%s: %v", dst, err)
				continue
			}
			c.SetDeadline(time.Now().Add(5 * time.Second))
			got, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if got != api.RedirectHeader+" "+dst+"\n" {
				t.Errorf("%s arrived as %q", dst, got)
			}
		}
		start := time.Now()
		if c, err := net.DialTimeout("tcp", "203.0.113.7:22", 5*time.Second); err == nil {
			c.Close()
			t.Error("TCP to port 22 outside was not refused")
		} else if time.Since(start) > 2*time.Second {
			t.Errorf("TCP to port 22 was dropped, not refused (%v): %v", time.Since(start), err)
		}
		if c, err := net.DialTimeout("tcp", "[2001:db8::1]:80", 2*time.Second); err == nil {
			c.Close()
			t.Error("IPv6 has a way out")
		}
		u, err := net.Dial("udp", "203.0.113.7:53")
		if err == nil {
			_, werr := u.Write([]byte("0123456789abcdef"))
			u.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			_, rerr := u.Read(make([]byte, 64))
			if werr == nil && rerr == nil {
				t.Error("UDP to an outside DNS server got an answer")
			}
			if werr != nil && !errors.Is(werr, unix.EPERM) {
				t.Logf("udp write: %v", werr)
			}
			u.Close()
		}
		// The loopback DNS forwarder still works.
		u2, err := net.Dial("udp", api.DNSAddr)
		if err != nil {
			t.Error(err)
			return
		}
		defer u2.Close()
		u2.Write([]byte("0123456789abcdef"))
		u2.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 64)
		if n, err := u2.Read(buf); err != nil || !strings.HasPrefix(string(buf[:n]), "fedcba") {
			t.Errorf("loopback dns in transparent mode: %q %v", buf[:n], err)
		}
	})
}
