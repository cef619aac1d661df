package limits

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("paddock_limits", parseCaddyfile)
	// Where request_body runs: before the token check (paddock_auth, after
	// basic_auth), so an oversized body is refused before anything else.
	httpcaddyfile.RegisterDirectiveOrder("paddock_limits", httpcaddyfile.After, "request_body")
}

// parseCaddyfile reads
//
//	paddock_limits [<matcher>]
//
// which takes no settings.
func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	l := new(Limits)
	if err := l.UnmarshalCaddyfile(h.Dispenser); err != nil {
		return nil, err
	}
	return l, nil
}

// UnmarshalCaddyfile implements caddyfile.Unmarshaler.
func (l *Limits) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive's name
	if d.NextArg() {
		return d.Errf("paddock_limits takes no arguments: every limit comes from hostd's route table")
	}
	if d.NextBlock(0) {
		return d.Errf("paddock_limits takes no settings: every limit comes from hostd's route table")
	}
	return nil
}

var _ caddyfile.Unmarshaler = (*Limits)(nil)
