# Decides whether a session may run one command (an exec, or a job start)
# under the process section of its policy.
#
# Input (policy.ProcessInput):
#
#   {"session": "ses-…", "kind": "exec" | "job", "command": "git push origin",
#    "rules": {"allow": [pattern…], "deny": [pattern…], "ask": [pattern…],
#              "enforce": "" | "exec"},
#    "compiled": see the rule of that name (optional)}
#
# Output: decision, {result, rule, pattern, piece, reason}
# (policy.ProcessDecision).
#
# The command is cut into pieces at ; & | (so && and || too), ( ) `
# and line breaks (a backslash before a line break joins the lines), each
# piece trimmed, its inner white space runs made one space, leading shell
# reserved words (if then do { ! …) taken off, empty ones dropped, and
# every piece is checked. In a pattern `*` matches any run of characters (spaces
# included) and is the only wildcard. In order:
#
#   1. no piece at all: deny (process.empty);
#      (a pattern holding a NUL byte: deny, process.invalid)
#   2. a piece matches deny: deny (process.deny);
#   3. allow is not empty and a piece matches no allow and no ask
#      pattern: deny (process.not_allowed);
#   4. a piece matches ask: ask (process.ask);
#   5. allow is not empty (so every piece matched it): allow
#      (process.allow);
#   6. otherwise allow (process.default).
#
# Not-allowed is checked before ask so that approving a command can never
# run a piece the allow list does not cover: "deploy x; curl evil" with
# allow ["git *"] and ask ["deploy *"] is refused, not held.
#
# This judges the command string. A shell builds commands the string does
# not show (sh -c, $(...), scripts), so this is a guardrail; the guest's
# execute list (enforce "exec") and the network policy are the boundary.
package paddock.process

import data.paddock.lib

allow_patterns := object.get(input, ["rules", "allow"], [])

deny_patterns := object.get(input, ["rules", "deny"], [])

ask_patterns := object.get(input, ["rules", "ask"], [])

# listed are the allow patterns, then the ask patterns: with a non-empty
# allow list, every piece must match one of them.
listed := array.concat(allow_patterns, ask_patterns)

# compiled is what a decision needs from the rules alone: one regular
# expression per list (lib.list_regex), one for deny and ask together,
# the allow-then-ask patterns, whether there is an allow list, and
# whether a pattern holds a NUL byte (which the lists cannot take;
# policy.ValidateProcess refuses that and far more long before), and
# what the fast paths below need (fast_allow, fast_default, fast_flagged,
# listed_all). It depends on input.rules only, so policy.Engine computes it once per set
# of rules and hands it back as input.compiled; without that, it is
# computed here.
compiled := {
	"deny": lib.list_regex(deny_patterns),
	"deny_groups": lib.groups_template(count(deny_patterns)),
	"ask": lib.list_regex(ask_patterns),
	"ask_groups": lib.groups_template(count(ask_patterns)),
	"flagged": lib.list_regex(array.concat(deny_patterns, ask_patterns)),
	"listed": lib.list_regex(listed),
	"listed_groups": lib.groups_template(count(listed)),
	"listed_patterns": listed,
	"has_allow": count(allow_patterns) > 0,
	"nul": has_nul,
	"fast_allow": fast_allow,
	"fast_default": fast_default,
	"fast_flagged": concat("", [
		"(?m)^(?:", raw_line, "|(",
		strings.replace_n(lib.list_escapes, concat("\u0000", array.concat(deny_patterns, ask_patterns))),
		"))$",
	]),
	"listed_all": concat("", ["\\A(?:(?:(", strings.replace_n(lib.list_escapes, concat("\u0000", listed)), "))(?:\n|\\z))+\\z"]),
}

has_nul := contains(concat("", array.concat(listed, deny_patterns)), "\u0000")

default fast_allow := false

fast_allow if {
	count(allow_patterns) > 0
	not has_nul
}

default fast_default := false

fast_default if {
	count(allow_patterns) == 0
	not has_nul
}

