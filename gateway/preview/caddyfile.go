package preview

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("paddock_preview", parseCaddyfile)
	// Before any auth directive: a preview route asks for no bearer token.
	httpcaddyfile.RegisterDirectiveOrder("paddock_preview", httpcaddyfile.Before, "basic_auth")
}

// parseCaddyfile reads `paddock_preview [<matcher>]`; it takes no settings.
func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	p := new(Preview)
	if err := p.UnmarshalCaddyfile(h.Dispenser); err != nil {
		return nil, err
	}
	return p, nil
}

// UnmarshalCaddyfile implements caddyfile.Unmarshaler.
func (p *Preview) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive's name
	if d.NextArg() {
		return d.ArgErr()
	}
	if d.NextBlock(0) {
		return d.Errf("paddock_preview takes no settings, found %q", d.Val())
	}
	return nil
}

var _ caddyfile.Unmarshaler = (*Preview)(nil)
