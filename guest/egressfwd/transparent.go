package egressfwd

import (
	"errors"
	"fmt"
	"net"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"paddock.dev/paddock/guest/api"
)

// transparentAddr is the sandbox's own IPv4 address for the default
// route: it sits on lo, so the route leads nowhere but back into the
// namespace, where nftables redirects or refuses every packet.
var transparentAddr = &net.IPNet{IP: net.IPv4(10, 255, 255, 2), Mask: net.CIDRMask(32, 32)}

// SetupTransparent makes the calling thread's network namespace send
// programs that ignore proxy settings to the agent: an IPv4 default route
// over lo (so connect() to any address proceeds), nftables that redirect
// TCP to ports 80 and 443 of any non-loopback address to api.RedirectPort on
// loopback, and an output filter that refuses everything else that is not
// loopback (UDP, other ports, ICMP) at once. IPv6 gets no route: it fails
// at connect. The namespace has no device but lo, so nothing can leave
// it whatever the rules say. Run it in the sandbox's namespace while
// holding CAP_NET_ADMIN (sandbox-init does), before anything of the
// sandbox runs; nothing in the sandbox keeps the capability to change it.
func SetupTransparent() error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("transparent egress: %w", err)
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return fmt.Errorf("transparent egress: lo up: %w", err)
	}
	if err := netlink.AddrAdd(lo, &netlink.Addr{IPNet: transparentAddr}); err != nil {
		return fmt.Errorf("transparent egress: address: %w", err)
	}
	if err := netlink.RouteAdd(&netlink.Route{LinkIndex: lo.Attrs().Index, Scope: netlink.SCOPE_LINK,
		Dst: &net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}, Src: transparentAddr.IP}); err != nil {
		return fmt.Errorf("transparent egress: default route: %w", err)
	}
	return installRules()
}

// ipv4 matches IPv4 packets, daddr loads the IPv4 destination.
var (
	ipv4 = []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV4}},
	}
	daddr4 = &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4}
	// loopback4: the destination masked to /8 is 127.0.0.0.
	loopback4 = []expr.Any{
		daddr4,
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: []byte{255, 0, 0, 0}, Xor: []byte{0, 0, 0, 0}},
	}
)

func join(parts ...[]expr.Any) []expr.Any {
	var out []expr.Any
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func installRules() error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("transparent egress: nftables: %w", err)
	}
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: "paddock"})
	nat := c.AddChain(&nftables.Chain{Name: "redirect", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityNATDest})
	for _, port := range []uint16{80, 443} {
		c.AddRule(&nftables.Rule{Table: t, Chain: nat, Exprs: join(ipv4, loopback4, []expr.Any{
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{127, 0, 0, 0}},
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(port)},
			&expr.Immediate{Register: 1, Data: binaryutil.BigEndian.PutUint16(api.RedirectPort)},
			&expr.Redir{RegisterProtoMin: 1},
		})})
	}
	drop := nftables.ChainPolicyDrop
	filter := c.AddChain(&nftables.Chain{Name: "out", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter, Policy: &drop})
	accept := &expr.Verdict{Kind: expr.VerdictAccept}
	// To loopback (redirected connections included: their destination
	// is 127.0.0.1 by now).
	c.AddRule(&nftables.Rule{Table: t, Chain: filter, Exprs: join(ipv4, loopback4, []expr.Any{
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{127, 0, 0, 0}}, accept})})
	// To the sandbox's own address: the replies of redirected connections.
	c.AddRule(&nftables.Rule{Table: t, Chain: filter, Exprs: join(ipv4, []expr.Any{daddr4,
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: transparentAddr.IP.To4()}, accept})})
	c.AddRule(&nftables.Rule{Table: t, Chain: filter, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV6}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 24, Len: 16},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: net.IPv6loopback.To16()},
		accept,
	}})
	// Everything else is refused at once (an ICMP error the sender sees),
	// not left to time out.
	AddRefusals(c, t, filter)
	if err := c.Flush(); err != nil {
		return fmt.Errorf("transparent egress: install nftables rules: %w", err)
	}
	return nil
}

// AddRefusals adds to chain the rules that refuse whatever reaches them at
// once, rather than leaving it to time out: TCP with a reset, the rest
// with an ICMP "administratively prohibited".
func AddRefusals(c *nftables.Conn, t *nftables.Table, chain *nftables.Chain) {
	c.AddRule(&nftables.Rule{Table: t, Chain: chain, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Reject{Type: unix.NFT_REJECT_TCP_RST},
	}})
	c.AddRule(&nftables.Rule{Table: t, Chain: chain, Exprs: []expr.Any{
		&expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_ADMIN_PROHIBITED},
	}})
}

// LinkTransparent turns the namespace that nsFd names from
// SetupTransparent's way out to a veth link the host made (hostd/egress):
// link (already in the namespace) gets addr and comes up, the default
// route over lo, its address and the nftables table go, and the default
// route leads through link to gw, where the host's own nftables redirect
// TCP to ports 80 and 443 to the proxy and refuse the rest. Run from the
// host (it needs CAP_NET_ADMIN over the namespace, which the sandbox has
// no longer); what SetupTransparent made and is gone already is skipped,
// so it can run again for a new link.
func LinkTransparent(nsFd int, link string, addr *net.IPNet, gw net.IP) error {
	h, err := netlink.NewHandleAt(netns.NsHandle(nsFd))
	if err != nil {
		return fmt.Errorf("link egress: netlink: %w", err)
	}
	defer h.Close()
	l, err := h.LinkByName(link)
	if err != nil {
		return fmt.Errorf("link egress: %s: %w", link, err)
	}
	if err := h.AddrAdd(l, &netlink.Addr{IPNet: addr}); err != nil {
		return fmt.Errorf("link egress: address: %w", err)
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("link egress: %s up: %w", link, err)
	}
	// Fail closed: the old way goes first, and until the new route is
	// in, nothing leaves the namespace at all.
	if lo, err := h.LinkByName("lo"); err == nil {
		err := h.RouteDel(&netlink.Route{LinkIndex: lo.Attrs().Index, Scope: netlink.SCOPE_LINK,
			Dst: &net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}, Src: transparentAddr.IP})
		if err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("link egress: old default route: %w", err)
		}
		if err := h.AddrDel(lo, &netlink.Addr{IPNet: transparentAddr}); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
			return fmt.Errorf("link egress: old address: %w", err)
		}
	}
	c, err := nftables.New(nftables.WithNetNSFd(nsFd))
	if err != nil {
		return fmt.Errorf("link egress: nftables: %w", err)
	}
	c.DelTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: "paddock"})
	if err := c.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("link egress: remove the old rules: %w", err)
	}
	if err := h.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Gw: gw,
		Dst: &net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}}); err != nil {
		return fmt.Errorf("link egress: default route: %w", err)
	}
	return nil
}
