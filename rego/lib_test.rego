# Tests for lib.rego's helpers.
package paddock.lib_test

import data.paddock.lib

test_star_matches_any_run if {
	lib.matches("a*b", "ab")
	lib.matches("a*b", "a x/y b")
	not lib.matches("a*b", "a x/y bc")
}

test_everything_but_star_is_literal if {
	lib.matches("a?[b]{c}.+(d)|e^$\\", "a?[b]{c}.+(d)|e^$\\")
	not lib.matches("a?", "ab")
	not lib.matches("a.c", "abc")
}

test_matches_runs_across_lines if {
	lib.matches("curl *| sh", "curl x \n| sh")
}

test_both_escapes_agree if {
	every p in ["a?[b]{c}.+(d)|e^$\\*", "*", "git push*", `C:\\x*`, "(a|b)*[c]"] {
		every s in ["a?[b]{c}.+(d)|e^$\\zz", "anything", "git push -f", `C:\\xy`, "(a|b)q[c]", "ab"] {
			lib.matches(p, s) == regex.match(lib.list_regex([p]), s)
		}
	}
}

test_list_regex_matches_any_pattern if {
	re := lib.list_regex(["git *", "go *"])
	regex.match(re, "go test")
	not regex.match(re, "gopher")
}

test_list_regex_matches_whole_lines_only if {
	re := lib.list_regex(["rm *"])
	regex.match(re, "ls\nrm -rf /")
	not regex.match(re, "ls; rm -rf /")
	not regex.match(re, "xrm -rf /")

	# * never runs past a line: each line is a piece.
	not regex.match(lib.list_regex(["a*b"]), "a\nb")
}

test_list_regex_keeps_patterns_apart if {
	# A | or ( in one pattern must not join it to the next.
	re := lib.list_regex(["a|b", "(c", "d)"])
	regex.match(re, "a|b")
	not regex.match(re, "a")
	not regex.match(re, "b")
	regex.match(re, "(c")
	not regex.match(re, "c")
}

test_empty_list_regex_matches_nothing if {
	re := lib.list_regex([])
	not regex.match(re, "x")
	not regex.match(re, "*")
}

test_pattern_index_names_the_first_matching_pattern if {
	ps := ["x*", "a*", "*c", "abc"]
	re := lib.list_regex(ps)
	t := lib.groups_template(count(ps))
	t == "${1}\n${2}\n${3}\n${4}"
	lib.pattern_index(re, t, "abc") == 1
	lib.pattern_index(re, t, "zzc") == 2
	lib.pattern_index(re, t, "x$1 and ${2}") == 0
	lib.groups_template(0) == ""
}

test_ascii_lower_leaves_other_letters if {
	lib.ascii_lower("ABC.def") == "abc.def"
	lib.ascii_lower("\u212aA") == "\u212aa"
	lib.ascii_lower("ÉA") == "Éa"
	lib.ascii_lower("plain") == "plain"
}

test_canonical_paths if {
	every p in ["/a%20%22%3C%3E%5B%5D%5E%60%7B%7C%7D%40%80%FF", "/", "/org/repo.git/info/refs", "/a;b=c/d", "/!$&'()*+,;=:@", "/a%20b/%3F%23", "/caf%C3%A9", "/.hidden/..x/x../..."] {
		lib.canonical_path(p)
	}
}

test_paths_that_are_not_canonical if {
	every p in [
		"", "org/repo", "//x", "/a//b", "/org/../admin", "/org/..", "/org/./x", "/..;0", "/org/..;/admin",
		"/a%2fb", "/a%2Fb", "/org/%2e%2e/x", "/org/%2E%2E/x", "/%25", "/a%41", "/a%7E", "/a%5C",
		"/a%00", "/a%0A", "/a%1F", "/a%7F", "/a%2D", "/a%5F", "/a%30", "/a%5A", "/a%61", "/caf%c3%a9", "/a%4", "/a%zz", "/a b", "/a?b", "/a#b", "/a\\b", "/caf\u00e9",
	] {
		not lib.canonical_path(p)
	}
	not lib.canonical_path(concat("", ["/", concat("", [x | some _ in numbers.range(1, 2048); x := "a"])]))
	lib.canonical_path(concat("", ["/", concat("", [x | some _ in numbers.range(1, 2047); x := "a"])]))
}

test_is_ip if {
	lib.is_ip("203.0.113.7")
	lib.is_ip("2001:db8::1")
	lib.is_ip("::ffff:1.2.3.4")
	not lib.is_ip("example.com")
	not lib.is_ip("1.2.3.4/8")
	not lib.is_ip("fe80::1%eth0")
	not lib.is_ip("01.2.3.4")
}

test_shown_cuts_long_text if {
	long := concat("", [x | some _ in numbers.range(1, 300); x := "y"])
	s := lib.shown(long)
	count(s) == 203
	endswith(s, "...")
	lib.shown("short") == "short"
}
