package policy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// builtinEngine is one engine with the built-in modules only, shared by
// the tests that do not change it.
// loadedMachineEval is the decision time limit of tests that decide many
// times, or with the largest rules, while the rest of the suite (VMs under
// TCG among it) loads the machine: these tests check answers, not speed
// (TestEvalTimeLimit checks the limit itself at its default).
const loadedMachineEval = 10 * time.Second

var builtinEngine = sync.OnceValues(func() (*Engine, error) { return New(Options{MaxEvalTime: loadedMachineEval}) })

func mustBuiltin(t testing.TB) *Engine {
	t.Helper()
	e, err := builtinEngine()
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestProcessDecisions(t *testing.T) {
	e := mustBuiltin(t)
	gitRules := ProcessRules{
		Allow: []string{"git *", "ls*", "echo *"},
		Deny:  []string{"git push --force*", "rm -rf *"},
		Ask:   []string{"git push*", "deploy *"},
	}
	tests := []struct {
		name    string
		command string
		rules   ProcessRules
		want    ProcessDecision
	}{
		{"no rules", "anything --at all", ProcessRules{}, ProcessDecision{Result: Allow, Rule: "process.default"}},
		{"allowed", "git status", gitRules, ProcessDecision{Result: Allow, Rule: "process.allow", Pattern: "git *", Piece: "git status"}},
		{"allow names the first piece", "ls -la && echo hi", gitRules, ProcessDecision{Result: Allow, Rule: "process.allow", Pattern: "ls*", Piece: "ls -la"}},
		{"ask", "git push origin main", gitRules, ProcessDecision{Result: Ask, Rule: "process.ask", Pattern: "git push*", Piece: "git push origin main"}},
		{"git push* also matches --force, but deny wins", "git push --force", gitRules, ProcessDecision{Result: Deny, Rule: "process.deny", Pattern: "git push --force*", Piece: "git push --force"}},
		{"ask piece satisfies the allow list", "deploy prod", gitRules, ProcessDecision{Result: Ask, Rule: "process.ask", Pattern: "deploy *", Piece: "deploy prod"}},
		{"deny in a later piece", "echo hi; rm -rf /", gitRules, ProcessDecision{Result: Deny, Rule: "process.deny", Pattern: "rm -rf *", Piece: "rm -rf /"}},
		{"not allowed", "echo hi; curl x", gitRules, ProcessDecision{Result: Deny, Rule: "process.not_allowed", Piece: "curl x"}},
		{"not allowed beats ask", "deploy prod; curl x", gitRules, ProcessDecision{Result: Deny, Rule: "process.not_allowed", Piece: "curl x"}},
		{"every separator", "git a && ls || echo c | git d & ls\nrm -rf x", gitRules, ProcessDecision{Result: Deny, Rule: "process.deny", Pattern: "rm -rf *", Piece: "rm -rf x"}},
		{"empty", "", gitRules, ProcessDecision{Result: Deny, Rule: "process.empty"}},
		{"separators only", " ; && \n", ProcessRules{}, ProcessDecision{Result: Deny, Rule: "process.empty"}},
		{"? is literal", "ls a", ProcessRules{Deny: []string{"ls ?"}}, ProcessDecision{Result: Allow, Rule: "process.default"}},
		{"? matches itself", "ls ?", ProcessRules{Deny: []string{"ls ?"}}, ProcessDecision{Result: Deny, Rule: "process.deny", Pattern: "ls ?", Piece: "ls ?"}},
		{"[ is literal", "echo a", ProcessRules{Deny: []string{"echo [ab]"}}, ProcessDecision{Result: Allow, Rule: "process.default"}},
		{"regex syntax is literal", "aaa", ProcessRules{Deny: []string{"a+", "[a]*", "a{2}", "^a"}}, ProcessDecision{Result: Allow, Rule: "process.default"}},
		{"* matches nothing", "ls", ProcessRules{Deny: []string{"ls*"}}, ProcessDecision{Result: Deny, Rule: "process.deny", Pattern: "ls*", Piece: "ls"}},
		{"patterns match whole pieces", "sudo rm -rf /", ProcessRules{Deny: []string{"rm -rf *"}}, ProcessDecision{Result: Allow, Rule: "process.default"}},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, kind := range []string{KindExec, KindJob} {
				got, err := e.Process(ctx, ProcessInput{Session: "ses-1", Kind: kind, Command: tt.command, Rules: tt.rules})
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreFields(ProcessDecision{}, "Reason")); diff != "" {
					t.Errorf("%s: Process(%q) (-want +got):\n%s", kind, tt.command, diff)
				}
				if got.Reason == "" {
					t.Errorf("%s: Process(%q): no reason", kind, tt.command)
				}
			}
		})
	}
}

