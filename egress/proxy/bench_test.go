package proxy

import (
	"io"
	"net/http"
	"sync"
	"testing"
	"time"
)

// BenchmarkProxyThroughput sends the same requests (a 4 KiB response, four
// clients, keep-alive) straight to a loopback upstream and through the
// proxy, and reports both rates and their ratio (the goal is at
// least 0.8).
func BenchmarkProxyThroughput(b *testing.B) {
	e := newEnv(b)
	direct := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	proxied := e.client()
	proxied.Transport.(*http.Transport).MaxIdleConnsPerHost = 8
	b.Cleanup(direct.CloseIdleConnections)

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
	// Warm both paths' connections up.
	run(direct, e.plain.URL+"/big", workers)
	run(proxied, "http://allowed.test/big", workers)

	b.ResetTimer()
	d := run(direct, e.plain.URL+"/big", b.N)
	p := run(proxied, "http://allowed.test/big", b.N)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/d.Seconds(), "direct-req/s")
	b.ReportMetric(float64(b.N)/p.Seconds(), "proxy-req/s")
	b.ReportMetric(d.Seconds()/p.Seconds(), "proxy/direct")
}
