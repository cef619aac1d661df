package egress

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"syscall"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"paddock.dev/paddock/guest/egressfwd"
)

// Links: a sandbox's way out as a veth pair (Config.Links).
//
// The host end of every pair sits in one network namespace of the
// daemon's own, the egress namespace, which has nothing else: no route
// to the host's networks or services, no forwarding. Its nftables
// redirect TCP to ports 80 and 443 from any sandbox to linkPort on the
// address of the interface it came in on, and refuse everything else at
// once (a TCP reset, an ICMP error). Each sandbox's link has its own
// listener there, bound to its interface, so the proxy knows who speaks
// from the listener a connection reached, never from an address, and
// takes the destination the sandbox dialled from the connection's
// SO_ORIGINAL_DST. Only redirected connections reach a listener: one
// dialled straight at it is refused. The namespace lives as long as the
// daemon holds it; when the daemon ends, it goes, and every host end,
// and so every sandbox end, with it (a new daemon makes new links for
// the sandboxes it adopts).

// linkPort is the port of each link's listener in the egress namespace;
// refusedPort is one nothing there listens on.
const (
	linkPort    = 3129
	refusedPort = 1
)

// linkNet holds every link's /30: the host end is its first address, the
// sandbox end the second.
var linkNet = netip.MustParsePrefix("10.233.0.0/16")

// linkPrefix is the start of every host end's name.
const linkPrefix = "pdk"

// linkNS is the egress namespace.
type linkNS struct {
	ns netns.NsHandle
	h  *netlink.Handle
}

// link is one sandbox's veth pair.
type link struct {
	name   string // the host end
	hostIP netip.Addr
	l      net.Listener // its listener, while served
}

// newLinkNS makes the egress namespace and its rules. The thread that
// makes it is left in it and ends with its goroutine, so no other code
// ever runs there.
func newLinkNS() (*linkNS, error) {
	var ns netns.NsHandle
	err := onThrowawayThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("egress namespace: %w", err)
		}
		var err error
		ns, err = netns.Get()
		return err
	})
	if err != nil {
		return nil, err
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		ns.Close()
		return nil, fmt.Errorf("egress namespace: netlink: %w", err)
	}
	ln := &linkNS{ns: ns, h: h}
	if lo, err := h.LinkByName("lo"); err == nil {
		h.LinkSetUp(lo)
	}
	if err := ln.installRules(); err != nil {
		ln.close()
		return nil, err
	}
	return ln, nil
}

func (ln *linkNS) close() {
	ln.h.Close()
	ln.ns.Close()
}

// probe makes a veth pair in the namespace and removes it: whether this
// kernel can make links at all.
func (ln *linkNS) probe() error {
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: linkPrefix + "probe0"}, PeerName: linkPrefix + "probe1"}
	if err := ln.h.LinkAdd(v); err != nil {
		return fmt.Errorf("this kernel cannot make a veth pair: %w", err)
	}
	return ln.h.LinkDel(v)
}

// installRules: redirect TCP to 80 and 443 arriving on any interface but
// lo to linkPort; accept what lo and the redirected connections bring;
// refuse the rest; forward nothing.
func (ln *linkNS) installRules() error {
	c, err := nftables.New(nftables.WithNetNSFd(int(ln.ns)))
	if err != nil {
		return fmt.Errorf("egress namespace: nftables: %w", err)
	}
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: "paddock"})
	notLo := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: ifname("lo")},
	}
	nat := c.AddChain(&nftables.Chain{Name: "redirect", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityNATDest})
	for _, port := range []uint16{80, 443} {
		c.AddRule(&nftables.Rule{Table: t, Chain: nat, Exprs: append(append([]expr.Any{}, notLo...),
			&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV4}},
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(port)},
			&expr.Immediate{Register: 1, Data: binaryutil.BigEndian.PutUint16(linkPort)},
			&expr.Redir{RegisterProtoMin: 1},
		)})
	}
	// Other TCP and UDP go to a port nothing listens on, so they are
	// refused at once (a reset, an ICMP "port unreachable") instead of
	// left to time out: the namespace forwards nothing, so what is not
	// for it would otherwise vanish without an answer.
	for _, proto := range []byte{unix.IPPROTO_TCP, unix.IPPROTO_UDP} {
		c.AddRule(&nftables.Rule{Table: t, Chain: nat, Exprs: append(append([]expr.Any{}, notLo...),
			&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV4}},
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
			&expr.Immediate{Register: 1, Data: binaryutil.BigEndian.PutUint16(refusedPort)},
			&expr.Redir{RegisterProtoMin: 1},
		)})
	}
	accept := &expr.Verdict{Kind: expr.VerdictAccept}
	in := c.AddChain(&nftables.Chain{Name: "in", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter})
	c.AddRule(&nftables.Rule{Table: t, Chain: in, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname("lo")},
		accept,
	}})
	// A redirected connection (its packets carry the DNAT status the
	// redirect gave the flow).
	c.AddRule(&nftables.Rule{Table: t, Chain: in, Exprs: []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATUS},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(ipsDstNAT), Xor: binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(0)},
		accept,
	}})
	egressfwd.AddRefusals(c, t, in)
	// Nothing is forwarded (refused at once, so a program fails fast
	// rather than waiting; the policy drops what a refusal cannot answer).
	drop := nftables.ChainPolicyDrop
	fwd := c.AddChain(&nftables.Chain{Name: "forward", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &drop})
	egressfwd.AddRefusals(c, t, fwd)
	if err := c.Flush(); err != nil {
		return fmt.Errorf("egress namespace: install nftables rules: %w", err)
	}
	return nil
}

