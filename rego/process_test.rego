# Tests for process.rego: an allow and a deny case for every rule, and the
# edge cases of splitting and matching.
package paddock.process_test

import data.paddock.process

decide(command, rules) := d if {
	d := process.decision with input as {"session": "ses-test", "kind": "exec", "command": command, "rules": rules}
}

# process.empty

test_empty_command_is_denied if {
	d := decide("", {})
	d.result == "deny"
	d.rule == "process.empty"
}

test_only_separators_and_spaces_is_denied if {
	d := decide("  ; && || \n | & ;; ", {"allow": ["*"]})
	d.result == "deny"
	d.rule == "process.empty"
}

test_missing_command_is_denied if {
	d := process.decision with input as {"rules": {}}
	d.rule == "process.empty"
}

test_a_command_with_text_is_not_empty if {
	d := decide(" ; ls", {})
	d.rule == "process.default"
	d.result == "allow"
}

# process.deny

test_deny_pattern_denies if {
	d := decide("rm -rf /", {"deny": ["rm -rf *"]})
	d.result == "deny"
	d.rule == "process.deny"
	d.pattern == "rm -rf *"
	d.piece == "rm -rf /"
	contains(d.reason, "deny pattern")
}

test_deny_pattern_that_does_not_match_lets_it_run if {
	d := decide("rm file.txt", {"deny": ["rm -rf *"]})
	d.result == "allow"
	d.rule == "process.default"
}

test_deny_checks_every_piece if {
	d := decide("echo hi; rm -rf /", {"allow": ["echo *", "rm *"], "deny": ["rm -rf *"]})
	d.result == "deny"
	d.rule == "process.deny"
	d.piece == "rm -rf /"
}

test_deny_beats_allow_of_the_same_piece if {
	d := decide("git push --force", {"allow": ["git *"], "deny": ["git push --force*"]})
	d.rule == "process.deny"
}

test_deny_beats_ask if {
	d := decide("deploy prod", {"ask": ["deploy *"], "deny": ["deploy prod"]})
	d.result == "deny"
	d.rule == "process.deny"
}

test_deny_names_the_first_matching_pattern if {
	d := decide("curl x | sh", {"deny": ["wget *", "sh", "*sh*"]})
	d.pattern == "sh"
	d.piece == "sh"
}

# process.not_allowed

test_piece_outside_allow_is_not_allowed if {
	d := decide("echo hi; rm -rf /", {"allow": ["echo *"]})
	d.result == "deny"
	d.rule == "process.not_allowed"
	d.piece == "rm -rf /"
	contains(d.reason, `"echo *"`)
}

test_every_piece_inside_allow_is_allowed if {
	d := decide("echo hi && ls -la", {"allow": ["echo *", "ls*"]})
	d.result == "allow"
	d.rule == "process.allow"
	d.pattern == "echo *"
	d.piece == "echo hi"
}

test_not_allowed_beats_ask if {
	# An approval must not run a piece the allow list does not cover.
	d := decide("deploy prod; curl evil.example", {"allow": ["git *"], "ask": ["deploy *"]})
	d.result == "deny"
	d.rule == "process.not_allowed"
	d.piece == "curl evil.example"
}

test_not_allowed_reason_lists_at_most_five_patterns if {
	d := decide("x", {"allow": ["a", "b", "c", "d", "e", "f", "g"]})
	d.rule == "process.not_allowed"
	contains(d.reason, "and 2 more")
}

# process.ask

test_ask_pattern_holds_the_command if {
	d := decide("git push origin main", {"allow": ["git *"], "ask": ["git push*"]})
	d.result == "ask"
	d.rule == "process.ask"
	d.pattern == "git push*"
	d.piece == "git push origin main"
}

test_ask_pattern_that_does_not_match_lets_it_run if {
	d := decide("git status", {"allow": ["git *"], "ask": ["git push*"]})
	d.result == "allow"
	d.rule == "process.allow"
}

test_ask_piece_satisfies_a_non_empty_allow if {
	d := decide("deploy prod", {"allow": ["git *"], "ask": ["deploy *"]})
	d.result == "ask"
	d.rule == "process.ask"
}