# The fast paths. Most commands are plain: words with single spaces
# between them and separators (; & | line breaks) between pieces, nothing
# that normalized would change. For those, the pieces are the maximal
# runs between separators, trimmed, with inner runs of spaces kept (the
# regular expression `[^;&|\r\n ]+(?: +[^;&|\r\n ]+)*`), and two
# whole-text regular expressions decide: the compiled fast_flagged (a line that matches a deny or ask pattern, or
# that is not plain: raw_line) and listed_all (every line matches an
# allow or ask pattern). A command with a line that is not plain is
# flagged, so it leaves the fast path and the general rules below cut it
# into pieces properly; for the plain ones both ways give the same pieces
# (policy's FuzzProcessFastPath and process_test.rego's
# test_compiled_input_gives_the_same_decisions hold them to it). The fast paths need input.compiled, which policy.Engine always
# passes.

# raw_line matches a piece that the fast path must not judge: it starts
# with a shell reserved word (see normalized), or holds a character that
# normalized would act on (a backslash, ( ) `, white space other than a
# single space: tabs, NEL, NBSP, Unicode's Z category) or two spaces in a
# row.
raw_line := `(?:if|then|elif|else|do|while|until|time|!|\{|\}|fi|done|esac)(?: .*)?|.*(?:[\\()\x60\t\v\f\x{85}\x{A0}]|[^\P{Z} ]|  ).*`

regexes := input.compiled if input.compiled

else := compiled

# normalized is the command as a shell reads it, made ready for cutting
# into pieces with whole-string steps only (one pass each, no per-piece
# work):
#
#   1. a backslash before a line break joins the two lines (sh reads
#      "git \<newline>push" as "git push");
#   2. ( ) and ` start or end a command of their own (subshells, $(...),
#      `...`), so they separate pieces like ; does;
#   3. every separator becomes " ; " (they all cut the same way), and
#      every run of white space becomes one space (sh splits words on any run of blanks, so
#      "git  push" and "git<tab>push" are "git push");
#   4. the shell's reserved words that only introduce a command (if then
#      elif else do while until time ! { }) or close one (fi done esac)
#      are taken off the front of each piece.
normalized := regex.replace(
	regex.replace(
		regex.replace(
			regex.replace(command, `\\\r?\n`, ""),
			"[;&|\r\n()`]", " ; ",
		),
		`[\t\v\f \x{85}\x{A0}\p{Z}]+`, " ",
	),
	`(^|;) ?(?:(?:if|then|elif|else|do|while|until|time|!|\{|\}|fi|done|esac)(?: |$))+`, "$1",
) if {
	# Most commands need none of it: one match says so. (Plain single
	# spaces need nothing, and \p{Z} holds the space, so the other
	# white space of Z is [^\P{Z} ].)
	regex.match("[\\\\()\u0060\t\u000b\f\u0085\u00a0]|[^\\P{Z} ]|[ \u0085\u00a0\\p{Z}]{2}|(?:^|[;&|\r\n]) *(?:if|then|elif|else|do|while|until|time|!|\\{|\\}|fi|done|esac)(?: |$|[;&|\r\n])", command)
} else := command

command := object.get(input, "command", "")

# pieces are the command's simple commands, in order: the runs between
# separators (; & | ( ) ` and line breaks) of the normalized command,
# without the white space around them (as strings.TrimSpace sees it:
# ASCII spaces, NEL, NBSP and Unicode's Z category), never empty.
pieces := regex.find_n(
	`[^;&|\r\n\t\v\f \x{85}\x{A0}\p{Z}]+(?:[\t\v\f \x{85}\x{A0}\p{Z}]+[^;&|\r\n\t\v\f \x{85}\x{A0}\p{Z}]+)*`,
	normalized,
	-1,
)

# lines are the pieces one per line: one regular expression per list
# checks them all at once.
lines := concat("\n", pieces)