func TestProcessReasonsSayWhatToDo(t *testing.T) {
	e := mustBuiltin(t)
	ctx := context.Background()
	d, _ := e.Process(ctx, ProcessInput{Kind: KindExec, Command: "curl x", Rules: ProcessRules{Allow: []string{"git *"}}})
	if !strings.Contains(d.Reason, `"curl x"`) || !strings.Contains(d.Reason, `"git *"`) || !strings.Contains(d.Reason, "add a pattern") {
		t.Errorf("not_allowed reason: %q", d.Reason)
	}
	long := "rm -rf " + strings.Repeat("x", 5000)
	d, _ = e.Process(ctx, ProcessInput{Kind: KindExec, Command: long, Rules: ProcessRules{Deny: []string{"rm *"}}})
	if d.Rule != "process.deny" || len(d.Reason) > 600 {
		t.Errorf("a long piece is cut short in the reason: %d bytes, rule %s", len(d.Reason), d.Rule)
	}
}

func TestProcessInputLimits(t *testing.T) {
	e := mustBuiltin(t)
	ctx := context.Background()
	if d, err := e.Process(ctx, ProcessInput{Kind: "shell", Command: "ls"}); !errors.Is(err, ErrInvalidInput) || d.Result != Deny {
		t.Errorf("unknown kind: %+v %v", d, err)
	}
	if d, err := e.Process(ctx, ProcessInput{Kind: KindExec, Command: "ls", Rules: ProcessRules{Allow: []string{""}}}); !errors.Is(err, ErrInvalidRules) || d.Result != Deny {
		t.Errorf("invalid rules: %+v %v", d, err)
	}
	d, err := e.Process(ctx, ProcessInput{Kind: KindExec, Command: strings.Repeat("a", MaxCommandBytes+1)})
	if err != nil || d.Result != Deny || d.Rule != RuleLimit || !strings.Contains(d.Reason, "script") {
		t.Errorf("long command: %+v %v", d, err)
	}
	d, err = e.Process(ctx, ProcessInput{Kind: KindExec, Command: strings.Repeat("a;", MaxCommandSeparators+1)})
	if err != nil || d.Result != Deny || d.Rule != RuleLimit {
		t.Errorf("many pieces: %+v %v", d, err)
	}
	// Just under both limits is judged.
	d, err = e.Process(ctx, ProcessInput{Kind: KindExec, Command: strings.Repeat("a;", MaxCommandSeparators), Rules: ProcessRules{Allow: []string{"a"}}})
	if err != nil || d.Result != Allow {
		t.Errorf("%d pieces: %+v %v", MaxCommandSeparators, d, err)
	}
	// The largest rules compile (their regular expressions included) and
	// decide, on the fast path and off it.
	var big ProcessRules
	for i := range MaxPatterns {
		p := fmt.Sprintf("p%03d *", i)
		p += strings.Repeat("*x", (MaxPatternBytes-1-len(p))/2)
		big.Allow = append(big.Allow, p)
		big.Deny = append(big.Deny, "d"+p)
		big.Ask = append(big.Ask, "a"+p)
	}
	if err := ValidateProcess(big); err != nil {
		t.Fatal(err)
	}
	x := strings.Repeat("x", 200)
	for cmd, want := range map[string]string{
		"p063 " + x:                  "process.allow",
		"p063 \\" + x:                "process.allow",
		"p000 " + x + "; dp001 " + x: "process.deny",
		"ap002 " + x:                 "process.ask",
		"p000 " + x + "; p001 x":     "process.not_allowed",
	} {
		d, err := e.Process(ctx, ProcessInput{Kind: KindExec, Command: cmd, Rules: big})
		if err != nil || d.Rule != want {
			t.Errorf("largest rules, %.20q: %+v %v, want %s", cmd, d, err, want)
		}
	}
}