test_ask_without_allow if {
	d := decide("ls; deploy prod", {"ask": ["deploy *"]})
	d.result == "ask"
	d.piece == "deploy prod"
}

# process.allow and process.default

test_allow_names_pattern_and_piece if {
	d := decide("go test ./...", {"allow": ["git *", "go *"]})
	d.result == "allow"
	d.rule == "process.allow"
	d.pattern == "go *"
}

test_allow_list_refuses_what_it_does_not_name if {
	d := decide("python3 x.py", {"allow": ["git *", "go *"]})
	d.result == "deny"
	d.rule == "process.not_allowed"
}

test_no_rules_is_default_allow if {
	d := decide("anything at all", {})
	d.result == "allow"
	d.rule == "process.default"
	d.pattern == ""
}

test_missing_rules_is_default_allow if {
	d := process.decision with input as {"command": "ls"}
	d.rule == "process.default"
}

# Splitting

test_split_on_every_separator if {
	process.pieces == ["a", "b", "c", "d", "e", "f", "g"] with input as {"command": "a && b || c | d & e\nf;g"}
}

test_split_on_carriage_return_and_trims if {
	process.pieces == ["a", "b"] with input as {"command": "  a  \r\n\t b\t"}
}

test_newline_hides_nothing if {
	d := decide("git status\nrm -rf /", {"allow": ["git *"]})
	d.rule == "process.not_allowed"
	d.piece == "rm -rf /"
}

test_background_ampersand_is_a_separator if {
	d := decide("sleep 1 & rm -rf /", {"deny": ["rm *"]})
	d.rule == "process.deny"
}

# Matching

test_git_push_star_matches_force if {
	d := decide("git push --force", {"ask": ["git push*"]})
	d.result == "ask"
}

test_git_push_star_matches_bare_push if {
	# * matches the empty run too.
	d := decide("git push", {"ask": ["git push*"]})
	d.result == "ask"
}

test_git_push_space_star_does_not_match_pushx if {
	d := decide("git pushx", {"ask": ["git push *"]})
	d.result == "allow"
}

test_star_matches_spaces_and_slashes if {
	d := decide("cat /etc/passwd  x", {"deny": ["cat*x"]})
	d.rule == "process.deny"
}

test_patterns_match_whole_pieces if {
	d := decide("xrm -rf /", {"deny": ["rm -rf *"]})
	d.result == "allow"
}

test_patterns_are_case_sensitive if {
	d := decide("RM -rf /", {"deny": ["rm -rf *"]})
	d.result == "allow"
}

test_question_mark_is_literal if {
	deny_q := {"deny": ["ls ?"]}
	decide("ls ?", deny_q).rule == "process.deny"
	decide("ls a", deny_q).rule == "process.default"
}

test_brackets_are_literal if {
	deny_b := {"deny": ["echo [ab]"]}
	decide("echo [ab]", deny_b).rule == "process.deny"
	decide("echo a", deny_b).rule == "process.default"
}

test_braces_dots_and_plus_are_literal if {
	deny_c := {"deny": ["a{1,2}.b+"]}
	decide("a{1,2}.b+", deny_c).rule == "process.deny"
	decide("aa.bb", deny_c).rule == "process.default"
	decide("a{1,2}xb+", deny_c).rule == "process.default"
}

test_backslash_is_literal if {
	deny_s := {"deny": [`a\*`]}
	decide(`a\zzz`, deny_s).rule == "process.deny"
	decide("azzz", deny_s).rule == "process.default"
}

test_regex_anchors_in_patterns_are_literal if {
	deny_a := {"deny": ["^rm$"]}
	decide("rm", deny_a).rule == "process.default"
	decide("^rm$", deny_a).rule == "process.deny"
}

test_unicode_white_space_is_trimmed_like_trim_space if {
	process.pieces == ["ls -l", "rm x"] with input as {"command": "\u00a0\tls -l\u2003\u000b;\u3000rm x\u0085"}
}

test_white_space_inside_a_piece_is_one_space if {
	process.pieces == ["echo a b"] with input as {"command": "  echo a  \t b  "}
}

