package egress_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"paddock.dev/paddock/internal/testutil"
)

// upstreamNS is a test's network namespace standing for the internet: a
// veth pair joins it to the host's namespace, the host end 10.99.0.1/24,
// the namespace's end holding the addresses the test serves. Sockets the
// test opens in it (listen, listenPacket) live there whatever thread uses
// them later. It goes when the test ends (and with the test process in
// any case: nothing else holds it).
type upstreamNS struct {
	ns     netns.NsHandle
	prefix netip.Prefix
}

func newUpstreamNS(t *testing.T, addrs []netip.Addr) (*upstreamNS, error) {
	t.Helper()
	// The host end's 10.99.0.1/24 is a route in the host's namespace: two
	// of these at once (another test process) would take each other's
	// traffic, so one at a time on the machine.
	testutil.MachineLock(t, "upstreamns")
	u := &upstreamNS{prefix: netip.MustParsePrefix("10.99.0.0/24")}
	err := onOwnThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return err
		}
		var err error
		u.ns, err = netns.Get()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("namespace: %w", err)
	}
	var b [4]byte
	rand.Read(b[:])
	host := "pdkup" + hex.EncodeToString(b[:])
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: host}, PeerName: "eth0", PeerNamespace: netlink.NsFd(int(u.ns))}
	if err := netlink.LinkAdd(v); err != nil {
		u.ns.Close()
		return nil, fmt.Errorf("veth: %w", err)
	}
	t.Cleanup(func() {
		if l, err := netlink.LinkByName(host); err == nil {
			netlink.LinkDel(l)
		}
		u.ns.Close()
	})
	hl, err := netlink.LinkByName(host)
	if err != nil {
		return nil, err
	}
	if err := netlink.AddrAdd(hl, &netlink.Addr{IPNet: &net.IPNet{IP: net.IPv4(10, 99, 0, 1), Mask: net.CIDRMask(24, 32)}}); err != nil {
		return nil, fmt.Errorf("host address: %w", err)
	}
	if err := netlink.LinkSetUp(hl); err != nil {
		return nil, err
	}
	h, err := netlink.NewHandleAt(u.ns)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	nl, err := h.LinkByName("eth0")
	if err != nil {
		return nil, err
	}
	seen := map[netip.Addr]bool{}
	for _, a := range addrs {
		if seen[a] || !u.prefix.Contains(a) {
			continue
		}
		seen[a] = true
		if err := h.AddrAdd(nl, &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(24, 32)}}); err != nil {
			return nil, fmt.Errorf("address %s: %w", a, err)
		}
	}
	if err := h.LinkSetUp(nl); err != nil {
		return nil, err
	}
	if lo, err := h.LinkByName("lo"); err == nil {
		h.LinkSetUp(lo)
	}
	return u, nil
}

// onOwnThread runs fn on an OS thread that ends with it, so what fn does
// to the thread (its namespace) goes nowhere else.
func onOwnThread(fn func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked
		ch <- fn()
	}()
	return <-ch
}

func (u *upstreamNS) listen(a netip.AddrPort) (net.Listener, error) {
	var l net.Listener
	err := onOwnThread(func() error {
		if err := netns.Set(u.ns); err != nil {
			return err
		}
		var err error
		l, err = net.Listen("tcp", a.String())
		return err
	})
	return l, err
}

func (u *upstreamNS) listenPacket(a netip.AddrPort) (net.PacketConn, error) {
	var pc net.PacketConn
	err := onOwnThread(func() error {
		if err := netns.Set(u.ns); err != nil {
			return err
		}
		var err error
		pc, err = net.ListenPacket("udp", a.String())
		return err
	})
	return pc, err
}

// relay serves at on a listener in the namespace, handing each
// connection to the test's server at to.
func (u *upstreamNS) relay(t *testing.T, at netip.AddrPort, to string) {
	t.Helper()
	l, err := u.listen(at)
	if err != nil {
		t.Fatalf("upstream %s: %v", at, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	open := map[net.Conn]bool{}
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			open[c] = true
			mu.Unlock()
			wg.Go(func() {
				defer func() {
					c.Close()
					mu.Lock()
					delete(open, c)
					mu.Unlock()
				}()
				s, err := net.Dial("tcp", to)
				if err != nil {
					return
				}
				defer s.Close()
				done := make(chan struct{})
				go func() {
					io.Copy(s, c)
					s.(*net.TCPConn).CloseWrite()
					close(done)
				}()
				io.Copy(c, s)
				c.(*net.TCPConn).CloseWrite()
				<-done
			})
		}
	})
}
