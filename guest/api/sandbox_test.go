package api_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"paddock.dev/paddock/guest/api"
)

// TestSandboxEnvironment holds the sandbox's environment and egress names
// to the values every backend has always given sandboxes.
func TestSandboxEnvironment(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want []string
	}{
		{"trust", api.TrustEnv(), []string{
			"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt", "REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt",
			"CURL_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt", "NODE_EXTRA_CA_CERTS=/etc/ssl/certs/paddock-extra.pem",
		}},
		{"proxy", api.ProxyEnv(), []string{
			"http_proxy=http://127.0.0.1:3128", "https_proxy=http://127.0.0.1:3128",
			"HTTP_PROXY=http://127.0.0.1:3128", "HTTPS_PROXY=http://127.0.0.1:3128",
			"no_proxy=localhost,127.0.0.1,::1", "NO_PROXY=localhost,127.0.0.1,::1",
		}},
		{"sockets", api.EgressSockets(), []string{"proxy.sock", "dns.sock", "redirect.sock"}},
		{"apt", []string{api.AptProxyConfPath, api.AptProxyConf}, []string{
			"/etc/apt/apt.conf.d/90paddock-proxy",
			"Acquire::http::Proxy \"http://127.0.0.1:3128\";\nAcquire::https::Proxy \"http://127.0.0.1:3128\";\n",
		}},
	} {
		if diff := cmp.Diff(c.want, c.got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, diff)
		}
	}
}
