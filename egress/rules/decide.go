package rules

import (
	"fmt"
	"strings"

	"paddock.dev/paddock/egress"
)

var _ egress.Policy = (*Compiled)(nil)

// Rule names used in decisions that no allow entry made.
const (
	RuleOffline     = "offline"
	RuleOpen        = "open"
	RuleDefaultDeny = "default deny"
	RulePorts       = "ports 80 and 443"
)

// Bounds on a reason: the bytes of a request path quoted in it, and the
// number of rules named.
const (
	maxShownPath  = 200
	maxShownRules = 3
)

// AllowsName reports whether some request to host could be allowed: in
// allowlist mode, whether any entry's host pattern matches it.
func (c *Compiled) AllowsName(host string) bool {
	switch c.mode {
	case ModeOpen:
		return true
	case ModeAllowlist:
		return len(c.matching(normalHost(host))) > 0
	}
	return false
}

// Tunnel decides whether a connection to host:port may start. In
// allowlist mode only ports 80 and 443 are allowed (open mode allows any
// port), and only to a host some entry matches. Inspect is set when every
// matching entry is limited, so the requests inside must be judged one by
// one.
func (c *Compiled) Tunnel(host string, port int) egress.Decision {
	h := normalHost(host)
	switch c.mode {
	case ModeOffline:
		return deny(RuleOffline, "the session is offline: no network is allowed")
	case ModeOpen:
		if port < 1 || port > 65535 {
			return deny(RuleOpen, fmt.Sprintf("port %d is out of range", port))
		}
		return egress.Decision{Allow: true, Rule: RuleOpen}
	}
	if port != 80 && port != 443 {
		return deny(RulePorts, fmt.Sprintf("port %d of %s is not allowed: only 80 and 443 are", port, hostInText(h)))
	}
	ms := c.matching(h)
	if len(ms) == 0 {
		return deny(RuleDefaultDeny, fmt.Sprintf("%s is not in the allow list", hostInText(h)))
	}
	for _, e := range ms {
		if e.limits.Unlimited() {
			return egress.Decision{Allow: true, Rule: e.rules[0]}
		}
	}
	return egress.Decision{Allow: true, Rule: joinRules(ms), Inspect: true}
}

// Decide judges one HTTP request: the port and host as Tunnel does, then,
// when only limited entries match the host, the method and the path. A
// path that is not canonical matches no limited entry.
func (c *Compiled) Decide(r egress.Request) egress.Decision {
	d := c.Tunnel(r.Host, r.Port)
	if !d.Allow || !d.Inspect {
		return d
	}
	h := normalHost(r.Host)
	ms := c.matching(h)
	for _, e := range ms {
		if i, ok := e.limits.match(r.Method, r.Path); ok {
			return egress.Decision{Allow: true, Rule: e.rules[i], Inspect: true}
		}
	}
	what := shownRequest(r.Method, hostInText(h), r.Path)
	rules := joinRules(ms)
	var why string
	if canon, err := CanonicalPath(r.Path); err != nil || canon != r.Path {
		if err == nil {
			err = fmt.Errorf("%w: its escapes should be upper case", ErrPathNotCanonical)
		}
		why = fmt.Sprintf("%s is not allowed: %v, and limited rules match canonical paths only (%s)", what, err, ruleLabel(ms, rules))
	} else {
		why = fmt.Sprintf("%s is not allowed (%s)", what, ruleLabel(ms, rules))
	}
	return egress.Decision{Allow: false, Rule: rules, Reason: why, Inspect: true}
}

// matching returns the entries whose host pattern matches h.
func (c *Compiled) matching(h string) []entry {
	var out []entry
	for _, e := range c.entries {
		if e.host.matches(h) {
			out = append(out, e)
		}
	}
	return out
}

func deny(rule, reason string) egress.Decision {
	return egress.Decision{Allow: false, Rule: rule, Reason: reason}
}

// joinRules names the rules of some entries, at most maxShownRules of
// them.
func joinRules(es []entry) string {
	var all []string
	for _, e := range es {
		all = append(all, e.rules...)
	}
	if len(all) > maxShownRules {
		return strings.Join(all[:maxShownRules], "; ") + fmt.Sprintf("; and %d more", len(all)-maxShownRules)
	}
	return strings.Join(all, "; ")
}

func ruleLabel(es []entry, rules string) string {
	n := 0
	for _, e := range es {
		n += len(e.rules)
	}
	if n == 1 {
		return "rule: " + rules
	}
	return "rules: " + rules
}

// shownRequest writes a request for a reason: "POST github.com/org/x",
// quoting what holds odd bytes and cutting a long path short.
func shownRequest(method, host, path string) string {
	if method == "" {
		method = "(no method)"
	} else if !isPlain(method) || len(method) > 16 {
		method = fmt.Sprintf("%.16q", method)
	}
	short := path
	if len(short) > maxShownPath {
		short = short[:maxShownPath] + "..."
	}
	if !isPlain(path) {
		return fmt.Sprintf("%s %s path %q", method, host, short)
	}
	return method + " " + host + short
}

// hostInText writes a request's host for a reason, bracketing an IPv6
// literal and quoting odd bytes.
func hostInText(h string) string {
	switch {
	case !isPlain(h):
		return fmt.Sprintf("%q", h)
	case strings.Contains(h, ":"):
		return "[" + h + "]"
	}
	return h
}

// isPlain: printable ASCII only.
func isPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= 0x20 || s[i] >= 0x7f {
			return false
		}
	}
	return true
}
