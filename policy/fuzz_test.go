package policy

import (
	"context"
	"reflect"
	"testing"
)

// fuzzRules are the rule sets FuzzProcessFastPath judges commands under:
// an allow list with deny and ask (the fast allow), no allow list (the
// fast default), and an allow list of everything.
var fuzzRules = []ProcessRules{
	{Allow: []string{"git *", "ls*", "echo *"}, Deny: []string{"git push --force*", "rm -rf *"}, Ask: []string{"git push*", "deploy *"}},
	{Deny: []string{"rm -rf *", "curl *"}, Ask: []string{"git push*"}},
	{Allow: []string{"*"}, Deny: []string{"sudo *"}},
}

// FuzzProcessFastPath checks that process.rego's fast paths (taken when
// the engine passes input.compiled) decide every command exactly as its
// general rules do (taken without it). The seeds run with every go test.
func FuzzProcessFastPath(f *testing.F) {
	for _, s := range []string{
		"git status", "git  status", "ls -la && echo hi", "echo hi; rm -rf /", " ; ls ;; ",
		"if git push; then ls; fi", "! git push", "!git push", "{ ls; }", "iffy",
		"git\tpush", "git\u00a0push", "git\u2028push", "git\u3000push", "git\u0085push",
		"ls $(git push)", "ls `rm -rf /`", "git \\\npush", "git \\\r\npush", "echo a\\b",
		"ls\r\nls", "deploy x; curl y", "sudo ls", "", "\x00", "ls \xff",
		"time git push", "do rm -rf /", "ls  ;  git push", "echo (", "then", "else x",
	} {
		for i := range fuzzRules {
			f.Add(s, uint8(i))
		}
	}
	e, err := New(Options{MaxEvalTime: loadedMachineEval})
	if err != nil {
		f.Fatal(err)
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, command string, sel uint8) {
		if len(command) > 512 {
			return
		}
		in := ProcessInput{Session: "ses-fuzz", Kind: KindExec, Command: command, Rules: fuzzRules[int(sel)%len(fuzzRules)]}
		l := e.cur.Load()
		cr, err := l.compiledRules(ctx, in.Rules)
		if err != nil {
			t.Fatal(err)
		}
		fast, _, err := l.process.eval(ctx, processInput(in, cr))
		if err != nil {
			t.Fatal(err)
		}
		general, _, err := l.process.eval(ctx, processInput(in, compiledRules{rules: cr.rules}))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fast, general) {
			t.Errorf("command %q under %+v:\n  with input.compiled: %v\n  without:             %v", command, in.Rules, fast, general)
		}
	})
}
