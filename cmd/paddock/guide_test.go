package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// guideBlock is one ```sh block of a guide and the plain ``` block that
// follows it (before the next ```sh block), if any: what it should print.
type guideBlock struct {
	line   int // where the sh block starts in the file
	script string
	want   []string // nil: no output block; the commands must succeed
}

// guideSection is a "## " section: its blocks run in one shell, in order,
// so a variable set in one block is seen by the next. skip says why the
// section is not run (a "<!-- guide-test: skip REASON -->" line in it).
type guideSection struct {
	title  string
	skip   string
	blocks []guideBlock
}

var guideSkipRE = regexp.MustCompile(`^<!-- guide-test: skip (.+) -->$`)

// parseGuide reads a guide's sections and their fenced blocks.
func parseGuide(text string) []guideSection {
	var out []guideSection
	cur := &guideSection{title: "(before the first section)"}
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.HasPrefix(l, "## "):
			out = append(out, *cur)
			cur = &guideSection{title: strings.TrimPrefix(l, "## ")}
		case guideSkipRE.MatchString(l):
			cur.skip = guideSkipRE.FindStringSubmatch(l)[1]
		case strings.HasPrefix(l, "```"):
			lang := strings.TrimPrefix(l, "```")
			start := i
			var body []string
			for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
				body = append(body, lines[i])
			}
			switch {
			case lang == "sh":
				cur.blocks = append(cur.blocks, guideBlock{line: start + 1, script: strings.Join(body, "\n")})
			case lang == "" && len(cur.blocks) > 0 && cur.blocks[len(cur.blocks)-1].want == nil:
				cur.blocks[len(cur.blocks)-1].want = append([]string{}, body...)
			}
		}
	}
	return append(out, *cur)
}

// guideLineRE turns an expected line into a pattern: "…" stands for any
// text, and a run of spaces for any run of spaces (tables' columns
// widen with what is in them).
func guideLineRE(want string) *regexp.Regexp {
	parts := strings.Split(strings.Join(strings.Fields(want), " "), "…")
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(regexp.QuoteMeta(p), " ", `\s+`)
	}
	return regexp.MustCompile(`^\s*` + strings.Join(parts, ".*") + `\s*$`)
}

// matchGuide checks that every non-empty expected line matches a line of
// got, in order (lines in between, a timestamp's or a log's, are let
// through). It returns the first expected line that found no match.
func matchGuide(want []string, got string) (string, bool) {
	out := strings.Split(got, "\n")
	j := 0
	for _, w := range want {
		if strings.TrimSpace(w) == "" {
			continue
		}
		re := guideLineRE(w)
		for ; j < len(out) && !re.MatchString(out[j]); j++ {
		}
		if j == len(out) {
			return w, false
		}
		j++
	}
	return "", true
}

// TestGuideParse: the parser pairs sh blocks with the output block after
// them, keeps sections apart and reads a skip; the matcher takes "…" and
// column widths as they are meant, in order, and no more.
func TestGuideParse(t *testing.T) {
	g := parseGuide("# T\n## A\n```sh\nX=1\n```\ntext\n```\nout …\n```\n```sh\necho $X\n```\n## B\n<!-- guide-test: skip needs qemu -->\n```sh\ntrue\n```\n")
	if len(g) != 3 || g[1].title != "A" || len(g[1].blocks) != 2 || g[1].blocks[0].script != "X=1" ||
		strings.Join(g[1].blocks[0].want, "|") != "out …" || g[1].blocks[1].want != nil || g[2].skip != "needs qemu" {
		t.Fatalf("parse: %+v", g)
	}
	for _, tc := range []struct {
		want []string
		got  string
		ok   bool
	}{
		{[]string{"A  B", "c…d"}, "A   B\nnoise\nc 123 d\n", true},
		{[]string{"c…d", "A B"}, "A B\nc d\n", false}, // order matters
		{[]string{"rw-1 exec"}, "rw-12 exec\n", false},
		{[]string{"plan …: 3 to apply"}, "plan ab12: 3 to apply\n", true},
		{[]string{"plan …: 3 to apply"}, "plan ab12: 2 to apply\n", false},
	} {
		if _, ok := matchGuide(tc.want, tc.got); ok != tc.ok {
			t.Errorf("match %q against %q: %v, want %v", tc.want, tc.got, ok, tc.ok)
		}
	}
}

