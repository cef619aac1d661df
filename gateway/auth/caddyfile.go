package auth

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("paddock_auth", parseCaddyfile)
	// Where basic_auth runs: after the request's body limit and header
	// edits, before anything that answers or proxies.
	httpcaddyfile.RegisterDirectiveOrder("paddock_auth", httpcaddyfile.After, "basic_auth")
}

// parseCaddyfile reads
//
//	paddock_auth [<matcher>] [<hostd_socket>] {
//		hostd_socket <path>
//		cache_ttl    <duration>
//		timeout      <duration>
//	}
func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	a := new(Auth)
	if err := a.UnmarshalCaddyfile(h.Dispenser); err != nil {
		return nil, err
	}
	return a, nil
}

// UnmarshalCaddyfile implements caddyfile.Unmarshaler.
func (a *Auth) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive's name
	if d.NextArg() {
		a.HostdSocket = d.Val()
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "hostd_socket":
			if !d.AllArgs(&a.HostdSocket) {
				return d.ArgErr()
			}
		case "cache_ttl", "timeout":
			name := d.Val()
			var v string
			if !d.AllArgs(&v) {
				return d.ArgErr()
			}
			dur, err := caddy.ParseDuration(v)
			if err != nil {
				return d.Errf("paddock_auth %s: %v", name, err)
			}
			if name == "cache_ttl" {
				a.CacheTTL = caddy.Duration(dur)
			} else {
				a.Timeout = caddy.Duration(dur)
			}
		default:
			return d.Errf("paddock_auth: unknown setting %q (known: hostd_socket, cache_ttl, timeout)", d.Val())
		}
	}
	return nil
}

var _ caddyfile.Unmarshaler = (*Auth)(nil)
