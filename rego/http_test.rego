# Tests for http.rego: an allow and a deny case for every rule of the
# network decisions and of the grant decision. policy/ also holds the
# module to egress/rules with a differential test over many requests.
package paddock.http_test

import data.paddock.http

methods := ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]

names := {
	"rule_offline": "offline",
	"rule_open": "open",
	"rule_default_deny": "default deny",
	"rule_ports": "ports 80 and 443",
	"max_shown_rules": 3,
}

offline := object.union(names, {"mode": "offline", "ports": [], "methods": methods, "entries": []})

open := object.union(names, {"mode": "open", "ports": [], "methods": methods, "entries": []})

entry(host, kind, ms, ps, rules) := {
	"host": host,
	"kind": kind,
	"suffix": substring(host, 1, -1),
	"cidr": "",
	"limited": (count(ms) + count(ps)) > 0,
	"methods": ms,
	"paths": ps,
	"rules": rules,
}

ip_entry(host, cidr) := {
	"host": host, "kind": "ip", "cidr": cidr, "limited": false,
	"methods": [], "paths": [], "rules": [concat(" ", ["allow *", host])],
}

allowlist := object.union(names, {
	"mode": "allowlist",
	"ports": [80, 443],
	"methods": methods,
	"entries": [
		entry("pypi.org", "exact", [], [], ["allow * pypi.org"]),
		entry("*.example.com", "wildcard", [], [], ["allow * *.example.com"]),
		entry("github.com", "exact", ["GET", "HEAD"], ["/org/*"], ["allow GET,HEAD github.com/org/*"]),
		entry("api.test", "exact", [], ["/a/*", "/b"], ["allow * api.test/a/*", "allow * api.test/b"]),
		entry("upload.test", "exact", ["POST"], [], ["allow POST upload.test"]),
		entry("many.test", "exact", ["GET"], ["/1", "/2", "/3", "/4", "/5"], [
			"allow GET many.test/1", "allow GET many.test/2", "allow GET many.test/3",
			"allow GET many.test/4", "allow GET many.test/5",
		]),
		ip_entry("203.0.113.7", "203.0.113.7/32"),
		ip_entry("2001:db8::1", "2001:db8::1/128"),
	],
})

req(pol, host, port, m, p) := {
	"action": "request",
	"policy": pol,
	"request": {"host": host, "port": port, "scheme": "https", "method": m, "path": p},
}

decide(pol, host, port, m, p) := d if {
	d := http.decision with input as req(pol, host, port, m, p)
}

tunnel(pol, host, port) := d if {
	d := http.tunnel with input as req(pol, host, port, "", "")
}

name_ok(pol, host) if name(pol, host)

name(pol, host) := v if {
	v := http.allows_name with input as req(pol, host, 0, "", "")
}

# allows_name

test_open_allows_every_name if name_ok(open, "anything.test")

test_offline_allows_no_name if not name_ok(offline, "pypi.org")

test_allowlist_allows_a_listed_name if name_ok(allowlist, "pypi.org")

test_allowlist_refuses_an_unlisted_name if not name_ok(allowlist, "evil.test")

test_wildcard_covers_names_below_it if {
	name_ok(allowlist, "a.example.com")
	name_ok(allowlist, "a.b.example.com")
}

test_wildcard_does_not_cover_the_suffix_itself if {
	not name_ok(allowlist, "example.com")
	not name_ok(allowlist, ".example.com")
	not name_ok(allowlist, "evilexample.com")
}

test_host_is_normalised if {
	name_ok(allowlist, "PyPI.org.")
	name_ok(allowlist, "[2001:db8::1]")
	name_ok(allowlist, "2001:DB8:0::1")
}

test_only_ascii_letters_are_lower_cased if {
	# The Kelvin sign is not a K.
	not name_ok(allowlist, "\u212aa.test")
	name_ok(allowlist, "\u212a.EXAMPLE.com")
}

test_ip_literal_matches_any_form_of_the_address if {
	name_ok(allowlist, "203.0.113.7")
	name_ok(allowlist, "::ffff:203.0.113.7")
	not name_ok(allowlist, "203.0.113.8")
	not name_ok(allowlist, "203.0.113.7/32")
	not name_ok(allowlist, "fe80::1%eth0")
}

# tunnel

test_offline_refuses_tunnels if {
	d := tunnel(offline, "pypi.org", 443)
	not d.allow
	d.rule == "offline"
}

test_open_allows_any_port if {
	d := tunnel(open, "x.test", 8443)
	d.allow
	d.rule == "open"
	not d.inspect
}

