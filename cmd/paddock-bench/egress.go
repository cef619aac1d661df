package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/elazarl/goproxy"
	"golang.org/x/sys/unix"

	"paddock.dev/paddock/egress/proxy"
	"paddock.dev/paddock/egress/rules"
	"paddock.dev/paddock/policy"
)

// staticResolver answers every name with one address.
type staticResolver struct{ a netip.Addr }

func (r staticResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{r.a}, nil
}

// benchEgress measures the egress proxy beside a direct connection and a
// plain goproxy with no rules, on loopback: 4 KiB responses, throughput
// with 4 keep-alive clients, and the latency of one client's requests
// (p50, p99). It measures twice: everything in this process sharing the
// cores, and (with two or more CPUs) the proxies in a child process on a
// CPU of their own while the clients and the upstream share another, as
// in use, where the upstream is another machine and the daemon is not
// competing with it.
func benchEgress() {
	body := strings.Repeat("x", 4096)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) }))
	defer up.Close()
	upAddr := netip.MustParseAddrPort(up.Listener.Addr().String())

	gpAddr, pdAddr, stop := startProxies(upAddr)
	res := measureEgress(up.URL, gpAddr, pdAddr)
	stop()
	fmt.Printf("\n%d requests of 4 KiB by %d clients, then %d one at a time, in %d rounds taking turns (throughput: the median round; time for all: 5 × that), on loopback, all sharing the cores:\n", egressN, egressWorkers, egressSeq, egressRounds)
	res.print()

	if runtime.NumCPU() < 2 {
		fmt.Println("\n(one CPU: the proxy cannot have a core of its own; skipped)")
		return
	}
	// Each proxy in a process of its own (each child starts both; one is
	// used), so that one's garbage is not collected on the other's time.
	childA, gpAddr, _, err := startProxyChild(upAddr)
	if err != nil {
		fmt.Printf("\n(the proxy on its own CPU: %v; skipped)\n", err)
		return
	}
	defer childA()
	childB, _, pdAddr, err := startProxyChild(upAddr)
	if err != nil {
		fmt.Printf("\n(the proxy on its own CPU: %v; skipped)\n", err)
		return
	}
	defer childB()
	all, err := pin(0)
	if err != nil {
		fmt.Printf("\n(the proxy on its own CPU: %v; skipped)\n", err)
		return
	}
	procs := runtime.GOMAXPROCS(1)
	res = measureEgress(up.URL, gpAddr, pdAddr)
	runtime.GOMAXPROCS(procs)
	check(setAffinity(all))
	fmt.Printf("\nthe same with each proxy in a child process on CPU 1 and clients and upstream on CPU 0:\n")
	res.print()
}

const egressWorkers, egressN, egressSeq, egressRounds = 4, 10000, 2000, 5

// startProxies starts a plain goproxy and Paddock's proxy (one sandbox
// allowed bench.test, which resolves to the upstream) on loopback.
func startProxies(upAddr netip.AddrPort) (goproxyAddr, paddockAddr string, stop func()) {
	pol, err := rules.Compile(rules.PolicyInput{Network: &rules.Network{Default: "deny", Allow: []rules.AllowEntry{{Host: "bench.test"}}}})
	check(err)
	p := proxy.New(proxy.Config{
		Resolver:      staticResolver{upAddr.Addr()},
		CanonicalPath: rules.CanonicalPath,
		// The benchmark's upstream is on loopback, which the real
		// address check never allows: this one allows only it.
		CheckAddr: func(a netip.Addr) error {
			if a == upAddr.Addr() {
				return nil
			}
			return fmt.Errorf("%s is not the benchmark's upstream", a)
		},
		Dial: func(ctx context.Context, a netip.AddrPort) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", upAddr.String())
		},
	})
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	// As in the daemon: the policy's decisions are made by the http Rego
	// module (and kept per session for the same question).
	eng, err := policy.New(policy.Options{})
	check(err)
	go p.Serve(pl, "bench", eng.Network("bench", pol))

	gp := goproxy.NewProxyHttpServer()
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	gs := &http.Server{Handler: gp}
	go gs.Serve(gl)
	return gl.Addr().String(), pl.Addr().String(), func() { p.Close(); gs.Close() }
}

// proxyChild is paddock-bench --egress-proxies: the proxies of
// startProxies, pinned to one CPU, their addresses on stdout; it ends when
// stdin closes.
func proxyChild(upstream string, cpu int) {
	upAddr, err := netip.ParseAddrPort(upstream)
	check(err)
	runtime.GOMAXPROCS(1)
	if _, err := pin(cpu); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gp, pd, stop := startProxies(upAddr)
	defer stop()
	fmt.Printf("%s %s\n", gp, pd)
	io.Copy(io.Discard, os.Stdin)
}

