package auth

import (
	"context"
	"fmt"
	"net/http"
	"regexp"

	"paddock.dev/paddock/errdefs"
)

// ToolHeader is the request header in which a client names the tool it
// makes a request for (an MCP server's tool name: client.ToolHeader). It
// is a note, not an identity: it changes nothing a caller may do, and the
// ledger records it beside the caller (as "mcp_tool" in the data of the
// entries the request causes) so an audit can tell which tool did what.
const ToolHeader = "Mcp-Tool"

// toolName is what a tool note may be: a short name, never free text (so
// no file contents or secrets ride along into the ledger).
var toolName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

type toolKey struct{}

// WithToolFrom returns ctx carrying r's tool note, or an invalid_argument
// error when the header is there and is not a tool name.
func WithToolFrom(ctx context.Context, r *http.Request) (context.Context, error) {
	v, ok := r.Header[http.CanonicalHeaderKey(ToolHeader)]
	if !ok {
		return ctx, nil
	}
	if len(v) != 1 || !toolName.MatchString(v[0]) {
		return ctx, fmt.Errorf("%w: the %s header must be one tool name of 1 to 64 letters, digits, '_', '.' or '-'", errdefs.ErrInvalidArgument, ToolHeader)
	}
	return context.WithValue(ctx, toolKey{}, v[0]), nil
}

// ToolOf is the tool note ctx carries ("" when none).
func ToolOf(ctx context.Context) string {
	s, _ := ctx.Value(toolKey{}).(string)
	return s
}