func TestValidateProcess(t *testing.T) {
	many := make([]string, MaxPatterns+1)
	for i := range many {
		many[i] = "x"
	}
	tests := []struct {
		name  string
		rules ProcessRules
		want  string // "" for valid
	}{
		{"empty", ProcessRules{}, ""},
		{"typical", ProcessRules{Allow: []string{"git *", "/usr/bin/python3 *"}, Deny: []string{"git push --force*"}, Ask: []string{"deploy *"}}, ""},
		{"64 patterns", ProcessRules{Deny: many[:MaxPatterns]}, ""},
		{"65 patterns", ProcessRules{Deny: many}, "process.deny has 65 patterns, more than 64"},
		{"empty pattern", ProcessRules{Allow: []string{"git *", ""}}, "process.allow[1]: the pattern is empty"},
		{"long pattern", ProcessRules{Ask: []string{strings.Repeat("a", 257)}}, "process.ask[0]: the pattern is 257 bytes, more than 256"},
		{"256 bytes", ProcessRules{Ask: []string{strings.Repeat("a", 256)}}, ""},
		{"newline", ProcessRules{Deny: []string{"a\nb"}}, "control character or line break"},
		{"tab", ProcessRules{Deny: []string{"a\tb"}}, "control character"},
		{"NUL", ProcessRules{Deny: []string{"a\x00b"}}, "control character"},
		{"line separator", ProcessRules{Deny: []string{"a\u2028b"}}, "line break"},
		{"not UTF-8", ProcessRules{Deny: []string{"a\xffb"}}, "not valid UTF-8"},
		{"separator", ProcessRules{Deny: []string{"curl * | sh"}}, "splits a command into pieces, so it can never match"},
		{"ampersand", ProcessRules{Allow: []string{"a && b"}}, "can never match"},
		{"leading space", ProcessRules{Allow: []string{" ls"}}, "starts or ends with a space"},
		{"unknown enforce", ProcessRules{Allow: []string{"git *"}, Enforce: "kernel"}, `process.enforce "kernel" is unknown; use "exec"`},
		{"exec without allow", ProcessRules{Deny: []string{"rm *"}, Enforce: "exec"}, "needs process.allow or process.ask"},
		{"exec with names", ProcessRules{Allow: []string{"git *", "python3"}, Ask: []string{"/usr/local/bin/deploy *"}, Enforce: "exec"}, ""},
		{"exec with a star in the program", ProcessRules{Allow: []string{"g*t status"}, Enforce: "exec"}, `first word "g*t" must name one program literally`},
		{"exec with a bare star", ProcessRules{Allow: []string{"*"}, Enforce: "exec"}, "without *"},
		{"exec with a relative path", ProcessRules{Allow: []string{"./run.sh"}, Enforce: "exec"}, "relative path"},
		{"exec with an unclean path", ProcessRules{Ask: []string{"/usr/bin/../bin/sh -c *"}, Enforce: "exec"}, "clean absolute path (/usr/bin/sh)"},
		{"exec with a star in the path", ProcessRules{Allow: []string{"/usr/*/git"}, Enforce: "exec"}, "without *"},
		{"exec with dot dot", ProcessRules{Allow: []string{".. x"}, Enforce: "exec"}, "not a program"},
		{"deny patterns need no program", ProcessRules{Allow: []string{"git *"}, Deny: []string{"*sudo*"}, Enforce: "exec"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateProcess(tt.rules)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("ValidateProcess: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidRules) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ValidateProcess = %v; want ErrInvalidRules containing %q", err, tt.want)
			}
		})
	}
	if err := mustBuiltin(t).ValidateProcess(ProcessRules{Enforce: "exec"}); !errors.Is(err, ErrInvalidRules) {
		t.Errorf("Engine.ValidateProcess: %v", err)
	}
}

func TestExecPrograms(t *testing.T) {
	got := mustBuiltin(t).ExecPrograms(ProcessRules{
		Allow: []string{"git *", "python3", "git status", "/usr/bin/make *"},
		Deny:  []string{"rm *"},
		Ask:   []string{"deploy *", "python3 -m pip *"},
	})
	want := []string{"git", "python3", "/usr/bin/make", "deploy"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ExecPrograms (-want +got):\n%s", diff)
	}
	if got := ExecPrograms(ProcessRules{Deny: []string{"x"}}); got != nil {
		t.Errorf("no allow or ask: %v", got)
	}
}

