package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// scripted is a raw upstream: the n-th connection it accepts (from 0) is
// served by script(n, conn, reader). It records how many it accepted and
// when each ended (its script returned).
type scripted struct {
	l      net.Listener
	script func(n int, c net.Conn, br *bufio.Reader)
	mu     sync.Mutex
	conns  int
	ended  chan int
}

// addrScripted is the "public" address scripted.test resolves to.
var addrScripted = netip.MustParseAddr("203.0.113.30")

func newScripted(t *testing.T, e *env, script func(n int, c net.Conn, br *bufio.Reader)) *scripted {
	t.Helper()
	s := &scripted{l: listen(t), script: script, ended: make(chan int, 64)}
	t.Cleanup(func() { s.l.Close() })
	e.res.set("scripted.test", []netip.Addr{addrScripted})
	e.pol.allowHost("scripted.test")
	e.dialer.route(netip.AddrPortFrom(addrScripted, 80), s.l.Addr().String())
	go func() {
		for {
			c, err := s.l.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			n := s.conns
			s.conns++
			s.mu.Unlock()
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				s.script(n, c, bufio.NewReader(c))
				s.ended <- n
			}()
		}
	}()
	return s
}

func (s *scripted) accepted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns
}

// readReq reads one request head (and no body) or fails the script.
func readReq(br *bufio.Reader) (*http.Request, bool) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, false
	}
	return req, true
}

func answer(c net.Conn, body string, extra ...string) {
	fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s", len(body), strings.Join(extra, ""), body)
}

// do sends one request through the proxy on a fresh client connection.
func (e *env) do(t *testing.T, method, rawURL string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, rawURL, nil)
	c := e.client()
	c.Transport.(*http.Transport).DisableKeepAlives = true
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, rawURL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (e *env) pool(t *testing.T) *connPool {
	t.Helper()
	e.p.mu.Lock()
	defer e.p.mu.Unlock()
	cp := e.p.sbPools[sandboxID]
	if cp == nil {
		t.Fatal("the sandbox has no connection pool")
	}
	return cp
}

func (cp *connPool) idleCount() int {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.nidle
}

// A request without a body reuses the kept upstream connection; one the
// upstream closed while it was idle is noticed and replaced.
func TestPoolReusesAndNoticesClosedConnections(t *testing.T) {
	e := newEnv(t)
	closeIdle := make(chan struct{})
	s := newScripted(t, e, func(n int, c net.Conn, br *bufio.Reader) {
		for i := 0; ; i++ {
			if _, ok := readReq(br); !ok {
				return
			}
			answer(c, fmt.Sprintf("conn %d request %d", n, i))
			if n == 0 && i == 1 {
				<-closeIdle // then close, idle
				return
			}
		}
	})
	for i, want := range []string{"conn 0 request 0", "conn 0 request 1"} {
		if code, body := e.do(t, "GET", "http://scripted.test/"); code != 200 || body != want {
			t.Fatalf("request %d: %d %q, want 200 %q", i, code, body, want)
		}
	}
	if n := e.pool(t).idleCount(); n != 1 {
		t.Fatalf("%d idle connections kept, want 1", n)
	}
	close(closeIdle)
	<-s.ended
	// A POST, which is never retried: the closed connection must be
	// noticed before it is used.
	if code, body := e.do(t, "POST", "http://scripted.test/"); code != 200 || body != "conn 1 request 0" {
		t.Fatalf("after the upstream closed the kept connection: %d %q, want a new connection's answer", code, body)
	}
	if n := s.accepted(); n != 2 {
		t.Errorf("the upstream accepted %d connections, want 2", n)
	}
}

