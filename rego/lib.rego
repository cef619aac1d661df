# Helpers shared by Paddock's policy modules: pattern matching where `*` is
# the only wildcard, ASCII lower-casing, and the canonical request path
# check that method and path rules depend on. Nothing here decides.
package paddock.lib

# pattern_body(p) is p as the body of a regular expression: every RE2
# metacharacter but `*` is escaped, and `*` becomes `.*`. So `*` matches
# any run of characters (none, spaces and `/` included) and everything
# else, `?`, `[`, `{` and `\` too, matches itself. RE2 matches in linear
# time, so no pattern can make a decision slow.
pattern_body(p) := replace(regex.replace(p, `[\\.+?()|\[\]{}^$]`, `\$0`), "*", ".*")

# pattern_regex(p) is the whole-string regular expression for one pattern.
pattern_regex(p) := concat("", ["^(?s:", pattern_body(p), ")$"])

# list_regex(ps) is one regular expression for a list of patterns, made
# to be matched against pieces written one per line (concat("\n",
# pieces)): it matches each line that a pattern matches as a whole, with
# each pattern in a capture group of its own, in order, so the first
# group that took part names the pattern (pattern_index). The patterns
# are joined, escaped and turned into groups by one replacement pass, so
# the cost does not grow with their number. They must not hold a NUL byte
# (no_nul) or a line break (which no piece holds).
list_regex(ps) := concat("", ["(?m)^(?:(", strings.replace_n(list_escapes, concat("\u0000", ps)), "))$"])

# list_escapes escapes RE2's metacharacters, turns * into a run of
# anything but a line break, and NUL (the join) into the next group.
list_escapes := {
	"\\": `\\`, ".": `\.`, "+": `\+`, "?": `\?`, "(": `\(`, ")": `\)`,
	"|": `\|`, "[": `\[`, "]": `\]`, "{": `\{`, "}": `\}`, "^": `\^`,
	"$": `\$`, "*": ".*", "\u0000": ")|(",
}

# groups_template(n) is the replacement template "${1}\n${2}\n…${n}":
# with it, regex.replace turns a line that a list_regex of n patterns
# matches into the text of each pattern's group, one per line.
groups_template(n) := concat("\n", [sprintf("${%d}", [i]) | some i in numbers.range(1, n)]) if n > 0

else := ""

# pattern_index(re, template, line) is the index of the first pattern of
# the list that re (list_regex) and template (groups_template) were made
# from that matches line, which it must match. Only the group of that
# pattern took part, and it holds the whole line, while every group before
# it is empty; so in the groups written one per line (a line never holds
# a line break) the line starts after as many line breaks as its index.
pattern_index(re, template, line) := indexof(regex.replace(line, re, template), line)

# matches(p, s): pattern p matches the whole of s (which may hold line
# breaks: `*` runs across them here). For operator modules, which may
# want to match a pattern against input.command or a path.
matches(p, s) := regex.match(pattern_regex(p), s)

# ascii_lower(s) lower-cases A-Z only, byte by byte, like the egress
# rules do (lower() would also change non-ASCII letters, and the Kelvin
# sign would become a k).
ascii_lower(s) := s if lower(s) == s

else := strings.replace_n(
	{
		"A": "a", "B": "b", "C": "c", "D": "d", "E": "e", "F": "f", "G": "g",
		"H": "h", "I": "i", "J": "j", "K": "k", "L": "l", "M": "m", "N": "n",
		"O": "o", "P": "p", "Q": "q", "R": "r", "S": "s", "T": "t", "U": "u",
		"V": "v", "W": "w", "X": "x", "Y": "y", "Z": "z",
	},
	s,
)

# canonical_path(p): p is a canonical request path (egress/rules
# CanonicalPath returns it unchanged). It starts with `/`, is at most 2048
# bytes of RFC 3986 path characters, every `%` starts an escape written in
# upper-case hex of a byte that may be escaped (not `.`, `/`, `\`, `%`, a
# control byte or an unreserved character), and it has no empty (`//`) or
# dot segment (`/./`, `/../`, `/..;x`).
canonical_path(p) if {
	is_string(p)
	regex.match(`^/(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/]|%[0-9A-F]{2})*$`, p)
	count(p) <= 2048
	not regex.match(`%(?:[01][0-9A-F]|2[5DEF]|3[0-9]|4[1-9A-F]|5[0-9ACF]|6[1-9A-F]|7[0-9AEF])`, p)
	not contains(p, "//")
	not regex.match(`/\.\.?(?:[;/]|$)`, p)
}

# is_ip(h): h is an IP address literal without a zone (IPv4, IPv6, or
# IPv4-mapped IPv6), not a prefix.
is_ip(h) if net.cidr_is_valid(concat("", [h, "/32"]))

# shown(s) is s cut to 200 characters for a reason.
shown(s) := s if count(s) <= 200

else := concat("", [substring(s, 0, 200), "..."])
