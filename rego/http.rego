# Decides what a sandbox may reach over the network: the same answers the
# egress proxy's native rules give (egress/rules), from the compiled
# policy written out as data (rules.Compiled.Data), and whether a
# credential grant applies to one request.
#
# Input for the network decisions:
#
#   {"action": "name" | "tunnel" | "request", "session": "ses-…",
#    "policy": {"mode": "offline" | "allowlist" | "open",
#               "ports": [80, 443], "methods": ["GET", …],
#               "entries": [{"host", "kind": "exact" | "wildcard" | "ip",
#                            "suffix", "cidr", "limited", "methods",
#                            "paths", "rules"}, …],
#               "exact": {name: [entry index…]}, "wildcards": [index…],
#               "ips": [index…],
#               "rule_offline", "rule_open", "rule_default_deny",
#               "rule_ports", "max_shown_rules",
#               "compiled": see the rule of that name (optional)},
#    "request": {"host", "port", "scheme", "method", "path"}}
#
# Outputs:
#
#   allows_name: whether any request to input.request.host could be
#     allowed (the resolver answers the name only then);
#   tunnel: {allow, rule, reason, inspect} for a connection to host:port;
#   decision: {allow, rule, reason, inspect} for one HTTP request.
#
# Input for the grant decision (policy.GrantInput):
#
#   {"action": "grant", "session": "ses-…",
#    "grant": {"id", "hosts": [pattern…], "methods": [M…], "paths": [P…]},
#    "request": {"scheme", "host", "port", "method", "path"}}
#
# Output: grant, {applies, rule, reason}.
package paddock.http

import data.paddock.lib

policy := object.get(input, "policy", {})

mode := object.get(policy, "mode", "offline")

entries := object.get(policy, "entries", [])

port := object.get(input, ["request", "port"], 0)

method := object.get(input, ["request", "method"], "")

path := object.get(input, ["request", "path"], "")

# host is the request's host lightly normalised, as the native rules do:
# one trailing dot removed, brackets around an IPv6 literal removed, A-Z
# lower-cased. Hosts are expected canonical already (egress/addr).
host := lib.ascii_lower(unbracketed(trim_suffix(object.get(input, ["request", "host"], ""), ".")))

unbracketed(h) := trim_suffix(trim_prefix(h, "["), "]") if {
	startswith(h, "[")
	endswith(h, "]")
} else := h

# host_matches(e, h): entry e's host pattern covers host h. An exact name
# is that name only; "*.example.com" is every name below example.com and
# not example.com itself; an IP literal is that address in any form
# (IPv4-mapped IPv6 included), never with a zone.
host_matches(e, h) if {
	e.kind == "exact"
	h == e.host
}

host_matches(e, h) if {
	e.kind == "wildcard"
	endswith(h, e.suffix)
	h != e.suffix
}

host_matches(e, h) if {
	e.kind == "ip"
	lib.is_ip(h)
	net.cidr_contains(e.cidr, h)
}

# compiled is what decisions need from the policy alone: for each entry,
# its path patterns as one regular expression (lib.list_regex) and the
# template that names the pattern that matched (lib.groups_template). It
# depends on the policy only, so policy.Engine computes it once per
# session and hands it back as input.policy.compiled; without that, it is
# computed here.
compiled := [{"paths": lib.list_regex(e.paths), "groups": lib.groups_template(count(e.paths))} | some e in entries]

paths_compiled := policy.compiled if policy.compiled

else := compiled

# matching_index lists the entries whose host pattern covers the
# request's host, in the policy's order. With the policy's index
# (rules.Data: exact names to entries, and which entries are wildcards
# and IP literals) an exact name is one lookup; without it every entry is
# tried.
matching_index := sort(array.concat(
	object.get(policy.exact, host, []),
	array.concat(wildcard_hits, ip_hits),
)) if {
	policy.exact
}

else := [i | some i, e in entries; host_matches(e, host)]