// A kept connection that the upstream closes on the next request, before
// answering, is retried once on a new connection for a GET, and not for a
// POST (the upstream may have acted on it).
func TestPoolRetriesOnlyReplayableRequests(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	var seen []string
	newScripted(t, e, func(n int, c net.Conn, br *bufio.Reader) {
		for i := 0; ; i++ {
			req, ok := readReq(br)
			if !ok {
				return
			}
			mu.Lock()
			seen = append(seen, fmt.Sprintf("%d:%s", n, req.Method))
			mu.Unlock()
			if i == 1 {
				return // the second request on a connection: closed unanswered
			}
			answer(c, fmt.Sprintf("conn %d", n))
		}
	})
	if code, body := e.do(t, "GET", "http://scripted.test/"); code != 200 || body != "conn 0" {
		t.Fatalf("first GET: %d %q", code, body)
	}
	if code, body := e.do(t, "GET", "http://scripted.test/"); code != 200 || body != "conn 1" {
		t.Fatalf("GET on a connection closed unanswered: %d %q, want the retry's answer from conn 1", code, body)
	}
	if code, _ := e.do(t, "POST", "http://scripted.test/"); code != http.StatusBadGateway {
		t.Fatalf("POST on a connection closed unanswered: %d, want 502 (not retried)", code)
	}
	mu.Lock()
	defer mu.Unlock()
	if got, want := strings.Join(seen, " "), "0:GET 0:GET 1:GET 1:POST"; got != want {
		t.Errorf("the upstream saw %q, want %q", got, want)
	}
}

// The upstream's answer head is bounded, and interim answers are skipped
// (at most 8).
func TestPoolAnswerHeads(t *testing.T) {
	e := newEnv(t)
	newScripted(t, e, func(n int, c net.Conn, br *bufio.Reader) {
		for {
			req, ok := readReq(br)
			if !ok {
				return
			}
			switch req.URL.Path {
			case "/huge":
				io.WriteString(c, "HTTP/1.1 200 OK\r\n")
				line := "X-Filler: " + strings.Repeat("f", 1000) + "\r\n"
				for range 1100 {
					if _, err := io.WriteString(c, line); err != nil {
						return
					}
				}
				io.WriteString(c, "Content-Length: 0\r\n\r\n")
			case "/early":
				io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n")
				answer(c, "after hints")
			case "/chatty":
				for range 9 {
					io.WriteString(c, "HTTP/1.1 102 Processing\r\n\r\n")
				}
				answer(c, "too late")
			}
		}
	})
	if code, body := e.do(t, "GET", "http://scripted.test/huge"); code != http.StatusBadGateway || !strings.Contains(body, "head is over") {
		t.Errorf("a 1.1 MB answer head: %d %q, want 502 saying the head is too large", code, body)
	}
	if code, body := e.do(t, "GET", "http://scripted.test/early"); code != 200 || body != "after hints" {
		t.Errorf("103 then 200: %d %q", code, body)
	}
	if code, body := e.do(t, "GET", "http://scripted.test/chatty"); code != http.StatusBadGateway || !strings.Contains(body, "interim") {
		t.Errorf("nine 102s: %d %q, want 502", code, body)
	}
}

// A body the client abandons ends its upstream connection (it is never
// kept half read), and an answer with Connection: close is not kept.
func TestPoolKeepsOnlyFinishedConnections(t *testing.T) {
	e := newEnv(t)
	big := strings.Repeat("b", 4<<20)
	s := newScripted(t, e, func(n int, c net.Conn, br *bufio.Reader) {
		for {
			req, ok := readReq(br)
			if !ok {
				return
			}
			switch req.URL.Path {
			case "/big":
				answer(c, big)
			case "/close":
				answer(c, "bye", "Connection: close\r\n")
				return
			default:
				answer(c, "small")
			}
		}
	})
	u, _ := url.Parse("http://" + e.addr)
	cl, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(cl, "GET http://scripted.test/big HTTP/1.1\r\nHost: scripted.test\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(cl), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadFull(resp.Body, make([]byte, 1000))
	cl.Close() // abandoned
	select {
	case <-s.ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream connection of an abandoned body stayed open")
	}
	if n := e.pool(t).idleCount(); n != 0 {
		t.Errorf("%d idle connections after an abandoned body, want 0", n)
	}
	if code, body := e.do(t, "GET", "http://scripted.test/big"); code != 200 || body != big {
		t.Errorf("the next request: %d, %d bytes, want 200 and the whole body", code, len(body))
	}
	if code, body := e.do(t, "GET", "http://scripted.test/close"); code != 200 || body != "bye" {
		t.Errorf("Connection: close answer: %d %q", code, body)
	}
	if n := e.pool(t).idleCount(); n != 0 {
		t.Errorf("%d idle connections after Connection: close, want 0", n)
	}
}

// At most maxIdlePerAddr connections stay idle per address, and
// CloseSandbox closes the kept ones.
func TestPoolLimitsAndCloseSandbox(t *testing.T) {
	e := newEnv(t)
	const n = maxIdlePerAddr + 4
	var ready sync.WaitGroup
	ready.Add(n)
	release := make(chan struct{})
	s := newScripted(t, e, func(i int, c net.Conn, br *bufio.Reader) {
		for first := true; ; first = false {
			if _, ok := readReq(br); !ok {
				return
			}
			if first {
				ready.Done()
				<-release // every request holds its connection until all came
			}
			answer(c, "ok")
		}
	})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if code, _ := e.do(t, "GET", "http://scripted.test/"); code != 200 {
				t.Errorf("concurrent GET: %d", code)
			}
		})
	}
	ready.Wait()
	close(release)
	wg.Wait()
	if got := e.pool(t).idleCount(); got != maxIdlePerAddr {
		t.Errorf("%d idle connections after %d concurrent requests, want %d", got, n, maxIdlePerAddr)
	}
	for range n - maxIdlePerAddr {
		<-s.ended // the ones over the limit were closed
	}
	e.p.CloseSandbox(sandboxID)
	for range maxIdlePerAddr {
		select {
		case <-s.ended:
		case <-time.After(5 * time.Second):
			t.Fatal("CloseSandbox left kept upstream connections open")
		}
	}
}

