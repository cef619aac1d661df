package vmchan

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/yamux"
)

func hello(identity string) Hello {
	return Hello{Identity: identity, Hostname: "box-1", MachineID: strings.Repeat("ab", 16),
		Seed: bytes.Repeat([]byte{7}, 32), TimeUnixNano: time.Now().UnixNano(), Network: "proxy"}
}

// pair returns the two ends of a stream socket.
func pair(t *testing.T) (host, guest net.Conn) {
	t.Helper()
	ln, err := net.Listen("unix", t.TempDir()+"/s")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		ch <- c
	}()
	host, err = net.Dial("unix", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	guest = <-ch
	t.Cleanup(func() { host.Close(); guest.Close() })
	return host, guest
}

// guestLoop answers hellos on conn until ctx ends, serving an echo on
// every host stream; it reports each hello it applied.
func guestLoop(ctx context.Context, conn net.Conn, got chan<- Hello, sessions chan<- *yamux.Session) {
	for ctx.Err() == nil {
		p := NewGuestPort(nopCloser{conn}, "boot-1")
		pd, err := p.Accept(ctx)
		if err != nil {
			p.Close()
			return
		}
		got <- pd.Hello
		s, err := pd.Ready()
		if err != nil {
			p.Close()
			return
		}
		if sessions != nil {
			sessions <- s
		}
		go func() {
			for {
				c, err := s.Accept()
				if err != nil {
					return
				}
				go func() { io.Copy(c, c); c.Close() }()
			}
		}()
		select {
		case <-s.CloseChan():
		case <-ctx.Done():
		}
		s.Close()
		p.Close()
	}
}

func echo(t *testing.T, s *yamux.Session, msg string) {
	t.Helper()
	c, err := s.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != msg {
		t.Fatalf("echo: %q, %v", buf, err)
	}
}

func TestHandshakeAndStreams(t *testing.T) {
	host, guest := pair(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan Hello, 4)
	gs := make(chan *yamux.Session, 4)
	go guestLoop(ctx, guest, got, gs)

	hctx, hcancel := context.WithTimeout(ctx, 5*time.Second)
	defer hcancel()
	h := hello("gen-1")
	h.TrustPEM = strings.Repeat("x", 200<<10) // big hellos cross many reads
	s, err := Host(hctx, host, h)
	if err != nil {
		t.Fatal(err)
	}
	if g := <-got; g.Identity != "gen-1" || g.Hostname != "box-1" || len(g.TrustPEM) != 200<<10 {
		t.Fatalf("guest heard %+v", g.Identity)
	}
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); echo(t, s, strings.Repeat("p", 1000+i)) }()
	}
	wg.Wait()

	// The guest opens an egress stream; the host reads its header and
	// then the client's bytes intact.
	g := <-gs
	go func() {
		c, err := OpenEgress(g, "dns.sock")
		if err == nil {
			io.WriteString(c, "query")
			c.Close()
		}
	}()
	c, err := s.AcceptStream()
	if err != nil {
		t.Fatal(err)
	}
	name, err := ReadEgress(c)
	if err != nil || name != "dns.sock" {
		t.Fatalf("egress header: %q %v", name, err)
	}
	rest, _ := io.ReadAll(c)
	if string(rest) != "query" {
		t.Fatalf("after the header: %q", rest)
	}
	if _, err := OpenEgress(g, "../../etc/passwd"); err == nil {
		t.Fatal("an unknown egress socket was opened")
	}
}

// chardev plays QEMU's socket chardev: one byte stream to the guest, and
// a listener where a host connects; a new host replaces the old one, and
// the guest's bytes stay in flight between them.
func chardev(t *testing.T, qemuEnd net.Conn) (dial func() net.Conn) {
	t.Helper()
	path := t.TempDir() + "/chardev"
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var mu sync.Mutex
	var cur net.Conn
	go func() { // guest → current host
		buf := make([]byte, 32<<10)
		for {
			n, err := qemuEnd.Read(buf)
			if err != nil {
				return
			}
			mu.Lock()
			c := cur
			mu.Unlock()
			if c != nil {
				c.Write(buf[:n])
			}
		}
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if cur != nil {
				cur.Close()
			}
			cur = c
			mu.Unlock()
			go io.Copy(qemuEnd, c) // host → guest
		}
	}()
	return func() net.Conn {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
}

// A host that reconnects while the guest is still in its old session (a
// VM restored from memory, a daemon restart) gets a fresh session: the
// reset breaks the old one and the guest waits for a hello again.
func TestReconnectMidSession(t *testing.T) {
	qemuEnd, guest := pair(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan Hello, 4)
	go guestLoop(ctx, guest, got, nil)
	dial := chardev(t, qemuEnd)

	s1, err := Host(ctx, dial(), hello("gen-1"))
	if err != nil {
		t.Fatal(err)
	}
	<-got
	echo(t, s1, "first")
	// Leave stale frames in flight: a stream opened and written to but
	// never read by this host.
	c, _ := s1.Open()
	io.WriteString(c, "stale")

	// A new host connects (the old connection goes, as with QEMU) and
	// starts over while the guest still holds its old session.
	ctx2, cancel2 := context.WithTimeout(ctx, 10*time.Second)
	defer cancel2()
	s2, err := Host(ctx2, dial(), hello("gen-2"))
	if err != nil {
		t.Fatal(err)
	}
	if g := <-got; g.Identity != "gen-2" {
		t.Fatalf("second hello: %+v", g)
	}
	echo(t, s2, "second")
}