wildcard_hits := [i |
	some i in policy.wildcards
	suffix := entries[i].suffix
	endswith(host, suffix)
	host != suffix
]

ip_hits := [i |
	count(policy.ips) > 0
	lib.is_ip(host)
	some i in policy.ips
	net.cidr_contains(entries[i].cidr, host)
]

matching := [entries[i] | some i in matching_index]

# unlimited is the first matching entry without limits: it opens the host.
unlimited := [e | some i in matching_index; e := entries[i]; not e.limited][0]

default allows_name := false

allows_name if mode == "open"

allows_name if {
	mode == "allowlist"
	count(matching_index) > 0
}

# The common answer comes first: an allow-list entry without limits opens
# the host. It cannot apply when an earlier rule of the order below would.
tunnel := {"allow": true, "rule": unlimited.rules[0], "reason": "", "inspect": false} if {
	mode == "allowlist"
	port in policy.ports
	unlimited
}

else := {
	"allow": false,
	"rule": policy.rule_offline,
	"reason": "the session is offline: no network is allowed",
	"inspect": false,
} if {
	mode == "offline"
}

else := {
	"allow": false,
	"rule": policy.rule_open,
	"reason": sprintf("port %v is out of range", [port]),
	"inspect": false,
} if {
	mode == "open"
	not valid_port
}

else := {"allow": true, "rule": policy.rule_open, "reason": "", "inspect": false} if {
	mode == "open"
}

else := {
	"allow": false,
	"rule": "policy.mode",
	"reason": sprintf("network mode %q is unknown, so nothing is allowed", [mode]),
	"inspect": false,
} if {
	mode != "allowlist"
}

else := {
	"allow": false,
	"rule": policy.rule_ports,
	"reason": sprintf("port %v of %s is not allowed: only %s are", [port, host_text, ports_text]),
	"inspect": false,
} if {
	not port in policy.ports
}

else := {
	"allow": false,
	"rule": policy.rule_default_deny,
	"reason": sprintf("%s is not in the allow list; add it to network.allow to reach it", [host_text]),
	"inspect": false,
} if {
	count(matching) == 0
}

else := {"allow": true, "rule": rules_text, "reason": "", "inspect": true}

valid_port if {
	is_number(port)
	port >= 1
	port <= 65535
}

# decision judges one request: as the tunnel does, then, when only
# limited entries cover the host, by method and path.
decision := limited if inspected

else := tunnel

# inspected: the tunnel is allowed because of limited entries only, so
# each request is judged by method and path.
inspected if {
	mode == "allowlist"
	port in policy.ports
	count(matching_index) > 0
	not unlimited
}

limited := {"allow": true, "rule": rule, "reason": "", "inspect": true} if {
	rule := limited_hits[0]
}

else := {
	"allow": false,
	"rule": rules_text,
	"reason": sprintf("%s is not allowed (%s: %s)%s", [request_text, rule_label, rules_text, path_note]),
	"inspect": true,
}

# limited_hits are the rules that allow the request, in order: the first
# is the first path pattern of the first entry that allows it.
limited_hits := [entries[i].rules[j] |
	lib.canonical_path(path)
	some i in matching_index
	method_allowed(entries[i].methods)
	j := path_index(i)
]

method_allowed(ms) if {
	count(ms) > 0
	method in ms
}

# Limiting paths only still takes only the known methods: never TRACE,
# CONNECT or an unknown one.
method_allowed(ms) if {
	count(ms) == 0
	method in policy.methods
}

path_index(i) := 0 if count(entries[i].paths) == 0

else := lib.pattern_index(c.paths, c.groups, path) if {
	c := paths_compiled[i]
	regex.match(c.paths, path)
}

# all_rules names the rules of the matching entries, at most
# max_shown_rules of them.
all_rules := [r | some e in matching; some r in e.rules]

rules_text := concat("; ", all_rules) if count(all_rules) <= policy.max_shown_rules

