// Package caddyfile holds the gateway's shipped Caddyfiles, embedded in
// the binary, and renders them for one daemon: its listen address, domain,
// hostd socket and Caddy storage. Two variants ship:
//
//   - local (the default): HTTPS on this machine with Caddy's internal CA,
//     nothing installed in the host's trust store, no admin endpoint;
//   - domain: a real domain with a certificate from an ACME CA.
//
// Both share the routes, limits, timeouts and log filters in
// common.caddyfile. Adapt turns a rendered Caddyfile into Caddy's JSON;
// the adapt tests hold every variant to a golden file in testdata/.
package caddyfile

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"

	caddycf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"

	_ "paddock.dev/paddock/gateway/all" // the modules and directives the files use
	"paddock.dev/paddock/gateway/cors"
	"paddock.dev/paddock/hostd/api/routes"
)

//go:embed common.caddyfile local.caddyfile domain.caddyfile
var files embed.FS

// Variant names a shipped Caddyfile.
type Variant string

// The shipped variants.
const (
	Local  Variant = "local"
	Domain Variant = "domain"
)

// Variants lists the shipped Caddyfiles.
func Variants() []Variant { return []Variant{Local, Domain} }

// Limits and timeouts of the shipped files (docs/gateway.md lists them).
const (
	// The body limits are not here: paddock_limits (gateway/limits)
	// takes each API route's from hostd's route table, and the previews'
	// is hostd's preview limit (routes.PreviewBody) with the same room.

	// MaxHeaderSize bounds a request's headers.
	MaxHeaderSize = "64KiB"

	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadBodyTimeout is the most a whole request may take to
	// arrive: a 44 MiB sandbox write at 150 KB/s. It does not bound the
	// answer (long execs, streams and long polls go on).
	DefaultReadBodyTimeout     = 5 * time.Minute
	DefaultReadBodyIdleTimeout = 30 * time.Second
	DefaultIdleTimeout         = 2 * time.Minute
	// DefaultReadMinRate is the least a client must send of a body,
	// bytes per second averaged from its start.
	DefaultReadMinRate = 1024
	// DefaultAuthCacheTTL is how long paddock_auth keeps a verified
	// token's identity.
	DefaultAuthCacheTTL = time.Second

	DefaultLocalListen  = "127.0.0.1:7788"
	DefaultDomainListen = ":443"
	// LocalDomain is the local variant's domain: previews' host form is
	// <token>.preview.localhost.
	LocalDomain = "localhost"
)

// Options are what a rendered Caddyfile is made for.
type Options struct {
	// Listen is the gateway's address, host:port. An empty host listens
	// on every address.
	Listen string
	// Domain: for the local variant, the name previews' host form hangs
	// under (default localhost); for the domain variant, the domain.
	Domain string
	// Email is the ACME account's contact (domain variant; optional).
	Email string
	// HostdSocket is the path of hostd's API socket.
	HostdSocket string
	// StorageDir is Caddy's storage: the internal CA, certificates, ACME
	// accounts.
	StorageDir string
	// AccessLog is where access logs go: "stderr", "discard", or a file.
	AccessLog string
	// Log is where Caddy's own log goes (start, stop, certificates):
	// "stderr" (the default), "discard", or a file.
	Log string

	// Zero means the default.
	ReadHeaderTimeout   time.Duration
	ReadBodyTimeout     time.Duration
	ReadBodyIdleTimeout time.Duration
	IdleTimeout         time.Duration
	ReadMinRate         int
	AuthCacheTTL        time.Duration

	// CORSOrigins are the web pages' origins allowed to call the API
	// from a browser (gateway/cors), each an exact scheme://host[:port].
	// None (the default) leaves the gateway without CORS.
	CORSOrigins []string
}

// data is what the templates see.
type data struct {
	SiteAddresses      string
	PreviewSiteAddress string
	Bind               string
	Domain             string
	Email              string
	HostdSocket        string
	StorageDir         string
	AccessLog          string
	Log                string

	// PreviewBody bounds a request body sent to a preview, in bytes:
	// routes.EdgeLimit(routes.PreviewBody).
	PreviewBody, MaxHeaderSize string
	// The API's edge body limits, worked out from hostd's route table.
	// The shipped files no longer use them (paddock_limits does the
	// same per route); an operator's own file written against the old
	// shipped one may.
	APIBody, UploadBody, FileBody, SandboxFileBody string

	ReadHeader, ReadBody, ReadBodyIdle, Idle, AuthCacheTTL string
	ReadMinRate                                            int

	// CORSOrigins are the checked origins, space-separated, for
	// paddock_cors; empty when none is listed.
	CORSOrigins string
}