// TestGuideAgentLoop keeps docs/guide-agent-loop.md true: each section's
// ```sh blocks run with bash, in order and in one shell, against a real
// `paddock serve` on procbox, with `paddock` and `bin/paddock` the CLI
// from this tree and PADDOCK_URL, PADDOCK_TOKEN and PADDOCK_CA set as
// the README's quick start sets them. Each block's output (stdout and
// stderr) must match the plain ``` block after it (see matchGuide); a
// block without one must succeed. A command that fails is a failure
// unless the block itself reads its status ($?). New sections are picked
// up as they are written; a section with a "<!-- guide-test: skip WHY
// -->" line is not run, and the test says which and why.
func TestGuideAgentLoop(t *testing.T) {
	raw, err := os.ReadFile("../../docs/guide-agent-loop.md")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("jq"); err != nil {
		t.Skip("the guide's commands use jq, which is not installed")
	}
	bin, state, addr, env := daemonSetup(t)
	srv := startServe(t, bin, state, addr, env, "--stop-sandboxes")
	defer stopServe(t, srv)
	// A working dir with bin/paddock, and paddock on PATH.
	work := t.TempDir()
	if err := os.Mkdir(filepath.Join(work, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bin, filepath.Join(work, "bin", "paddock")); err != nil {
		t.Fatal(err)
	}
	benv := append([]string{}, env...)
	for i, e := range benv {
		if strings.HasPrefix(e, "PATH=") {
			benv[i] = "PATH=" + filepath.Dir(bin) + ":" + strings.TrimPrefix(e, "PATH=")
		}
	}
	ran := 0
	for _, sec := range parseGuide(string(raw)) {
		if len(sec.blocks) == 0 {
			continue
		}
		if sec.skip != "" {
			t.Logf("section %q not run: %s", sec.title, sec.skip)
			continue
		}
		t.Run(sec.title, func(t *testing.T) {
			// One script: each block behind a marker, each failing
			// command reported by the ERR trap.
			var sb strings.Builder
			sb.WriteString("trap 'echo \"@@ERR $? $BASH_COMMAND\"' ERR\n")
			for i, b := range sec.blocks {
				fmt.Fprintf(&sb, "echo '@@BLOCK %d'\n%s\n", i, b.script)
			}
			// Then every session goes, so the next section has the
			// host's disk (admission counts each session's).
			sb.WriteString("echo '@@BLOCK cleanup'\ntrap - ERR\nfor s in $(paddock --json session ls | jq -r '.[].id'); do paddock session rm $s; done\n")
			sh := exec.Command("bash", "-c", sb.String())
			sh.Dir, sh.Env = work, benv
			sh.WaitDelay = 5 * time.Second
			out, err := sh.CombinedOutput()
			if err != nil {
				t.Errorf("bash: %v", err)
			}
			parts := strings.Split(string(out), "@@BLOCK ")
			for i, b := range sec.blocks {
				var got string
				for _, p := range parts {
					if n, rest, ok := strings.Cut(p, "\n"); ok && n == fmt.Sprint(i) {
						got = rest
					}
				}
				if strings.Contains(got, "@@ERR ") && !strings.Contains(b.script, "$?") {
					t.Errorf("guide line %d: a command failed:\n%s\n--- output:\n%s", b.line, b.script, got)
					continue
				}
				if b.want == nil {
					continue
				}
				if miss, ok := matchGuide(b.want, got); !ok {
					t.Errorf("guide line %d: no output line matches %q\n--- commands:\n%s\n--- output:\n%s", b.line, miss, b.script, got)
				}
			}
		})
		ran++
	}
	if ran == 0 {
		t.Fatal("no section of the guide ran")
	}
}
