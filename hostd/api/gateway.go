package api

import (
	"log/slog"
	"net/http"

	"paddock.dev/paddock/hostd/auth"
)

// GatewayIdentityHeader is where the gateway (gateway/auth) names the
// caller it verified. It is for the log and audit only: authorization
// always comes from the bearer token (or terminal ticket), which hostd
// verifies itself, so a gateway that lies, or a client that reaches the
// socket directly and sets the header, changes nothing but a log line.
const GatewayIdentityHeader = "Paddock-Identity"

// gatewayIdentity returns the log attributes of what the gateway said of
// the caller of r (verified already), and warns when it differs from the
// caller hostd found: a gateway that misbehaves, or a header that did
// not come from one.
func gatewayIdentity(log *slog.Logger, r *http.Request) []any {
	said := r.Header.Get(GatewayIdentityHeader)
	if said == "" {
		return nil
	}
	if actor := auth.ActorOf(r.Context()); said != actor {
		log.Warn("the gateway's identity of a caller is not the token's", "gateway_identity", said, "actor", actor, "path", logPath(r))
	}
	return []any{"gateway_identity", said}
}
