package api

// What a sandbox looks like from inside, the same for every backend: the
// names of the host's egress sockets, the loopback addresses the guest
// agent serves the egress on, where extra CA certificates go and the
// environment that points programs at them. The host (hostd/egress,
// hostd/session), the backends (hypervisor/procbox, the VM init in
// guest/vminit, guest/sandboxinit) and the agent's forwarders
// (guest/egressfwd) all take them from here; a test holds the rest of the
// tree to not spelling them again.

// The unix sockets in a machine's egress directory (MachineSpec.EgressDir
// on the host), served by the host's egress and dialled by the agent's
// forwarders.
const (
	EgressProxySocket    = "proxy.sock"    // HTTP proxy: plain requests and CONNECT
	EgressDNSSocket      = "dns.sock"      // DNS over a stream, length-prefixed
	EgressRedirectSocket = "redirect.sock" // redirected TCP, after RedirectHeader
)

// EgressSockets lists the egress socket names; a VM host refuses any
// other a guest asks for.
func EgressSockets() []string {
	return []string{EgressProxySocket, EgressDNSSocket, EgressRedirectSocket}
}

// The in-sandbox side of the egress.
const (
	// ProxyAddr is where the agent serves the HTTP proxy on loopback.
	ProxyAddr = "127.0.0.1:3128"
	// DNSAddr is where the agent serves the resolver (UDP and TCP).
	DNSAddr = "127.0.0.1:53"
	// RedirectPort is where transparent egress sends TCP to ports 80
	// and 443 of any address.
	RedirectPort = 3129
	// RedirectHeader starts every connection on EgressRedirectSocket:
	// "PADDOCK-REDIRECT <ip>:<port>\n" names the original destination.
	RedirectHeader = "PADDOCK-REDIRECT"
)

// ResolvConf is /etc/resolv.conf in a sandbox with egress.
const ResolvConf = "nameserver 127.0.0.1\noptions edns0\n"

// AptProxyConfPath and AptProxyConf point apt at the proxy in an image
// that has apt (its own setting, since apt ignores http_proxy under sudo).
const (
	AptProxyConfPath = "/etc/apt/apt.conf.d/90paddock-proxy"
	AptProxyConf     = "Acquire::http::Proxy \"http://" + ProxyAddr + "\";\nAcquire::https::Proxy \"http://" + ProxyAddr + "\";\n"
)

// TrustBundle is the system CA bundle (Debian's path), extended with a
// machine's extra certificates (MachineSpec.TrustPEM); TrustExtra holds
// the extra certificates alone, for programs that take extras only.
const (
	TrustBundle = "/etc/ssl/certs/ca-certificates.crt"
	TrustExtra  = "/etc/ssl/certs/paddock-extra.pem"
)

// noProxy is what reaches loopback directly.
const noProxy = "localhost,127.0.0.1,::1"

// TrustEnv points programs that keep their own CA lists at TrustBundle
// (and Node at TrustExtra); a sandbox with extra certificates gets it.
func TrustEnv() []string {
	return []string{
		"SSL_CERT_FILE=" + TrustBundle, "REQUESTS_CA_BUNDLE=" + TrustBundle,
		"CURL_CA_BUNDLE=" + TrustBundle, "NODE_EXTRA_CA_CERTS=" + TrustExtra,
	}
}

// ProxyEnv points programs at the agent's proxy, in both the lower- and
// upper-case spellings programs read; a sandbox with egress gets it.
func ProxyEnv() []string {
	const proxy = "http://" + ProxyAddr
	return []string{
		"http_proxy=" + proxy, "https_proxy=" + proxy,
		"HTTP_PROXY=" + proxy, "HTTPS_PROXY=" + proxy,
		"no_proxy=" + noProxy, "NO_PROXY=" + noProxy,
	}
}