func TestGuestSkipsBadHellos(t *testing.T) {
	host, guest := pair(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan Hello, 4)
	go guestLoop(ctx, guest, got, nil)
	// Wait for the guest's first waiting line, then send junk and
	// invalid hellos before a good one.
	buf := make([]byte, 64)
	host.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := host.Read(buf); err != nil || !strings.Contains(string(buf[:n]), "PADDOCK-WAITING") {
		t.Fatalf("first bytes %q %v", buf[:n], err)
	}
	bad := []string{
		"\x00\x01garbage\n",
		helloPrefix + "{not json\n",
		helloPrefix + `{"nonce":"n","identity":"i","hostname":"a b","machine_id":"` + strings.Repeat("0", 32) + `"}` + "\n",
		helloPrefix + `{"nonce":"n","identity":"i","hostname":"h","machine_id":"short"}` + "\n",
		helloPrefix + `{"nonce":"n","identity":"i","hostname":"h","machine_id":"` + strings.Repeat("0", 32) + `","extra":1}` + "\n",
		helloPrefix + strings.Repeat("y", MaxHello+10000) + "\n",
	}
	for _, b := range bad {
		if _, err := io.WriteString(host, b); err != nil {
			t.Fatal(err)
		}
	}
	host.SetReadDeadline(time.Time{})
	hctx, hcancel := context.WithTimeout(ctx, 5*time.Second)
	defer hcancel()
	s, err := Host(hctx, host, hello("good"))
	if err != nil {
		t.Fatal(err)
	}
	if g := <-got; g.Identity != "good" {
		t.Fatalf("guest applied %+v", g)
	}
	select {
	case g := <-got:
		t.Fatalf("guest applied a second hello %+v", g)
	default:
	}
	echo(t, s, "ok")
}

func TestHostTimesOutWithoutGuest(t *testing.T) {
	host, _ := pair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := Host(ctx, host, hello("x")); err == nil {
		t.Fatal("handshake with nobody succeeded")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("timeout took %v", d)
	}
}

func TestHelloValidate(t *testing.T) {
	h := hello("g")
	h.Nonce = "n"
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*Hello){
		"no nonce":       func(h *Hello) { h.Nonce = "" },
		"no identity":    func(h *Hello) { h.Identity = "" },
		"slash host":     func(h *Hello) { h.Hostname = "a/b" },
		"long host":      func(h *Hello) { h.Hostname = strings.Repeat("h", 65) },
		"machine id":     func(h *Hello) { h.MachineID = strings.Repeat("z", 32) },
		"env":            func(h *Hello) { h.Env = []string{"NOEQUALS"} },
		"network":        func(h *Hello) { h.Network = "open" },
		"trust too long": func(h *Hello) { h.TrustPEM = strings.Repeat("c", MaxTrustPEM+1) },
		"overlay dots":   func(h *Hello) { h.Overlays = []Overlay{{Lower: "/etc/../root", Target: "/srv/x"}} },
		"overlay colon":  func(h *Hello) { h.Overlays = []Overlay{{Lower: "/etc", Target: "/srv/a:b"}} },
		"overlay root":   func(h *Hello) { h.Overlays = []Overlay{{Lower: "/", Target: "/srv/x"}} },
		"overlay rel":    func(h *Hello) { h.Overlays = []Overlay{{Lower: "etc", Target: "/srv/x"}} },
		"overlays":       func(h *Hello) { h.Overlays = make([]Overlay, MaxOverlays+1) },
	} {
		c := h
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestReadEgressRefuses(t *testing.T) {
	for _, hdr := range []string{"EGRESS ../x\n", "EGRESS proxy.sock", "CONNECT proxy.sock\n", strings.Repeat("E", 300)} {
		a, b := net.Pipe()
		go func() { io.WriteString(a, hdr); a.Close() }()
		if name, err := ReadEgress(b); err == nil {
			t.Errorf("%q: accepted as %q", hdr, name)
		}
		b.Close()
	}
}

// TestGuestRefusesHello: a guest that cannot apply its hello says why,
// and the host's handshake fails with that reason (not a timeout, not
// EOF), bounded and on one line.
func TestGuestRefusesHello(t *testing.T) {
	host, guest := pair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go func() {
		p := NewGuestPort(guest, "boot")
		pd, err := p.Accept(ctx)
		if err != nil {
			return
		}
		pd.Fail(fmt.Errorf("overlay /srv/x: /workspace/evil is a symbolic link\nsecond line %s", strings.Repeat("z", 3*maxFailed)))
	}()
	_, err := Host(ctx, host, hello("g"))
	var ge *GuestError
	if !errors.As(err, &ge) || !strings.Contains(ge.Msg, "is a symbolic link second line") || len(ge.Msg) > maxFailed {
		t.Fatalf("handshake: %v", err)
	}
}