# Found by review: what sh reads as one command must be judged as one.
test_tab_and_double_space_do_not_hide_a_deny if {
	deny_push := {"deny": ["git push*"]}
	decide("git\tpush origin main", deny_push).rule == "process.deny"
	decide("git  push origin", {"allow": ["git *"], "ask": ["git push*"]}).rule == "process.ask"
}

test_line_continuation_is_joined if {
	decide("git \\\npush origin", {"deny": ["git push*"]}).rule == "process.deny"
	decide("git \\\r\npush origin", {"ask": ["git push*"]}).rule == "process.ask"
}

test_subshells_and_substitutions_are_pieces if {
	deny_curl := {"deny": ["curl *"]}
	decide("(curl http://evil)", deny_curl).rule == "process.deny"
	decide("echo $(curl http://evil)", deny_curl).rule == "process.deny"
	decide("echo `curl http://evil`", deny_curl).rule == "process.deny"
}

test_reserved_words_are_taken_off if {
	deny_curl := {"deny": ["curl *"]}
	decide("{ curl http://evil; }", deny_curl).rule == "process.deny"
	decide("if true; then curl http://evil; fi", deny_curl).rule == "process.deny"
	decide("while true; do curl http://evil; done", deny_curl).rule == "process.deny"
	decide("! curl http://evil", deny_curl).rule == "process.deny"
	process.pieces == ["true", "echo x"] with input as {"command": "if true; then echo x; fi"}
}

test_a_piece_of_reserved_words_only_is_dropped if {
	decide("fi", {"allow": ["echo *"]}).rule == "process.empty"
}

test_non_ascii_text_is_kept if {
	process.pieces == ["a\u00ffb"] with input as {"command": "a\u00ffb"}
}

# process.invalid

test_nul_in_a_pattern_is_refused if {
	d := decide("ls", {"allow": ["ls\u0000x"]})
	d.result == "deny"
	d.rule == "process.invalid"
}

test_pattern_without_nul_is_not_invalid if {
	d := decide("ls", {"allow": ["ls"]})
	d.rule == "process.allow"
}

# The engine passes the compiled rules back as input.compiled: the
# decisions must not change.

compiled_cases := [
	["git push origin", {"allow": ["git *"], "ask": ["git push*"]}],
	["rm -rf /; ls", {"deny": ["rm -rf *"]}],
	["ls; curl x", {"allow": ["ls"]}],
	["ls", {"allow": ["ls"]}],
	["ls", {}],
	["", {}],
	["deploy prod", {"ask": ["deploy *"]}],
	# What the fast paths must hand to the general rules.
	["git  push", {"allow": ["git *"], "ask": ["git push*"]}],
	["git  push", {"ask": ["git push*"]}],
	["if git push; then ls; fi", {"allow": ["git *", "ls"], "ask": ["git push*"]}],
	["if git push; then ls; fi", {"ask": ["git push*"]}],
	["! git push", {"ask": ["git push*"]}],
	["!git push", {"allow": ["!git *"]}],
	["iffy x", {"allow": ["iffy *"]}],
	["{ git push; }", {"allow": ["git *"], "ask": ["git push*"]}],
	["git\tpush", {"ask": ["git push*"]}],
	["git\u00a0push", {"allow": ["git *"], "ask": ["git push*"]}],
	["git\u2028push", {"ask": ["git push*"]}],
	["git\u3000push", {"allow": ["git *"], "deny": ["git push"]}],
	["ls $(git push)", {"allow": ["ls *"]}],
	["ls `git push`", {"ask": ["git push"]}],
	["git \\\npush", {"allow": ["git *"], "ask": ["git push"]}],
	["echo a\\b", {"allow": ["echo *"]}],
	[" ls ;; ls  ", {"allow": ["ls"]}],
	["ls\r\nls", {"allow": ["ls"]}],
	["ls ; curl x", {"allow": ["ls"], "ask": ["curl *"]}],
	["ls", {"allow": ["*"]}],
	["ls", {"allow": ["ls"], "deny": ["*"]}],
]

test_compiled_input_gives_the_same_decisions if {
	every c in compiled_cases {
		plain := decide(c[0], c[1])
		comp := process.compiled with input as {"rules": c[1]}
		fast := process.decision with input as {"command": c[0], "rules": c[1], "compiled": comp}
		plain == fast
	}
}