func startProxyChild(upAddr netip.AddrPort) (stop func(), goproxyAddr, paddockAddr string, err error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", "", err
	}
	cmd := exec.Command(self, "--egress-proxies", upAddr.String(), "--egress-proxies-cpu", "1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, "", "", err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", "", err
	}
	stop = func() { in.Close(); cmd.Wait() }
	line, err := bufio.NewReader(out).ReadString('\n')
	var gp, pd string
	if _, serr := fmt.Sscan(line, &gp, &pd); err != nil || serr != nil {
		stop()
		return nil, "", "", fmt.Errorf("the proxy child did not start (%q)", line)
	}
	return stop, gp, pd, nil
}

// pin moves every thread of this process to cpu and returns the set it
// had. New threads inherit the set of the thread that makes them.
func pin(cpu int) (unix.CPUSet, error) {
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return old, err
	}
	if !old.IsSet(cpu) {
		return old, fmt.Errorf("CPU %d is not available to this process", cpu)
	}
	var one unix.CPUSet
	one.Set(cpu)
	return old, setAffinity(one)
}

func setAffinity(set unix.CPUSet) error {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("pinning thread %d: %w", tid, err)
		}
	}
	return nil
}

type egressResult struct {
	through, p50, p99 map[string]time.Duration
}

// measureEgress runs the same load straight to the upstream, through the
// plain goproxy and through Paddock's proxy.
func measureEgress(upURL, goproxyAddr, paddockAddr string) egressResult {
	client := func(proxyAddr string) *http.Client {
		tr := &http.Transport{MaxIdleConnsPerHost: 8}
		if proxyAddr != "" {
			u, _ := url.Parse("http://" + proxyAddr)
			tr.Proxy = http.ProxyURL(u)
		}
		return &http.Client{Transport: tr}
	}
	paths := []struct {
		name, url string
		c         *http.Client
	}{
		{"direct", upURL + "/", client("")},
		{"goproxy", upURL + "/", client(goproxyAddr)},
		{"paddock", "http://bench.test/", client(paddockAddr)},
	}
	get := func(c *http.Client, u string) {
		resp, err := c.Get(u)
		check(err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			check(fmt.Errorf("%s: %s", u, resp.Status))
		}
	}
	r := egressResult{map[string]time.Duration{}, map[string]time.Duration{}, map[string]time.Duration{}}
	for _, path := range paths {
		for i := 0; i < 50; i++ {
			get(path.c, path.url) // warm the connections up
		}
	}
	// Rounds take turns, so that a burst of load from elsewhere on the
	// machine lands on all three paths alike; throughput is each path's
	// median round, latency is over all rounds' samples.
	rounds := map[string][]time.Duration{}
	lat := map[string][]time.Duration{}
	for range egressRounds {
		for _, path := range paths {
			var wg sync.WaitGroup
			t0 := time.Now()
			for w := 0; w < egressWorkers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := w; i < egressN/egressRounds; i += egressWorkers {
						get(path.c, path.url)
					}
				}()
			}
			wg.Wait()
			rounds[path.name] = append(rounds[path.name], time.Since(t0))
			for range egressSeq / egressRounds {
				t := time.Now()
				get(path.c, path.url)
				lat[path.name] = append(lat[path.name], time.Since(t))
			}
		}
	}
	for _, path := range paths {
		path.c.CloseIdleConnections()
		rs, ls := rounds[path.name], lat[path.name]
		sort.Slice(rs, func(i, j int) bool { return rs[i] < rs[j] })
		sort.Slice(ls, func(i, j int) bool { return ls[i] < ls[j] })
		r.through[path.name] = rs[len(rs)/2] * egressRounds
		r.p50[path.name], r.p99[path.name] = ls[len(ls)/2], ls[len(ls)*99/100]
	}
	return r
}

func (r egressResult) print() {
	row("egress proxy: time for all vs direct", r.through["paddock"], r.through["direct"],
		fmt.Sprintf("direct (goal: throughput ≥ 80%% of direct; %.0f%%)", 100*float64(r.through["direct"])/float64(r.through["paddock"])))
	row("egress proxy: time for all vs plain goproxy", r.through["paddock"], r.through["goproxy"], "goproxy, no rules")
	row("egress proxy: p50 latency vs direct", r.p50["paddock"], r.p50["direct"], fmt.Sprintf("direct (+%s)", (r.p50["paddock"]-r.p50["direct"]).Round(time.Microsecond)))
	row("egress proxy: p99 latency vs direct", r.p99["paddock"], r.p99["direct"], fmt.Sprintf("direct (goal ≤ +1ms; +%s)", (r.p99["paddock"]-r.p99["direct"]).Round(time.Microsecond)))
	row("egress proxy: p99 latency vs plain goproxy", r.p99["paddock"], r.p99["goproxy"], "goproxy, no rules")
}
