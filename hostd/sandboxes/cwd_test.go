package sandboxes

import (
	"context"
	"errors"
	"testing"
	"time"

	"paddock.dev/paddock/hostd/session"
)

// TestSandboxProcessCwdSpellings: a rule over input.cwd cannot be walked
// around by spelling the same directory another way ("/./secrets",
// "//secrets", a trailing slash): the policy judges, and the ledger
// records, the cleaned path the guest starts in. It runs on the fake
// backend.
func TestSandboxProcessCwdSpellings(t *testing.T) {
	r := fakeRig(t, engine(t, map[string]string{"cwdguard.rego": `package paddock.ext.cwdguard.process

deny contains "nothing runs from /secrets" if startswith(input.cwd, "/secrets")
`}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := r.s.Create(ctx, "", SandboxRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	for _, cwd := range []string{"/./secrets/x", "//secrets/x", "/secrets/./x/", "/.//secrets"} {
		out, err := r.s.Process(ctx, "", sb.ID, ProcessRequest{Command: "true", Cwd: cwd})
		var pr *session.ProcessRefused
		if !errors.As(err, &pr) || pr.Decision.Rule != "ext.cwdguard.process" {
			t.Errorf("cwd %q: %+v %v, want refused by ext.cwdguard.process", cwd, out, err)
		}
	}
	refused := entries(t, r.led, sb.ID, "exec.refused")
	for _, e := range refused {
		if e["cwd"] != "/secrets/x" && e["cwd"] != "/secrets" {
			t.Errorf("a refusal ledgers cwd %v, want the cleaned path", e["cwd"])
		}
	}
}
