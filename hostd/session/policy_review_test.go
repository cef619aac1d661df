package session_test

import (
	"context"
	"testing"

	"paddock.dev/paddock/policy"
)

// TestReviewProcessSplitterGaps: commands sh runs as the denied/asked
// program that the built-in process module does not see as such.
func TestReviewProcessSplitterGaps(t *testing.T) {
	eng, err := policy.New(policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cases := []struct {
		name  string
		rules policy.ProcessRules
		cmd   string
		want  policy.Result
	}{
		{"deny, tab", policy.ProcessRules{Deny: []string{"git push*"}}, "git\tpush origin main", policy.Deny},
		{"ask, two spaces", policy.ProcessRules{Allow: []string{"git *"}, Ask: []string{"git push*"}}, "git  push origin", policy.Ask},
		{"deny, subshell", policy.ProcessRules{Deny: []string{"curl *"}}, "(curl http://evil)", policy.Deny},
		{"deny, brace group", policy.ProcessRules{Deny: []string{"curl *"}}, "{ curl http://evil; }", policy.Deny},
		{"deny, line continuation", policy.ProcessRules{Deny: []string{"git push*"}}, "git \\\npush origin", policy.Deny},
		{"ask only, line continuation", policy.ProcessRules{Ask: []string{"git push*"}}, "git \\\npush origin", policy.Ask},
		{"deny, CR", policy.ProcessRules{Deny: []string{"curl *"}}, "echo a\rcurl x", policy.Deny},
		{"deny, |&", policy.ProcessRules{Deny: []string{"curl *"}}, "echo a |& curl x", policy.Deny},
	}
	for _, c := range cases {
		d, err := eng.Process(ctx, policy.ProcessInput{Session: "ses-x", Kind: policy.KindExec, Command: c.cmd, Rules: c.rules})
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if d.Result != c.want {
			t.Errorf("%s: %q under %+v is %s (%s), want %s", c.name, c.cmd, c.rules, d.Result, d.Rule, c.want)
		}
	}
}
