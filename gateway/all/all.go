// Package all links in every Caddy module the gateway's Caddyfiles use:
// Caddy's own (HTTP server, reverse proxy, TLS with the internal CA and
// ACME, logging filters) and Paddock's (gateway/auth, gateway/cors,
// gateway/limits, gateway/preview). Import it for its side effect, as `paddock` and the adapt tests do.
package all

import (
	// Caddy's modules the shipped Caddyfiles use.
	_ "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/caddyhttp"
	_ "github.com/caddyserver/caddy/v2/modules/caddyhttp/headers"
	_ "github.com/caddyserver/caddy/v2/modules/caddyhttp/requestbody"
	_ "github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	_ "github.com/caddyserver/caddy/v2/modules/caddyhttp/timeouts"
	_ "github.com/caddyserver/caddy/v2/modules/caddypki"
	_ "github.com/caddyserver/caddy/v2/modules/caddytls"
	_ "github.com/caddyserver/caddy/v2/modules/caddytls/standardstek"
	_ "github.com/caddyserver/caddy/v2/modules/filestorage"
	_ "github.com/caddyserver/caddy/v2/modules/logging"

	// Paddock's modules.
	_ "paddock.dev/paddock/gateway/auth"
	_ "paddock.dev/paddock/gateway/cors"
	_ "paddock.dev/paddock/gateway/limits"
	_ "paddock.dev/paddock/gateway/preview"
)
