// Package egressfwd is the sandbox's side of egress: the guest agent
// serves the proxy and DNS addresses programs expect on the sandbox's own
// loopback and carries each connection or query to the host over unix
// sockets the host made for this one sandbox (bind-mounted, root-only, so
// only the agent can reach them). The sandbox has no other way out: the
// host knows which sandbox is speaking from which socket it arrived on.
//
// Three sockets (the host makes the ones the sandbox's mode needs):
//
//   - proxy.sock: an HTTP proxy (forward and CONNECT); served on
//     127.0.0.1:3128 (http_proxy points there).
//   - dns.sock: DNS with TCP framing (two-byte length); served on
//     127.0.0.1:53 over UDP and TCP (resolv.conf points there).
//   - redirect.sock: connections the sandbox's nftables redirected from
//     ports 80 and 443 (transparent mode); served on 127.0.0.1:3129 and
//     [::1]:3129. Each is sent as one header line
//     "PADDOCK-REDIRECT <ip>:<port>\n" naming the original destination,
//     then the client's bytes.
package egressfwd

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"paddock.dev/paddock/guest/api"
)

// Limits.
const (
	maxDNSMessage = 65535
	dnsTimeout    = 10 * time.Second
	dialTimeout   = 10 * time.Second
	maxConns      = 512 // concurrent forwarded connections per listener
)

// Config says where the host's sockets are.
type Config struct {
	Dir string // directory holding the host's sockets
	// Dial, when set, replaces dialing the socket named name in Dir (a
	// virtual machine reaches its host's sockets over its agent channel:
	// guest/vmchan).
	Dial   func(name string) (net.Conn, error)
	Logger *slog.Logger
}

// Forwarder runs the listeners; Close stops them.
type Forwarder struct {
	cfg       Config
	log       *slog.Logger
	listeners []io.Closer
	wg        sync.WaitGroup
}

// Start listens on the in-sandbox addresses and forwards until ctx ends
// or Close. The host's sockets need not exist yet (a fork child boots
// before the host has made its sockets): each connection dials when it
// comes, and fails if its socket is missing. It fails if a listener
// cannot be made: a sandbox that should have egress and has none is
// better refused than silently offline.
func Start(ctx context.Context, cfg Config) (*Forwarder, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &Forwarder{cfg: cfg, log: log}
	fail := func(err error) (*Forwarder, error) {
		f.Close()
		return nil, err
	}
	l, err := net.Listen("tcp4", api.ProxyAddr)
	if err != nil {
		return fail(fmt.Errorf("egress: listen on %s: %w", api.ProxyAddr, err))
	}
	f.add(l)
	f.go_(func() { f.serveStream(l, api.EgressProxySocket, nil) })
	dl, err := net.Listen("tcp4", api.DNSAddr)
	if err != nil {
		return fail(fmt.Errorf("egress: listen on %s/tcp: %w", api.DNSAddr, err))
	}
	f.add(dl)
	f.go_(func() { f.serveStream(dl, api.EgressDNSSocket, nil) })
	pc, err := net.ListenPacket("udp4", api.DNSAddr)
	if err != nil {
		return fail(fmt.Errorf("egress: listen on %s/udp: %w", api.DNSAddr, err))
	}
	f.add(pc)
	f.go_(func() { f.serveDNSPackets(pc) })
	// Only connections nftables redirected have an original destination;
	// anything else connecting here is closed (redirectHeader fails).
	for _, a := range []string{fmt.Sprintf("127.0.0.1:%d", api.RedirectPort), fmt.Sprintf("[::1]:%d", api.RedirectPort)} {
		rl, err := net.Listen("tcp", a)
		if err != nil {
			return fail(fmt.Errorf("egress: listen on %s: %w", a, err))
		}
		f.add(rl)
		f.go_(func() { f.serveStream(rl, api.EgressRedirectSocket, redirectHeader) })
	}
	go func() {
		<-ctx.Done()
		f.Close()
	}()
	return f, nil
}

func (f *Forwarder) add(c io.Closer) { f.listeners = append(f.listeners, c) }
func (f *Forwarder) go_(fn func()) {
	f.wg.Add(1)
	go func() { defer f.wg.Done(); fn() }()
}

// Close stops listening; connections in flight finish on their own.
func (f *Forwarder) Close() error {
	for _, l := range f.listeners {
		l.Close()
	}
	return nil
}

// Wait returns once every listener has stopped.
func (f *Forwarder) Wait() { f.wg.Wait() }

