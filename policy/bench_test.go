package policy

import (
	"context"
	"testing"

	"paddock.dev/paddock/egress"
	"paddock.dev/paddock/egress/rules"
)

// benchRules is a realistic session policy: 10 allow, 5 deny and 2 ask
// patterns.
var benchRules = ProcessRules{
	Allow: []string{"git *", "go *", "make *", "ls*", "cat *", "grep *", "python3 *", "npm *", "echo *", "cd *"},
	Deny:  []string{"rm -rf /*", "git push --force*", "curl *", "wget *", "sudo *"},
	Ask:   []string{"git push*", "npm publish*"},
}

// benchCommand has three pieces, all allowed.
const benchCommand = "cd /workspace && go test ./... | grep -v ok"

func BenchmarkProcess(b *testing.B) {
	e := benchEngine(b)
	in := ProcessInput{Session: "ses-bench", Kind: KindExec, Command: benchCommand, Rules: benchRules}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		d, err := e.Process(ctx, in)
		if err != nil || d.Result != Allow {
			b.Fatal(d, err)
		}
	}
}

func BenchmarkNetworkDecide(b *testing.B) {
	e := benchEngine(b)
	c, err := rules.Compile(rules.PolicyInput{Preset: rules.PresetDeveloperSafe, Network: &rules.Network{Allow: []rules.AllowEntry{
		{Host: "api.example.com", Methods: []string{"GET", "POST"}, Paths: []string{"/v1/*", "/v2/items/*"}},
	}}})
	if err != nil {
		b.Fatal(err)
	}
	p := e.Network("ses-bench", c)
	r := egress.Request{Sandbox: "ses-bench", Host: "api.example.com", Port: 443, Scheme: "https", Method: "POST", Path: "/v2/items/42"}
	b.ReportAllocs()
	for b.Loop() {
		if d := p.Decide(r); !d.Allow {
			b.Fatal(d)
		}
	}
}

func benchEngine(b *testing.B) *Engine {
	b.Helper()
	e, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	return e
}
