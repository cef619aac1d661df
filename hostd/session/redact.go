package session

import (
	"regexp"
	"strings"

	apiv1 "paddock.dev/paddock/api"
)

// secretsRE matches what must never reach a log: a preview token ("pvw-"
// and its characters, whole or cut short, in any case), a terminal ticket
// ("pdk_pty_" and its hex digits), and any other Paddock token ("pdk_":
// session and tenant tokens, a generated admin token), whole or cut
// short, also percent-encoded ("pdk%5F").
var secretsRE = regexp.MustCompile(`(?i)pvw-[a-z0-9]+|pdk_pty_[0-9a-f]+|pdk(?:_|%5f)[0-9a-z_.~%-]+`)

// RedactSecrets replaces every preview token, terminal ticket and
// Paddock token in s (a path, a query, an error's text) with its prefix
// and "[redacted]".
func RedactSecrets(s string) string {
	return secretsRE.ReplaceAllStringFunc(s, func(m string) string {
		switch {
		case len(m) >= len(apiv1.PreviewTokenPrefix) && strings.EqualFold(m[:len(apiv1.PreviewTokenPrefix)], apiv1.PreviewTokenPrefix):
			return apiv1.PreviewTokenPrefix + "[redacted]"
		case len(m) >= len("pdk_pty_") && strings.EqualFold(m[:len("pdk_pty_")], "pdk_pty_"):
			return "pdk_pty_[redacted]"
		}
		return "pdk_[redacted]"
	})
}