// ifname is an interface name as nftables compares it (16 bytes, NUL
// padded).
func ifname(n string) []byte {
	b := make([]byte, 16)
	copy(b, n)
	return b
}

// linkName is the host end's name for a sandbox: the prefix and 12 hex
// digits of a digest of its id (interface names have 15 characters).
func linkName(sandbox string) string {
	d := sha256.Sum256([]byte(sandbox))
	return linkPrefix + hex.EncodeToString(d[:6])
}

// freePrefix picks a /30 of linkNet that no link in the namespace uses,
// starting from one the sandbox's id picks.
func (ln *linkNS) freePrefix(sandbox string) (netip.Prefix, error) {
	used := map[netip.Addr]bool{}
	addrs, err := ln.h.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("egress namespace: addresses: %w", err)
	}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP.To4()); ok {
			p, _ := ip.Prefix(30)
			used[p.Addr()] = true
		}
	}
	const n = 1 << (32 - 16 - 2) // /30s in the /16
	d := sha256.Sum256([]byte(sandbox))
	start := binary.BigEndian.Uint32(d[:4]) % n
	base := binary.BigEndian.Uint32(linkNet.Addr().AsSlice())
	for i := range uint32(n) {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], base+((start+i)%n)*4)
		a := netip.AddrFrom4(b)
		if !used[a] {
			return netip.PrefixFrom(a, 30), nil
		}
	}
	return netip.Prefix{}, errors.New("egress namespace: every link address is in use")
}

// listen makes a listener on addr:linkPort in the namespace, bound to
// the interface dev, so that only connections that came in on it reach
// it. The thread that makes it enters the namespace and ends with its
// goroutine.
func (ln *linkNS) listen(dev string, addr netip.Addr) (net.Listener, error) {
	var l net.Listener
	err := onThrowawayThread(func() error {
		if err := netns.Set(ln.ns); err != nil {
			return err
		}
		lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) {
				serr = unix.SetsockoptString(int(fd), unix.SOL_SOCKET, unix.SO_BINDTODEVICE, dev)
			}); err != nil {
				return err
			}
			return serr
		}}
		var err error
		l, err = lc.Listen(context.Background(), "tcp4", netip.AddrPortFrom(addr, linkPort).String())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("link listener on %s: %w", dev, err)
	}
	return l, nil
}

// onThrowawayThread runs fn on an OS thread of its own that ends with it
// (the goroutine exits still locked), so whatever fn does to the thread,
// such as entering another network namespace, stays with that thread.
func onThrowawayThread(fn func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked
		ch <- fn()
	}()
	return <-ch
}

// originalDst is where a redirected connection was going.
func originalDst(c net.Conn) (netip.AddrPort, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return netip.AddrPort{}, errors.New("not a socket")
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var dst netip.AddrPort
	var gerr error
	if err := rc.Control(func(fd uintptr) {
		// struct sockaddr_in, read through the 16-byte option type.
		m, err := unix.GetsockoptIPv6Mreq(int(fd), unix.SOL_IP, unix.SO_ORIGINAL_DST)
		if err != nil {
			gerr = err
			return
		}
		b := m.Multiaddr
		dst = netip.AddrPortFrom(netip.AddrFrom4([4]byte{b[4], b[5], b[6], b[7]}), binary.BigEndian.Uint16(b[2:4]))
	}); err != nil {
		return netip.AddrPort{}, err
	}
	if gerr != nil {
		return netip.AddrPort{}, fmt.Errorf("SO_ORIGINAL_DST: %w", gerr)
	}
	return dst, nil
}

// Links reports whether sandboxes get veth links (AttachLink), and if
// not, why: Config.Links is off, or the kernel cannot make them.
func (h *Host) Links() error {
	if !h.cfg.Links {
		return errors.New("links are off")
	}
	h.opening.Lock()
	defer h.opening.Unlock()
	_, err := h.linkNS()
	return err
}

// errShutDown: the host was shut down, its egress namespace with it.
var errShutDown = errors.New("the daemon's egress is shut down")