// TestProcessRulesCache checks that the per-rules cache is keyed by the
// whole rules: two sets that differ only in where a pattern sits decide
// differently.
func TestProcessRulesCache(t *testing.T) {
	e := mustBuiltin(t)
	ctx := context.Background()
	a, _ := e.Process(ctx, ProcessInput{Kind: KindExec, Command: "x", Rules: ProcessRules{Deny: []string{"x"}}})
	b, _ := e.Process(ctx, ProcessInput{Kind: KindExec, Command: "x", Rules: ProcessRules{Ask: []string{"x"}}})
	c, _ := e.Process(ctx, ProcessInput{Kind: KindExec, Command: "x", Rules: ProcessRules{Allow: []string{"x"}}})
	d, _ := e.Process(ctx, ProcessInput{Kind: KindExec, Command: "x", Rules: ProcessRules{Allow: []string{"x"}, Enforce: EnforceExec}})
	if a.Result != Deny || b.Result != Ask || c.Result != Allow || d.Result != Allow {
		t.Errorf("deny %s, ask %s, allow %s, allow+exec %s", a.Result, b.Result, c.Result, d.Result)
	}
	for _, pair := range [][2]ProcessRules{
		{{Allow: []string{"a", "b"}}, {Allow: []string{"a"}, Deny: []string{"b"}}},
		{{Allow: []string{""}}, {}},
		{{Allow: []string{"a:1:b"}}, {Allow: []string{"a", "b"}}},
		{{Deny: []string{"x"}}, {Ask: []string{"x"}}},
	} {
		if rulesKey(pair[0]) == rulesKey(pair[1]) {
			t.Errorf("rulesKey(%+v) == rulesKey(%+v)", pair[0], pair[1])
		}
	}
}

// TestProcessSeesEnvAndCwd: an operator's rule reads a command's
// environment and directory (input.env, input.cwd) when the caller gives
// them, and sees neither when it does not (an exec); an environment past
// MaxEnvBytes is refused before any rule runs.
func TestProcessSeesEnvAndCwd(t *testing.T) {
	e := extEngine(t, map[string]string{"envguard.rego": `package paddock.ext.envguard.process

deny contains "LD_PRELOAD loads code the command text does not show" if input.env.LD_PRELOAD

deny contains "nothing runs from /secrets" if startswith(input.cwd, "/secrets")
`})
	ctx := context.Background()
	for _, c := range []struct {
		name string
		in   ProcessInput
		want Result
	}{
		{"no env", ProcessInput{Kind: KindExec, Command: "ls"}, Allow},
		{"harmless env", ProcessInput{Kind: KindExec, Command: "ls", Env: map[string]string{"GREETING": "hi"}, Cwd: "/workspace"}, Allow},
		{"LD_PRELOAD", ProcessInput{Kind: KindExec, Command: "ls", Env: map[string]string{"GREETING": "hi", "LD_PRELOAD": "/tmp/x.so"}}, Deny},
		{"cwd", ProcessInput{Kind: KindExec, Command: "ls", Cwd: "/secrets/a"}, Deny},
	} {
		d, err := e.Process(ctx, c.in)
		if err != nil || d.Result != c.want {
			t.Errorf("%s: %+v %v, want %s", c.name, d, err, c.want)
		}
		if c.want == Deny && d.Rule != "ext.envguard.process" {
			t.Errorf("%s: decided by %s, want ext.envguard.process", c.name, d.Rule)
		}
	}
	big := map[string]string{"A": strings.Repeat("x", MaxEnvBytes)}
	if d, err := e.Process(ctx, ProcessInput{Kind: KindExec, Command: "ls", Env: big}); err != nil || d.Result != Deny || d.Rule != RuleLimit {
		t.Errorf("an environment past MaxEnvBytes: %+v %v", d, err)
	}
	fits := map[string]string{"A": strings.Repeat("x", MaxEnvBytes-100)}
	if d, err := e.Process(ctx, ProcessInput{Kind: KindExec, Command: "ls", Env: fits, Cwd: "/workspace"}); err != nil || d.Result != Allow {
		t.Errorf("an environment under MaxEnvBytes: %+v %v", d, err)
	}
}
