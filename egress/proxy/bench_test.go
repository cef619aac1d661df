package proxy

import (
	"io"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/elazarl/goproxy"
)

// BenchmarkProxyThroughput sends the same requests (a 4 KiB response, four
// clients, keep-alive) straight to a loopback upstream, through a plain
// goproxy with no rules, and through the proxy, and reports the rates and
// the ratios (the goal is proxy/direct >= 0.8). Client, proxy and
// upstream share the machine's cores, so the ratio is a floor.
func BenchmarkProxyThroughput(b *testing.B) {
	e := newEnv(b)
	direct := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	b.Cleanup(direct.CloseIdleConnections)
	proxied := e.client()
	proxied.Transport.(*http.Transport).MaxIdleConnsPerHost = 8

	plain := goproxy.NewProxyHttpServer()
	plain.Tr = &http.Transport{MaxIdleConnsPerHost: 8}
	pl := listen(b)
	plainSrv := &http.Server{Handler: plain}
	go plainSrv.Serve(pl)
	b.Cleanup(func() { plainSrv.Close() })
	plainURL, _ := url.Parse("http://" + pl.Addr().String())
	viaGoproxy := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(plainURL), MaxIdleConnsPerHost: 8}}
	b.Cleanup(viaGoproxy.CloseIdleConnections)

	const workers = 4
	run := func(c *http.Client, url string, n int) time.Duration {
		var wg sync.WaitGroup
		start := time.Now()
		for w := range workers {
			wg.Go(func() {
				for i := w; i < n; i += workers {
					resp, err := c.Get(url)
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						b.Errorf("%s: %d", url, resp.StatusCode)
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	// Warm every path's connections up.
	run(direct, e.plain.URL+"/big", workers)
	run(viaGoproxy, e.plain.URL+"/big", workers)
	run(proxied, "http://allowed.test/big", workers)

	b.ResetTimer()
	d := run(direct, e.plain.URL+"/big", b.N)
	g := run(viaGoproxy, e.plain.URL+"/big", b.N)
	p := run(proxied, "http://allowed.test/big", b.N)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/d.Seconds(), "direct-req/s")
	b.ReportMetric(float64(b.N)/g.Seconds(), "goproxy-req/s")
	b.ReportMetric(float64(b.N)/p.Seconds(), "proxy-req/s")
	b.ReportMetric(d.Seconds()/p.Seconds(), "proxy/direct")
	b.ReportMetric(g.Seconds()/p.Seconds(), "proxy/goproxy")
}