// linkNS makes the egress namespace on first use, and probes it. Called
// with h.opening held (Shutdown closes the namespace under it).
func (h *Host) linkNS() (*linkNS, error) {
	if h.shut {
		return nil, errShutDown
	}
	h.lnsOnce.Do(func() {
		ln, err := newLinkNS()
		if err == nil {
			if err = ln.probe(); err != nil {
				ln.close()
			}
		}
		h.lns, h.lnsErr = ln, err
		if err != nil {
			h.lns = nil
			h.log.Warn("egress: sandboxes cannot have veth links; they keep the loopback redirect", "err", err)
		}
	})
	return h.lns, h.lnsErr
}

// AttachLink gives the sandbox whose network namespace nsPath names a
// veth link to the egress namespace in place of SetupTransparent's
// loopback redirect (guest/egressfwd.LinkTransparent), and serves it
// under the sandbox's policy once the sandbox is open (now, if it is). A
// link the sandbox had goes first: a restored sandbox has a new
// namespace. The backend calls it once the sandbox's init is up
// (hypervisor.NetAttacher).
func (h *Host) AttachLink(sandbox, nsPath string) error {
	h.opening.Lock()
	defer h.opening.Unlock()
	ln, err := h.linkNS()
	if err != nil {
		return err
	}
	h.dropLink(sandbox)
	sfd, err := netns.GetFromPath(nsPath)
	if err != nil {
		return fmt.Errorf("link: the sandbox's namespace: %w", err)
	}
	defer sfd.Close()
	// An eth0 the sandbox still has is the end of a link that has not
	// quite gone (an earlier daemon's namespace is torn down in the
	// background): it goes now, and its other end with it.
	if sh, err := netlink.NewHandleAt(sfd); err == nil {
		if old, err := sh.LinkByName("eth0"); err == nil {
			sh.LinkDel(old)
		}
		sh.Close()
	}
	p, err := ln.freePrefix(sandbox)
	if err != nil {
		return err
	}
	hostIP := p.Addr().Next()
	sbIP := hostIP.Next()
	name := linkName(sandbox)
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: "eth0", PeerNamespace: netlink.NsFd(int(sfd))}
	if err := ln.h.LinkAdd(v); err != nil {
		return fmt.Errorf("link: veth pair: %w", err)
	}
	lk := &link{name: name, hostIP: hostIP}
	fail := func(err error) error {
		ln.h.LinkDel(v) // the sandbox end goes with it
		return err
	}
	host, err := ln.h.LinkByName(name)
	if err != nil {
		return fail(fmt.Errorf("link: %w", err))
	}
	if err := ln.h.AddrAdd(host, &netlink.Addr{IPNet: &net.IPNet{IP: hostIP.AsSlice(), Mask: net.CIDRMask(30, 32)}}); err != nil {
		return fail(fmt.Errorf("link: host address: %w", err))
	}
	if err := ln.h.LinkSetUp(host); err != nil {
		return fail(fmt.Errorf("link: host end up: %w", err))
	}
	h.mu.Lock()
	h.links[sandbox] = lk
	b := h.boxes[sandbox]
	h.mu.Unlock()
	if b != nil {
		if err := h.serveLink(sandbox, b, lk); err != nil {
			h.dropLink(sandbox)
			return err
		}
	}
	if err := egressfwd.LinkTransparent(int(sfd), "eth0", &net.IPNet{IP: sbIP.AsSlice(), Mask: net.CIDRMask(30, 32)}, hostIP.AsSlice()); err != nil {
		h.dropLink(sandbox)
		return err
	}
	h.log.Debug("egress: sandbox linked", "sandbox", sandbox, "link", name, "host", hostIP, "sandbox_addr", sbIP)
	return nil
}

// serveLink listens on the link and serves it under b's policy. Called
// with h.opening held.
func (h *Host) serveLink(sandbox string, b *box, lk *link) error {
	l, err := h.lns.listen(lk.name, lk.hostIP)
	if err != nil {
		return err
	}
	h.mu.Lock()
	lk.l = l
	h.mu.Unlock()
	b.listeners = append(b.listeners, l)
	pol := b.pol
	go h.serve("link", sandbox, func() error { return h.proxy.ServeOriginalDst(l, sandbox, pol, originalDst) })
	return nil
}

// dropLink removes the sandbox's link, if it has one. Called with
// h.opening held.
func (h *Host) dropLink(sandbox string) {
	h.mu.Lock()
	lk := h.links[sandbox]
	delete(h.links, sandbox)
	h.mu.Unlock()
	if lk == nil {
		return
	}
	if lk.l != nil {
		lk.l.Close()
	}
	if l, err := h.lns.h.LinkByName(lk.name); err == nil {
		h.lns.h.LinkDel(l)
	}
}

// linkState is the egress namespace, made on first use.
type linkState struct {
	lnsOnce sync.Once
	lns     *linkNS
	lnsErr  error
	shut    bool // Shutdown ran: no more links
	links   map[string]*link
}

// ipsDstNAT is conntrack's IPS_DST_NAT status bit (linux/netfilter/
// nf_conntrack_common.h): the flow's destination was rewritten.
const ipsDstNAT = 1 << 5