func (f *Forwarder) dial(name string) (net.Conn, error) {
	if f.cfg.Dial != nil {
		return f.cfg.Dial(name)
	}
	d := net.Dialer{Timeout: dialTimeout}
	return d.Dial("unix", filepath.Join(f.cfg.Dir, name))
}

// serveStream carries each accepted connection to the host socket,
// prefixed by what header returns (nil: nothing).
func (f *Forwarder) serveStream(l net.Listener, sock string, header func(net.Conn) ([]byte, error)) {
	sem := make(chan struct{}, maxConns)
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			f.log.Warn("egress accept", "socket", sock, "err", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		select {
		case sem <- struct{}{}:
		default:
			c.Close() // too many at once
			continue
		}
		go func() {
			defer func() { <-sem }()
			defer c.Close()
			var pre []byte
			if header != nil {
				if pre, err = header(c); err != nil {
					f.log.Debug("egress redirect", "err", err)
					return
				}
			}
			up, err := f.dial(sock)
			if err != nil {
				f.log.Warn("egress: the host's socket does not answer", "socket", sock, "err", err)
				return
			}
			defer up.Close()
			if len(pre) > 0 {
				if _, err := up.Write(pre); err != nil {
					return
				}
			}
			splice(c, up)
		}()
	}
}

// splice copies both ways until both directions are done.
func splice(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			dst.Close()
		}
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	<-done
}

// redirectHeader names the original destination of a connection the
// sandbox's nftables redirected here.
func redirectHeader(c net.Conn) ([]byte, error) {
	dst, err := originalDst(c)
	if err != nil {
		return nil, err
	}
	return []byte(api.RedirectHeader + " " + dst.String() + "\n"), nil
}

// originalDst reads SO_ORIGINAL_DST (IPv4) or IP6T_SO_ORIGINAL_DST.
func originalDst(c net.Conn) (netip.AddrPort, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return netip.AddrPort{}, errors.New("not a TCP connection")
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	local := tc.LocalAddr().(*net.TCPAddr)
	var out netip.AddrPort
	var serr error
	err = raw.Control(func(fd uintptr) {
		const soOriginalDst = 80 // SO_ORIGINAL_DST and IP6T_SO_ORIGINAL_DST
		if local.IP.To4() != nil {
			m, e := unix.GetsockoptIPv6Mreq(int(fd), unix.IPPROTO_IP, soOriginalDst)
			if e != nil {
				serr = e
				return
			}
			// struct sockaddr_in: family(2) port(2, big endian) addr(4)
			port := binary.BigEndian.Uint16(m.Multiaddr[2:4])
			ip := netip.AddrFrom4([4]byte(m.Multiaddr[4:8]))
			out = netip.AddrPortFrom(ip, port)
			return
		}
		m, e := unix.GetsockoptIPv6MTUInfo(int(fd), unix.IPPROTO_IPV6, soOriginalDst)
		if e != nil {
			serr = e
			return
		}
		p := (*[2]byte)(unsafePortPtr(&m.Addr.Port))
		port := binary.BigEndian.Uint16(p[:])
		out = netip.AddrPortFrom(netip.AddrFrom16(m.Addr.Addr), port)
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("original destination: %w", err)
	}
	return out, nil
}

// serveDNSPackets answers UDP queries by asking the host over dns.sock
// (TCP framing), one short connection per query.
func (f *Forwarder) serveDNSPackets(pc net.PacketConn) {
	sem := make(chan struct{}, maxConns)
	buf := make([]byte, maxDNSMessage)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if n < 12 { // shorter than a DNS header
			continue
		}
		q := append([]byte(nil), buf[:n]...)
		select {
		case sem <- struct{}{}:
		default:
			continue // overloaded: the client retries
		}
		go func() {
			defer func() { <-sem }()
			resp, err := f.askDNS(q)
			if err != nil {
				f.log.Debug("egress dns", "err", err)
				return
			}
			pc.WriteTo(resp, from)
		}()
	}
}

func (f *Forwarder) askDNS(q []byte) ([]byte, error) {
	c, err := f.dial(api.EgressDNSSocket)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(dnsTimeout))
	msg := make([]byte, 2+len(q))
	binary.BigEndian.PutUint16(msg, uint16(len(q)))
	copy(msg[2:], q)
	if _, err := c.Write(msg); err != nil {
		return nil, err
	}
	var l [2]byte
	if _, err := io.ReadFull(c, l[:]); err != nil {
		return nil, err
	}
	resp := make([]byte, binary.BigEndian.Uint16(l[:]))
	if _, err := io.ReadFull(c, resp); err != nil {
		return nil, err
	}
	return resp, nil
}