# The two common answers come first, each in one body of a few steps:
# allow (every piece matches an allow pattern, none a deny or ask
# pattern) and default (no allow list, nothing flagged). Neither can
# apply when a rule before it in the order above would.
decision := {
	"result": "allow",
	"rule": "process.allow",
	"pattern": c.listed_patterns[indexof(regex.replace(p0, c.listed, c.listed_groups), p0)],
	"piece": p0,
	"reason": "every piece matches an allow pattern",
} if {
	# The fast allow (see raw_line): lib.pattern_index written out,
	# as every call costs.
	c := input.compiled
	c.fast_allow
	ps := regex.find_n(`[^;&|\r\n ]+(?: +[^;&|\r\n ]+)*`, input.command, -1)
	p0 := ps[0]
	ls := concat("\n", ps)
	not regex.match(c.fast_flagged, ls)
	regex.match(c.listed_all, ls)
}

else := {
	"result": "allow",
	"rule": "process.default",
	"pattern": "",
	"piece": "",
	"reason": "no deny or ask pattern matches, and without process.allow every other command may run",
} if {
	# The fast default.
	c := input.compiled
	c.fast_default
	ps := regex.find_n(`[^;&|\r\n ]+(?: +[^;&|\r\n ]+)*`, input.command, -1)
	count(ps) > 0
	not regex.match(c.fast_flagged, concat("\n", ps))
}

else := {
	"result": "allow",
	"rule": "process.allow",
	"pattern": c.listed_patterns[lib.pattern_index(c.listed, c.listed_groups, ps[0])],
	"piece": ps[0],
	"reason": "every piece matches an allow pattern",
} if {
	c := regexes
	c.has_allow
	not c.nul
	ps := pieces
	count(ps) > 0
	ls := concat("\n", ps)
	not regex.match(c.flagged, ls)
	count(regex.find_n(c.listed, ls, -1)) == count(ps)
}

else := {
	"result": "allow",
	"rule": "process.default",
	"pattern": "",
	"piece": "",
	"reason": "no deny or ask pattern matches, and without process.allow every other command may run",
} if {
	c := regexes
	not c.has_allow
	not c.nul
	count(pieces) > 0
	not regex.match(c.flagged, lines)
}

else := {
	"result": "deny",
	"rule": "process.empty",
	"pattern": "",
	"piece": "",
	"reason": "the command is empty: it has nothing to run between its separators",
} if {
	count(pieces) == 0
}

else := {
	"result": "deny",
	"rule": "process.invalid",
	"pattern": "",
	"piece": "",
	"reason": "a process pattern holds a NUL byte; fix the session's policy",
} if {
	regexes.nul
}

else := {
	"result": "deny",
	"rule": "process.deny",
	"pattern": pattern,
	"piece": piece,
	"reason": sprintf(
		"%q matches the deny pattern %q of this session's process policy; the command was not run (drop that part, or change the policy)",
		[lib.shown(piece), pattern],
	),
} if {
	piece := regex.find_n(regexes.deny, lines, 1)[0]
	pattern := deny_patterns[lib.pattern_index(regexes.deny, regexes.deny_groups, piece)]
}

else := {
	"result": "deny",
	"rule": "process.not_allowed",
	"pattern": "",
	"piece": piece,
	"reason": sprintf(
		"%q matches none of the session's process.allow patterns (%s); the command was not run (run something they allow, or add a pattern for it)",
		[lib.shown(piece), shown_list(allow_patterns)],
	),
} if {
	regexes.has_allow
	piece := [p | some p in pieces; not regex.match(regexes.listed, p)][0]
}

else := {
	"result": "ask",
	"rule": "process.ask",
	"pattern": pattern,
	"piece": piece,
	"reason": sprintf(
		"%q matches the ask pattern %q: an operator must approve this command before it runs (retry it with the approval id once approved)",
		[lib.shown(piece), pattern],
	),
} if {
	piece := regex.find_n(regexes.ask, lines, 1)[0]
	pattern := ask_patterns[lib.pattern_index(regexes.ask, regexes.ask_groups, piece)]
}

# shown_list writes at most five patterns for a reason.
shown_list(ps) := concat(", ", [sprintf("%q", [p]) | some p in ps]) if count(ps) <= 5

else := sprintf("%s and %d more", [
	concat(", ", [sprintf("%q", [p]) | some p in array.slice(ps, 0, 5)]),
	count(ps) - 5,
])
