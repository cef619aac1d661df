package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/elazarl/goproxy"

	"paddock.dev/paddock/egress/proxy"
	"paddock.dev/paddock/egress/rules"
)

// staticResolver answers every name with one address.
type staticResolver struct{ a netip.Addr }

func (r staticResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{r.a}, nil
}

// benchEgress measures the egress proxy beside a direct connection and a
// plain goproxy with no rules, all on loopback in this process: 4 KiB
// responses, throughput with 4 keep-alive clients, and the latency of one
// client's requests (p50, p99).
var dials atomic.Int64

func benchEgress() {
	body := strings.Repeat("x", 4096)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) }))
	defer up.Close()
	upAddr := netip.MustParseAddrPort(up.Listener.Addr().String())

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
			dials.Add(1)
			var d net.Dialer
			return d.DialContext(ctx, "tcp", upAddr.String())
		},
	})
	defer p.Close()
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	go p.Serve(pl, "bench", pol)

	gp := goproxy.NewProxyHttpServer()
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	gs := &http.Server{Handler: gp}
	go gs.Serve(gl)
	defer gs.Close()

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
		{"direct", up.URL + "/", client("")},
		{"goproxy", up.URL + "/", client(gl.Addr().String())},
		{"paddock", "http://bench.test/", client(pl.Addr().String())},
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
	const workers, n, seq = 4, 4000, 2000
	through := map[string]time.Duration{}
	p50 := map[string]time.Duration{}
	p99 := map[string]time.Duration{}
	for _, path := range paths {
		for i := 0; i < 50; i++ {
			get(path.c, path.url) // warm the connections up
		}
		var wg sync.WaitGroup
		t0 := time.Now()
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < n; i += workers {
					get(path.c, path.url)
				}
			}()
		}
		wg.Wait()
		through[path.name] = time.Since(t0)
		lat := make([]time.Duration, seq)
		for i := range lat {
			t := time.Now()
			get(path.c, path.url)
			lat[i] = time.Since(t)
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		p50[path.name], p99[path.name] = lat[seq/2], lat[seq*99/100]
	}
	fmt.Printf("(upstream connections the proxy made: %d)\n", dials.Load())
	fmt.Printf("\n%d requests of 4 KiB by %d clients, then %d one at a time, on loopback:\n", n, workers, seq)
	row("egress proxy: time for all vs direct", through["paddock"], through["direct"],
		fmt.Sprintf("direct (goal: throughput ≥ 80%% of direct; %.0f%%)", 100*float64(through["direct"])/float64(through["paddock"])))
	row("egress proxy: time for all vs plain goproxy", through["paddock"], through["goproxy"], "goproxy, no rules")
	row("egress proxy: p50 latency vs direct", p50["paddock"], p50["direct"], fmt.Sprintf("direct (+%s)", (p50["paddock"]-p50["direct"]).Round(time.Microsecond)))
	row("egress proxy: p99 latency vs direct", p99["paddock"], p99["direct"], fmt.Sprintf("direct (goal ≤ +1ms; +%s)", (p99["paddock"]-p99["direct"]).Round(time.Microsecond)))
	row("egress proxy: p99 latency vs plain goproxy", p99["paddock"], p99["goproxy"], "goproxy, no rules")
}