test_open_refuses_a_port_out_of_range if {
	d := tunnel(open, "x.test", 0)
	not d.allow
	d.rule == "open"
	not tunnel(open, "x.test", 65536).allow
}

test_unknown_mode_refuses if {
	d := tunnel(object.union(open, {"mode": "sideways"}), "x.test", 443)
	not d.allow
	d.rule == "policy.mode"
}

test_allowlist_refuses_other_ports if {
	d := tunnel(allowlist, "pypi.org", 8080)
	not d.allow
	d.rule == "ports 80 and 443"
	contains(d.reason, "only 80 and 443")
}

test_allowlist_refuses_unlisted_hosts if {
	d := tunnel(allowlist, "evil.test", 443)
	not d.allow
	d.rule == "default deny"
	contains(d.reason, "evil.test is not in the allow list")
}

test_unlimited_entry_allows_without_inspection if {
	d := tunnel(allowlist, "pypi.org", 443)
	d.allow
	d.rule == "allow * pypi.org"
	not d.inspect
}

test_limited_entry_allows_with_inspection if {
	d := tunnel(allowlist, "github.com", 443)
	d.allow
	d.inspect
	d.rule == "allow GET,HEAD github.com/org/*"
}

# decision

test_decision_keeps_a_tunnel_refusal if {
	d := decide(allowlist, "evil.test", 443, "GET", "/")
	not d.allow
	d.rule == "default deny"
}

test_decision_of_an_unlimited_host if {
	d := decide(allowlist, "pypi.org", 80, "DELETE", "/anything")
	d.allow
	not d.inspect
}

test_limited_entry_allows_its_method_and_path if {
	d := decide(allowlist, "github.com", 443, "GET", "/org/repo.git/info/refs")
	d.allow
	d.inspect
	d.rule == "allow GET,HEAD github.com/org/*"
}

test_limited_entry_refuses_another_method if {
	d := decide(allowlist, "github.com", 443, "POST", "/org/repo")
	not d.allow
	d.inspect
	d.rule == "allow GET,HEAD github.com/org/*"
	d.reason == "POST github.com/org/repo is not allowed (rule: allow GET,HEAD github.com/org/*)"
}

test_limited_entry_refuses_another_path if {
	d := decide(allowlist, "github.com", 443, "GET", "/other/repo")
	not d.allow
}

test_limited_entry_refuses_a_path_that_is_not_canonical if {
	d := decide(allowlist, "github.com", 443, "GET", "/org/../admin")
	not d.allow
	contains(d.reason, "not canonical")
}

test_paths_only_entry_names_the_matching_path_rule if {
	d := decide(allowlist, "api.test", 443, "PATCH", "/b")
	d.allow
	d.rule == "allow * api.test/b"
}

test_paths_only_entry_refuses_unknown_methods if {
	not decide(allowlist, "api.test", 443, "TRACE", "/b").allow
	not decide(allowlist, "api.test", 443, "BREW", "/b").allow
}

test_methods_only_entry_allows_any_canonical_path if {
	decide(allowlist, "upload.test", 443, "POST", "/x/y").allow
	not decide(allowlist, "upload.test", 443, "GET", "/x/y").allow
	not decide(allowlist, "upload.test", 443, "POST", "/x//y").allow
}

test_refusal_names_at_most_three_rules if {
	d := decide(allowlist, "many.test", 443, "GET", "/6")
	not d.allow
	d.rule == "allow GET many.test/1; allow GET many.test/2; allow GET many.test/3; and 2 more"
	contains(d.reason, "(rules: ")
}

test_refusal_quotes_odd_requests if {
	d := decide(allowlist, "github.com", 443, "get me", "/a b")
	not d.allow
	contains(d.reason, `"get me" github.com path "/a b"`)
	e := decide(allowlist, "github.com", 443, "", "/x")
	contains(e.reason, "(no method) github.com/x")
}

test_refusal_brackets_ipv6_and_quotes_odd_hosts if {
	contains(tunnel(allowlist, "2001:db8::2", 443).reason, "[2001:db8::2]")
	contains(tunnel(allowlist, "a b.test", 443).reason, `"a b.test"`)
}

# grant

grant_input(scheme, host, port, m, p, g) := {
	"action": "grant",
	"grant": g,
	"request": {"scheme": scheme, "host": host, "port": port, "method": m, "path": p},
}

grant(scheme, host, port, m, p, g) := d if {
	d := http.grant with input as grant_input(scheme, host, port, m, p, g)
}

gh := {"id": "g1", "hosts": ["api.github.com", "*.githubusercontent.com"]}