// Source returns a shipped Caddyfile as it is embedded, before rendering.
func Source(v Variant) (string, error) {
	b, err := files.ReadFile(string(v) + ".caddyfile")
	if err != nil {
		return "", fmt.Errorf("no shipped Caddyfile %q (known: local, domain)", v)
	}
	return string(b), nil
}

// Render returns the shipped Caddyfile v rendered for o.
func Render(v Variant, o Options) ([]byte, error) {
	src, err := Source(v)
	if err != nil {
		return nil, err
	}
	return render(string(v), src, v, o)
}

// RenderText renders an operator's own Caddyfile with the same values the
// shipped ones get ({{.HostdSocket}}, {{.StorageDir}}, {{.Domain}}…, and
// {{template "common" .}} for the shipped snippets). A file without
// {{ comes out as it went in.
func RenderText(name, text string, o Options) ([]byte, error) {
	v := Local
	if o.Domain != "" && o.Domain != LocalDomain {
		v = Domain
	}
	return render(name, text, v, o)
}

func render(name, text string, v Variant, o Options) ([]byte, error) {
	d, err := o.data(v)
	if err != nil {
		return nil, err
	}
	common, err := files.ReadFile("common.caddyfile")
	if err != nil {
		return nil, err
	}
	t := template.New(name).Option("missingkey=error")
	if _, err := t.New("common").Parse(string(common)); err != nil {
		return nil, err
	}
	if _, err := t.Parse(text); err != nil {
		return nil, fmt.Errorf("caddyfile %s: %w", name, err)
	}
	var out bytes.Buffer
	if err := t.Execute(&out, d); err != nil {
		return nil, fmt.Errorf("caddyfile %s: %w", name, err)
	}
	return out.Bytes(), nil
}

// Adapt turns a Caddyfile into Caddy's JSON configuration. Warnings are
// errors: a shipped file has none.
func Adapt(caddyfile []byte) ([]byte, error) {
	out, warns, err := caddycf.Adapter{ServerType: httpcaddyfile.ServerType{}}.Adapt(caddyfile, map[string]any{"filename": "Caddyfile"})
	if err != nil {
		return nil, err
	}
	if len(warns) > 0 {
		var msgs []string
		for _, w := range warns {
			msgs = append(msgs, w.String())
		}
		return nil, fmt.Errorf("caddyfile: %s", strings.Join(msgs, "; "))
	}
	return out, nil
}

// safeToken is what a value put into a Caddyfile may contain: no spaces,
// quotes, braces or anything else the Caddyfile lexer would read.
var safeToken = regexp.MustCompile(`^[A-Za-z0-9._/:@+=,-]+$`)

// logOutput is a log's Caddyfile output for where: stderr (for ""),
// stdout, discard, or "file PATH" for an absolute path.
func logOutput(what, where string) (string, error) {
	switch where {
	case "", "stderr":
		return "stderr", nil
	case "discard", "stdout":
		return where, nil
	}
	if !filepath.IsAbs(where) {
		return "", fmt.Errorf("caddyfile: %s %q: want stderr, discard or an absolute path", what, where)
	}
	return "file " + filepath.Clean(where), nil
}

