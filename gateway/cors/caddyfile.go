package cors

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("paddock_cors", parseCaddyfile)
	// Before the body limit (paddock_limits, after request_body) and the
	// token check (paddock_auth, after basic_auth): a preflight carries no
	// token, and the gateway's own refusals (413, 401) must carry the
	// CORS headers too, or the page cannot read them.
	httpcaddyfile.RegisterDirectiveOrder("paddock_cors", httpcaddyfile.Before, "request_body")
}

// parseCaddyfile reads
//
//	paddock_cors [<matcher>] [<origin>...] {
//		origins <origin>...
//	}
func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	c := new(CORS)
	if err := c.UnmarshalCaddyfile(h.Dispenser); err != nil {
		return nil, err
	}
	return c, nil
}

// UnmarshalCaddyfile implements caddyfile.Unmarshaler. The origins are
// checked here too, so a bad one fails the adapt with its reason.
func (c *CORS) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive's name
	c.Origins = append(c.Origins, d.RemainingArgs()...)
	for d.NextBlock(0) {
		switch d.Val() {
		case "origins":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			c.Origins = append(c.Origins, args...)
		default:
			return d.Errf("paddock_cors: unknown setting %q (known: origins)", d.Val())
		}
	}
	if len(c.Origins) == 0 {
		return d.Err("paddock_cors: no origin listed (give each page's origin, https://app.example.com)")
	}
	if _, err := ParseOrigins(c.Origins); err != nil {
		return d.Err(err.Error())
	}
	return nil
}

var _ caddyfile.Unmarshaler = (*CORS)(nil)