gh_limited := {
	"id": "g2", "hosts": ["api.github.com"],
	"methods": ["GET"], "paths": ["/repos/org/*"],
}

gh_paths_only := {"id": "g3", "hosts": ["api.github.com"], "paths": ["/repos/org/*"]}

test_grant_applies_to_https_on_its_host if {
	d := grant("https", "api.github.com", 443, "POST", "/anything", gh)
	d.applies
	d.rule == "grant.applies"
}

test_grant_wildcard_host if {
	grant("https", "raw.githubusercontent.com", 443, "GET", "/", gh).applies
	not grant("https", "githubusercontent.com", 443, "GET", "/", gh).applies
}

test_grant_pattern_is_normalised if {
	grant("https", "api.github.com", 443, "GET", "/", {"hosts": ["API.GitHub.com."]}).applies
}

test_grant_refuses_plain_http if {
	d := grant("http", "api.github.com", 443, "GET", "/", gh)
	not d.applies
	d.rule == "grant.scheme"
}

test_grant_refuses_another_port if {
	d := grant("https", "api.github.com", 8443, "GET", "/", gh)
	not d.applies
	d.rule == "grant.port"
}

test_grant_refuses_another_host if {
	d := grant("https", "api.github.com.evil.test", 443, "GET", "/", gh)
	not d.applies
	d.rule == "grant.host"
}

test_grant_wildcard_never_covers_an_ip if {
	d := grant("https", "1.2.3.4", 443, "GET", "/", {"hosts": ["*.2.3.4"]})
	d.rule == "grant.host"
}

test_grant_refuses_a_path_that_is_not_canonical if {
	d := grant("https", "api.github.com", 443, "GET", "/repos/org/%2e%2e/x", gh_limited)
	not d.applies
	d.rule == "grant.path_not_canonical"
}

test_grant_within_its_limits if {
	d := grant("https", "api.github.com", 443, "GET", "/repos/org/x/issues", gh_limited)
	d.applies
}

test_grant_refuses_another_method if {
	d := grant("https", "api.github.com", 443, "DELETE", "/repos/org/x", gh_limited)
	not d.applies
	d.rule == "grant.method"
}

test_grant_refuses_another_path if {
	d := grant("https", "api.github.com", 443, "GET", "/repos/other/x", gh_limited)
	not d.applies
	d.rule == "grant.path"
}

test_grant_limiting_paths_takes_known_methods_only if {
	grant("https", "api.github.com", 443, "PUT", "/repos/org/x", gh_paths_only).applies
	d := grant("https", "api.github.com", 443, "TRACE", "/repos/org/x", gh_paths_only)
	d.rule == "grant.method"
}

# The index rules.Data carries (exact names, wildcards, IP literals)
# must give the same answers as trying every entry.

indexed := object.union(allowlist, {
	"exact": {h: [i | some i, e in allowlist.entries; e.kind == "exact"; e.host == h] |
		some e in allowlist.entries
		e.kind == "exact"
		h := e.host
	},
	"wildcards": [i | some i, e in allowlist.entries; e.kind == "wildcard"],
	"ips": [i | some i, e in allowlist.entries; e.kind == "ip"],
})

test_index_gives_the_same_answers if {
	every h in ["pypi.org", "PyPI.org.", "a.example.com", "example.com", "github.com", "api.test", "many.test", "203.0.113.7", "::ffff:203.0.113.7", "[2001:db8::1]", "evil.test", ""] {
		name(allowlist, h) == name(indexed, h)
		tunnel(allowlist, h, 443) == tunnel(indexed, h, 443)
		decide(allowlist, h, 443, "GET", "/org/x") == decide(indexed, h, 443, "GET", "/org/x")
		decide(allowlist, h, 443, "POST", "/b") == decide(indexed, h, 443, "POST", "/b")
	}
}

test_index_without_ip_entries if {
	d := decide(object.union(indexed, {"ips": []}), "203.0.113.7", 443, "GET", "/")
	not d.allow
	d.rule == "default deny"
}

# policy.Engine also hands back the compiled paths (http.compiled) with
# the policy: the answers must not change.
test_compiled_paths_give_the_same_answers if {
	comp := http.compiled with input as {"policy": indexed}
	with_paths := object.union(indexed, {"compiled": comp})
	every p in ["/org/x", "/b", "/a/q", "/1", "/5", "/org/../x", "/"] {
		every h in ["github.com", "api.test", "many.test", "upload.test"] {
			decide(indexed, h, 443, "GET", p) == decide(with_paths, h, 443, "GET", p)
		}
	}
}
