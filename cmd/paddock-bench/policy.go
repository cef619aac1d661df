package main

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"time"

	"paddock.dev/paddock/egress"
	"paddock.dev/paddock/egress/rules"
	"paddock.dev/paddock/policy"
)

// benchRules is a realistic session policy: 10 allow, 5 deny and 2 ask
// patterns.
var benchRules = policy.ProcessRules{
	Allow: []string{"git *", "go *", "make *", "ls*", "cat *", "grep *", "python3 *", "npm *", "echo *", "cd *"},
	Deny:  []string{"rm -rf /*", "git push --force*", "curl *", "wget *", "sudo *"},
	Ask:   []string{"git push*", "npm publish*"},
}

// benchCommand has three pieces, every one allowed.
const benchCommand = "cd /workspace && go test ./... | grep -v ok"

// policyDecisions is how many decisions each latency is taken over.
const policyDecisions = 20000

// benchPolicy measures the Rego engine's decisions (policy.Engine, OPA,
// prepared once) beside the same decisions made in plain Go in the same
// run: a process decision against a small native matcher written for the
// comparison, and a request decision against egress/rules, the proxy's
// native policy. It prints p50 and p99 of single decisions, one at a time.
// The goal for a process decision is ≤ 50 µs at p50.
// benchPolicy measures the decisions; apiExec, when measured in the same
// run, is an exec round trip through the API, for the decision's share.
func benchPolicy(apiExec time.Duration) {
	e, err := policy.New(policy.Options{})
	check(err)
	ctx := context.Background()
	in := policy.ProcessInput{Session: "ses-bench", Kind: policy.KindExec, Command: benchCommand, Rules: benchRules}
	d, err := e.Process(ctx, in)
	check(err)
	nr, np, nrule := nativeProcess(benchCommand, benchRules)
	if string(d.Result) != nr || d.Pattern != np || d.Rule != nrule {
		check(fmt.Errorf("the native matcher disagrees with the engine: %s %s %q, engine %+v", nr, nrule, np, d))
	}
	fmt.Printf("\npolicy decisions, one at a time, %d each; p50 and p99 (10 allow, 5 deny, 2 ask patterns; a 3-piece command):\n", policyDecisions)
	rego := latencies(func() {
		if _, err := e.Process(ctx, in); err != nil {
			check(err)
		}
	})
	native := latencies(func() { nativeProcess(benchCommand, benchRules) })
	rowMicro("process decision p50, Rego vs plain Go", rego.p50, native.p50, "plain Go matcher (goal: Rego ≤ 50µs)")
	rowMicro("process decision p99, Rego vs plain Go", rego.p99, native.p99, "plain Go matcher")
	if apiExec > 0 {
		fmt.Printf("%-44s %12s %12s %6.1f%%  %s\n", "process decision p50, share of an API exec", fmt.Sprintf("%.1fµs", float64(rego.p50)/1e3),
			apiExec.Round(10*time.Microsecond), 100*float64(rego.p50)/float64(apiExec), "the exec round trip above (goal ≤ 5%)")
	}

	c, err := rules.Compile(rules.PolicyInput{Preset: rules.PresetDeveloperSafe, Network: &rules.Network{Allow: []rules.AllowEntry{
		{Host: "api.example.com", Methods: []string{"GET", "POST"}, Paths: []string{"/v1/*", "/v2/items/*"}},
	}}})
	check(err)
	p := e.Network("ses-bench", c)
	r := egress.Request{Sandbox: "ses-bench", Host: "api.example.com", Port: 443, Scheme: "https", Method: "POST", Path: "/v2/items/42"}
	if p.Decide(r) != c.Decide(r) {
		check(fmt.Errorf("the engine and egress/rules disagree on %+v", r))
	}
	// Each request a new path, so every decision is OPA's (the daemon
	// keeps a session's answers for the same question: the second row).
	n := 0
	regoNet := latencies(func() {
		n++
		q := r
		q.Path = fmt.Sprintf("/v2/items/%d", n)
		p.Decide(q)
	})
	nativeNet := latencies(func() { c.Decide(r) })
	cached := latencies(func() { p.Decide(r) })
	rowMicro("request decision p50, Rego vs egress/rules", regoNet.p50, nativeNet.p50, "egress/rules (developer-safe + a limited host)")
	rowMicro("request decision p99, Rego vs egress/rules", regoNet.p99, nativeNet.p99, "egress/rules")
	rowMicro("request decision p50, a question seen before", cached.p50, nativeNet.p50, "egress/rules (the session's kept answer)")
}

type latency struct{ p50, p99 time.Duration }

// latencies times policyDecisions calls of f one by one, after a warm-up,
// from a collected heap.
func latencies(f func()) latency {
	for range 1000 {
		f()
	}
	runtime.GC()
	ds := make([]time.Duration, policyDecisions)
	for i := range ds {
		t0 := time.Now()
		f()
		ds[i] = time.Since(t0)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return latency{p50: ds[len(ds)/2], p99: ds[len(ds)*99/100]}
}

// rowMicro is row for figures of microseconds.
func rowMicro(name string, ours, peer time.Duration, note string) {
	us := func(d time.Duration) string { return fmt.Sprintf("%.1fµs", float64(d)/1e3) }
	fmt.Printf("%-44s %12s %12s %7.1f×  %s\n", name, us(ours), us(peer), float64(ours)/float64(peer), note)
}

// nativeProcess is process.rego's decision in plain Go, for the
// comparison only: the same pieces (cut at ; & | and line breaks,
// trimmed, empty ones dropped), the same order (deny, not allowed, ask,
// allow, default), '*' the only wildcard.
func nativeProcess(command string, r policy.ProcessRules) (result, pattern, rule string) {
	pieces := strings.FieldsFunc(command, func(c rune) bool { return strings.ContainsRune(";&|\r\n", c) })
	n := 0
	for _, p := range pieces {
		if p = strings.TrimSpace(p); p != "" {
			pieces[n] = p
			n++
		}
	}
	pieces = pieces[:n]
	if len(pieces) == 0 {
		return "deny", "", "process.empty"
	}
	first := func(ps []string, s string) (string, bool) {
		for _, p := range ps {
			if globMatch(p, s) {
				return p, true
			}
		}
		return "", false
	}
	for _, pc := range pieces {
		if p, ok := first(r.Deny, pc); ok {
			return "deny", p, "process.deny"
		}
	}
	if len(r.Allow) > 0 {
		for _, pc := range pieces {
			_, a := first(r.Allow, pc)
			_, k := first(r.Ask, pc)
			if !a && !k {
				return "deny", "", "process.not_allowed"
			}
		}
	}
	for _, pc := range pieces {
		if p, ok := first(r.Ask, pc); ok {
			return "ask", p, "process.ask"
		}
	}
	if len(r.Allow) > 0 {
		p, _ := first(r.Allow, pieces[0])
		return "allow", p, "process.allow"
	}
	return "allow", "", "process.default"
}

// globMatch: '*' matches any run of bytes, everything else itself.
func globMatch(pattern, s string) bool {
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case p < len(pattern) && pattern[p] == s[i]:
			p++
			i++
		case star >= 0:
			mark++
			i = mark
			p = star + 1
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}