func (o Options) data(v Variant) (data, error) {
	d := data{
		PreviewBody: edgeBytes(routes.PreviewBody), MaxHeaderSize: MaxHeaderSize,
		APIBody:         edgeSize("POST /v1/agents/sessions"),
		UploadBody:      edgeSize("PUT /v1/agents/sessions/{id}/uploads/{upload}"),
		FileBody:        edgeSize("PUT /v1/agents/sessions/{id}/files/content"),
		SandboxFileBody: edgeSize("POST /v1/sandboxes/{id}/fs/write"),
		ReadHeader:      orDefault(o.ReadHeaderTimeout, DefaultReadHeaderTimeout).String(),
		ReadBody:        orDefault(o.ReadBodyTimeout, DefaultReadBodyTimeout).String(),
		ReadBodyIdle:    orDefault(o.ReadBodyIdleTimeout, DefaultReadBodyIdleTimeout).String(),
		Idle:            orDefault(o.IdleTimeout, DefaultIdleTimeout).String(),
		AuthCacheTTL:    orDefault(o.AuthCacheTTL, DefaultAuthCacheTTL).String(),
		ReadMinRate:     o.ReadMinRate,
		Email:           o.Email,
	}
	if o.AuthCacheTTL < 0 {
		d.AuthCacheTTL = "0s"
	}
	if d.ReadMinRate == 0 {
		d.ReadMinRate = DefaultReadMinRate
	}
	if o.HostdSocket == "" || !filepath.IsAbs(o.HostdSocket) || o.StorageDir == "" || !filepath.IsAbs(o.StorageDir) {
		return d, errors.New("caddyfile: the hostd socket and the storage dir must be absolute paths")
	}
	d.HostdSocket, d.StorageDir = filepath.Clean(o.HostdSocket), filepath.Clean(o.StorageDir)
	var err error
	if d.AccessLog, err = logOutput("access log", o.AccessLog); err != nil {
		return d, err
	}
	if d.Log, err = logOutput("log", o.Log); err != nil {
		return d, err
	}
	origins, err := cors.ParseOrigins(o.CORSOrigins)
	if err != nil {
		return d, fmt.Errorf("caddyfile: --cors-origin: %w", err)
	}
	d.CORSOrigins = strings.Join(origins, " ")
	if o.Email != "" && !strings.Contains(o.Email, "@") {
		return d, fmt.Errorf("caddyfile: email %q is not an address", o.Email)
	}
	listen := o.Listen
	if listen == "" {
		listen = DefaultLocalListen
		if v == Domain {
			listen = DefaultDomainListen
		}
	}
	host, portText, err := net.SplitHostPort(listen)
	if err != nil {
		return d, fmt.Errorf("caddyfile: listen address %q: want HOST:PORT", listen)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 1 || port > 65535 {
		return d, fmt.Errorf("caddyfile: listen address %q: the port must be a number from 1 to 65535", listen)
	}
	d.Domain = strings.ToLower(strings.TrimSuffix(o.Domain, "."))
	if d.Domain == "" {
		if v == Domain {
			return d, errors.New("caddyfile: the domain variant needs a domain (--domain)")
		}
		d.Domain = LocalDomain
	}
	if !isHostname(d.Domain) {
		return d, fmt.Errorf("caddyfile: domain %q is not a host name", o.Domain)
	}
	for _, s := range []string{d.HostdSocket, d.StorageDir, d.AccessLog[strings.LastIndex(d.AccessLog, " ")+1:], d.Log[strings.LastIndex(d.Log, " ")+1:], d.Email} {
		if s != "" && !safeToken.MatchString(s) {
			return d, fmt.Errorf("caddyfile: %q has characters a Caddyfile cannot take as they are (spaces, quotes, braces)", s)
		}
	}
	var names []string
	switch ip, err := netip.ParseAddr(host); {
	case host == "" || (err == nil && ip.IsUnspecified()):
		names = []string{"localhost", "127.0.0.1"}
		if err == nil {
			d.Bind = ip.String()
		}
	case host == "localhost":
		names, d.Bind = []string{"localhost", "127.0.0.1"}, "127.0.0.1"
	case err == nil && ip.IsLoopback():
		names, d.Bind = []string{"localhost", ip.String()}, ip.String()
	case err == nil:
		names, d.Bind = []string{ip.String()}, ip.String()
	default:
		if !isHostname(host) {
			return d, fmt.Errorf("caddyfile: listen host %q is neither an address nor a host name", host)
		}
		names = []string{strings.ToLower(host)}
	}
	if v == Domain {
		names = []string{d.Domain}
	} else if d.Domain != LocalDomain && !slices.Contains(names, d.Domain) {
		names = append(names, d.Domain)
	}
	var addrs []string
	for _, n := range names {
		addrs = append(addrs, siteAddress(v, n, port))
	}
	d.SiteAddresses = strings.Join(addrs, ", ")
	d.PreviewSiteAddress = siteAddress(v, "*.preview."+d.Domain, port)
	return d, nil
}

// edgeSize is the gateway's body limit for a route of hostd's table, as a
// Caddyfile size.
func edgeSize(pattern string) string {
	rt, ok := routes.Lookup(pattern)
	if !ok {
		panic("caddyfile: no route " + pattern)
	}
	return edgeBytes(rt.BodyLimit)
}

// edgeBytes is the gateway's body limit, as a Caddyfile size, for a body
// hostd takes up to n bytes of (routes.EdgeLimit).
func edgeBytes(n int64) string { return strconv.FormatInt(routes.EdgeLimit(n), 10) }

func siteAddress(v Variant, name string, port int) string {
	if ip, err := netip.ParseAddr(name); err == nil && ip.Is6() {
		name = "[" + name + "]"
	}
	if v == Domain && port == 443 {
		return name
	}
	if v == Domain {
		return name + ":" + strconv.Itoa(port)
	}
	return "https://" + name + ":" + strconv.Itoa(port)
}

var hostnameRE = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

func isHostname(s string) bool { return len(s) <= 253 && hostnameRE.MatchString(strings.ToLower(s)) }

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