else := sprintf("%s; and %d more", [
	concat("; ", array.slice(all_rules, 0, policy.max_shown_rules)),
	count(all_rules) - policy.max_shown_rules,
])

rule_label := "rule" if count(all_rules) == 1

else := "rules"

path_note := "" if lib.canonical_path(path)

else := "; the path is not canonical (an empty, dot or encoded-dot segment, a lower-case or needless escape, or a byte that must be escaped), and limited rules match canonical paths only"

ports_text := concat(" and ", [sprintf("%v", [p]) | some p in policy.ports])

# host_text writes the host for a reason: quoted when it holds odd bytes,
# bracketed when it is an IPv6 literal.
host_text := sprintf("%q", [host]) if not regex.match(`^[\x21-\x7e]*$`, host)

else := sprintf("[%s]", [host]) if contains(host, ":")

else := host

request_text := sprintf("%s %s%s", [method_text, host_text, lib.shown(path)]) if regex.match(`^[\x21-\x7e]*$`, path)

else := sprintf("%s %s path %q", [method_text, host_text, lib.shown(path)])

method_text := "(no method)" if method == ""

else := sprintf("%q", [substring(method, 0, 16)]) if not regex.match("^[A-Z]{1,16}$", method)

else := method

# Credential grants.
#
# A grant applies to a request over HTTPS to port 443 of a host one of its
# patterns names, with a canonical path, and, when the grant has limits,
# within them: the method one of its methods (any known method when it
# limits paths only) and the path matching one of its paths, where `*`
# matches any run, `/` included. Grant limits come checked and in
# canonical form (rules.NewLimits).
grant_methods := object.get(input, ["grant", "methods"], [])

grant_paths := object.get(input, ["grant", "paths"], [])

grant := {"applies": false, "rule": "grant.scheme", "reason": "a grant is only carried inside intercepted HTTPS"} if {
	object.get(input, ["request", "scheme"], "") != "https"
}

else := {"applies": false, "rule": "grant.port", "reason": sprintf("a grant is for port 443 (the host's HTTPS service), not port %v", [port])} if {
	port != 443
}

else := {"applies": false, "rule": "grant.host", "reason": sprintf("%s is not one of the grant's hosts", [host_text])} if {
	not grant_host
}

else := {"applies": false, "rule": "grant.path_not_canonical", "reason": "the request path is not canonical, so no grant applies to it"} if {
	not lib.canonical_path(path)
}

else := {"applies": false, "rule": "grant.method", "reason": sprintf("%s is not one of the grant's methods", [method_text])} if {
	not grant_method
}

else := {"applies": false, "rule": "grant.path", "reason": sprintf("%s matches none of the grant's paths", [lib.shown(path)])} if {
	not grant_path
}

else := {"applies": true, "rule": "grant.applies", "reason": ""}

grant_host if {
	some raw in object.get(input, ["grant", "hosts"], [])
	grant_host_matches(lib.ascii_lower(unbracketed(trim_suffix(raw, "."))), host)
}

grant_host_matches(p, h) if {
	startswith(p, "*.")
	suffix := trim_prefix(p, "*")
	suffix != "."
	not lib.is_ip(h)
	endswith(h, suffix)
	h != suffix
}

grant_host_matches(p, h) if {
	not startswith(p, "*.")
	p == h
}

grant_method if {
	count(grant_methods) == 0
	count(grant_paths) == 0
}

grant_method if {
	count(grant_methods) > 0
	method in grant_methods
}

grant_method if {
	count(grant_methods) == 0
	count(grant_paths) > 0
	method in known_methods
}

grant_path if count(grant_paths) == 0

grant_path if regex.match(lib.list_regex(grant_paths), path)

# known_methods are the methods a limit may name (rules.Methods): a
# grant's input carries no policy, so they are written here too, and a
# Go test holds the two lists equal.
known_methods := ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