// Kept connections idle longer than IdleTimeout are closed by the pool's
// reaper, and the empty pool is let go.
func TestPoolReapsIdleConnections(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.IdleTimeout = 300 * time.Millisecond })
	s := newScripted(t, e, func(n int, c net.Conn, br *bufio.Reader) {
		for {
			if _, ok := readReq(br); !ok {
				return
			}
			answer(c, "ok")
		}
	})
	if code, _ := e.do(t, "GET", "http://scripted.test/"); code != 200 {
		t.Fatalf("GET: %d", code)
	}
	select {
	case <-s.ended:
	case <-time.After(5 * time.Second):
		t.Fatal("a kept connection outlived IdleTimeout by seconds")
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		e.p.mu.Lock()
		_, kept := e.p.sbPools[sandboxID]
		e.p.mu.Unlock()
		if !kept {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the empty pool was not let go")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// An upstream that takes longer than IdleTimeout to answer on a kept
// connection is a 502 after one wait, not a replay (it may be working on
// the request); and one that trickles its head gets no longer than
// IdleTimeout for the whole of it.
func TestPoolTimeoutsAreNotRetried(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.IdleTimeout = 500 * time.Millisecond })
	var mu sync.Mutex
	seen := 0
	newScripted(t, e, func(n int, c net.Conn, br *bufio.Reader) {
		for {
			req, ok := readReq(br)
			if !ok {
				return
			}
			mu.Lock()
			seen++
			mu.Unlock()
			switch req.URL.Path {
			case "/slow":
				time.Sleep(1500 * time.Millisecond)
				return
			case "/trickle":
				for {
					for _, b := range []byte("HTTP/1.1 102 Processing\r\n\r\n") {
						if _, err := c.Write([]byte{b}); err != nil {
							return
						}
						time.Sleep(50 * time.Millisecond)
					}
				}
			default:
				answer(c, "ok")
			}
		}
	})
	if code, _ := e.do(t, "GET", "http://scripted.test/"); code != 200 {
		t.Fatalf("GET: %d", code)
	}
	mu.Lock()
	seen = 0
	mu.Unlock()
	t0 := time.Now()
	if code, _ := e.do(t, "GET", "http://scripted.test/slow"); code != http.StatusBadGateway {
		t.Errorf("a slow upstream on a kept connection: %d, want 502", code)
	}
	if d := time.Since(t0); d > 1400*time.Millisecond {
		t.Errorf("the slow request took %v: waited more than once", d)
	}
	mu.Lock()
	if seen != 1 {
		t.Errorf("the upstream saw the slow request %d times, want 1", seen)
	}
	mu.Unlock()
	t0 = time.Now()
	if code, _ := e.do(t, "GET", "http://scripted.test/trickle"); code != http.StatusBadGateway {
		t.Errorf("a trickled head: %d, want 502", code)
	}
	if d := time.Since(t0); d > 1500*time.Millisecond {
		t.Errorf("a head trickled a byte every 50 ms held the request %v, want about IdleTimeout (500ms)", d)
	}
}
