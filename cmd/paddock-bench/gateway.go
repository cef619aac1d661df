package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"

	"paddock.dev/paddock/gateway"
	"paddock.dev/paddock/gateway/caddyfile"
	"paddock.dev/paddock/hostd/daemon/daemontest"
)

// gatewayRequests is how many small API requests each side gets.
const gatewayRequests = 2000

// benchGatewayConfig is the gateway the benchmark runs: the shipped local
// Caddyfile, its access log written to a file in dir (as a daemon's
// would be), and Caddy's own log discarded, so that its JSON lines do not
// land between the benchmark's rows.
func benchGatewayConfig(dir, addr, socket string, authCache time.Duration) gateway.Config {
	return gateway.Config{Options: caddyfile.Options{Listen: addr, HostdSocket: socket,
		StorageDir: filepath.Join(dir, "caddy"), AccessLog: filepath.Join(dir, "access.log"), Log: "discard",
		AuthCacheTTL: authCache}}
}

// quietCaddy keeps Caddy's log before a configuration's takes over (and
// its line saying the log moved) off stderr: Caddy's buffer for that log
// is never flushed. Errors still come back from gateway.Start.
func quietCaddy() { quietOnce.Do(func() { caddy.BufferedLog() }) }

var quietOnce sync.Once

// benchGateway measures the gateway's cost: the embedded Caddy with the
// shipped local Caddyfile (TLS from its internal CA, paddock_auth asking
// hostd's whoami, the access log written to a file) against the same
// request sent straight to hostd's socket. hostd here is the real API
// handler without a session manager (GET /v1/whoami with the admin
// token), plus a stand-in preview route serving an 8 MiB answer, so the
// preview figure is the gateway's share of a preview's cost (the guest's
// side is not in it). Both sides keep their connections alive.
func benchGateway() {
	quietCaddy()
	dir, err := os.MkdirTemp("", "pdkgw")
	check(err)
	defer os.RemoveAll(dir)
	socket := filepath.Join(dir, "hostd.sock")
	const tok = "pdk_bench_token_0123456789"
	d, err := daemontest.Start(daemontest.WithoutBackend(), daemontest.WithoutRun(), daemontest.WithToken(tok), daemontest.WithStateDir(filepath.Join(dir, "hostd")))
	check(err)
	defer d.Close()
	api := d.Handler()
	big := bytes.Repeat([]byte("paddock!"), 1<<20) // 8 MiB
	mux := http.NewServeMux()
	mux.HandleFunc("/preview/", func(w http.ResponseWriter, r *http.Request) { w.Write(big) })
	mux.Handle("/", api)
	ln, err := net.Listen("unix", socket)
	check(err)
	hsrv := &http.Server{Handler: mux}
	go hsrv.Serve(ln)
	defer hsrv.Close()

	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	addr := l.Addr().String()
	l.Close()
	for _, cache := range []time.Duration{-1, 0} {
		gw, err := gateway.Start(benchGatewayConfig(dir, addr, socket, cache))
		check(err)
		pem, err := os.ReadFile(gw.RootCertPath())
		check(err)
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(pem)
		through := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, MaxIdleConnsPerHost: 4}}
		straight := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}}}
		gwURL := "https://127.0.0.1" + addr[strings.LastIndex(addr, ":"):]
		get := func(c *http.Client, url string, auth bool) time.Duration {
			req, _ := http.NewRequest("GET", url, nil)
			if auth {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			t0 := time.Now()
			resp, err := c.Do(req)
			check(err)
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			check(err)
			if resp.StatusCode != 200 {
				check(fmt.Errorf("%s: %d", url, resp.StatusCode))
			}
			return time.Since(t0)
		}
		// Warm up: certificates, connections, the whoami path.
		for range 50 {
			get(through, gwURL+"/v1/whoami", true)
			get(straight, "http://hostd/v1/whoami", true)
		}
		// The two sides take turns, so drift on the machine hits both.
		var viaGW, direct []time.Duration
		for range gatewayRequests {
			viaGW = append(viaGW, get(through, gwURL+"/v1/whoami", true))
			direct = append(direct, get(straight, "http://hostd/v1/whoami", true))
		}
		p50 := func(ds []time.Duration) time.Duration {
			sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
			return ds[len(ds)/2]
		}
		p99 := func(ds []time.Duration) time.Duration { return ds[len(ds)*99/100] }
		g50, d50 := p50(viaGW), p50(direct)
		if cache < 0 {
			fmt.Println()
			rowMicro("gateway: GET /v1/whoami p50, no auth cache", g50, d50, fmt.Sprintf("hostd socket (+%s)", (g50-d50).Round(time.Microsecond)))
			rowMicro("gateway: GET /v1/whoami p99, no auth cache", p99(viaGW), p99(direct), "hostd socket")
		} else {
			rowMicro("gateway: GET /v1/whoami p50 (shipped: 1s cache)", g50, d50, fmt.Sprintf("hostd socket (+%s)", (g50-d50).Round(time.Microsecond)))
			rowMicro("gateway: GET /v1/whoami p99 (shipped: 1s cache)", p99(viaGW), p99(direct), "hostd socket")
			var pv, pd time.Duration
			const rounds = 40
			get(through, gwURL+"/preview/x/big", false)
			for range rounds {
				pv += get(through, gwURL+"/preview/x/big", false)
				pd += get(straight, "http://hostd/preview/x/big", false)
			}
			mbps := func(d time.Duration) float64 { return float64(len(big)*rounds) / d.Seconds() / 1e6 }
			row("gateway: 8 MiB preview answer vs straight", pv/rounds, pd/rounds,
				fmt.Sprintf("hostd socket (%.0f vs %.0f MB/s)", mbps(pv), mbps(pd)))
		}
		through.CloseIdleConnections()
		check(gw.Stop())
	}
}
