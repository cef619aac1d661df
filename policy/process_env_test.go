package policy

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// TestProcessErrorHidesEnvValues: an operator's module that fails on a
// sandbox process's environment (to_number of a value that is not a
// number quotes it in its error) refuses the command without the value
// reaching the decision's reason, the returned error or the engine's
// log; the variable's name does, and the error is still ErrEval.
func TestProcessErrorHidesEnvValues(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "envguard.rego", `package paddock.ext.envguard.process

deny contains "port too high" if to_number(input.env.PORT) > 1000
`)
	var logs bytes.Buffer
	e, err := New(Options{ExtDir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	const secret = `hunter2 "quoted" secret`
	d, err := e.Process(context.Background(), ProcessInput{Kind: KindExec, Command: "ls",
		Env: map[string]string{"PORT": secret, "OTHER": "also-a-secret"}, Cwd: "/workspace"})
	if d.Result != Deny || d.Rule != RuleError || !errors.Is(err, ErrEval) {
		t.Fatalf("a module that fails: %+v %v, want a %s deny and ErrEval", d, err, RuleError)
	}
	for what, text := range map[string]string{"reason": d.Reason, "error": err.Error(), "log": logs.String()} {
		if strings.Contains(text, "hunter2") {
			t.Errorf("the %s has the value: %s", what, text)
		}
	}
	if !strings.Contains(d.Reason, "<value of PORT>") {
		t.Errorf("the reason does not name the variable: %s", d.Reason)
	}
}

// TestProcessReasonHidesEnvValues: an operator's deny message that quotes
// a variable's value reaches the decision (and so the ledger) with the
// value replaced by its name.
func TestProcessReasonHidesEnvValues(t *testing.T) {
	e := extEngine(t, map[string]string{"envguard.rego": `package paddock.ext.envguard.process

deny contains sprintf("LD_PRELOAD=%s loads code the command does not show", [input.env.LD_PRELOAD]) if input.env.LD_PRELOAD
`})
	d, err := e.Process(context.Background(), ProcessInput{Kind: KindExec, Command: "ls", Env: map[string]string{"LD_PRELOAD": "/tmp/s3cret.so"}})
	if err != nil || d.Result != Deny {
		t.Fatalf("%+v %v", d, err)
	}
	if strings.Contains(d.Reason, "s3cret") || !strings.Contains(d.Reason, "LD_PRELOAD=<value of LD_PRELOAD>") {
		t.Errorf("reason: %s", d.Reason)
	}
}
