package rules

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestData(t *testing.T) {
	c := mustCompile(t, `{"network": {"allow": [
		"pypi.org",
		"*.Example.com.",
		{"host": "github.com", "methods": ["head", "GET"], "paths": ["/org/*", "/x"]},
		{"host": "github.com", "methods": ["POST"], "paths": ["/org/*/issues"]},
		"203.0.113.7",
		"[2001:db8::1]",
		{"host": "api.test", "paths": ["/v1/*"]}
	]}}`)
	want := Data{
		Mode: ModeAllowlist, Ports: []int{80, 443}, Methods: Methods,
		Entries: []DataEntry{
			{Host: "pypi.org", Kind: HostExact, Methods: []string{}, Paths: []string{}, Rules: []string{"allow * pypi.org"}},
			{Host: "*.example.com", Kind: HostWildcard, Suffix: ".example.com", Methods: []string{}, Paths: []string{}, Rules: []string{"allow * *.example.com"}},
			{Host: "github.com", Kind: HostExact, Limited: true, Methods: []string{"GET", "HEAD"}, Paths: []string{"/org/*", "/x"}, Rules: []string{"allow GET,HEAD github.com/org/*", "allow GET,HEAD github.com/x"}},
			{Host: "github.com", Kind: HostExact, Limited: true, Methods: []string{"POST"}, Paths: []string{"/org/*/issues"}, Rules: []string{"allow POST github.com/org/*/issues"}},
			{Host: "203.0.113.7", Kind: HostIP, CIDR: "203.0.113.7/32", Methods: []string{}, Paths: []string{}, Rules: []string{"allow * 203.0.113.7"}},
			{Host: "2001:db8::1", Kind: HostIP, CIDR: "2001:db8::1/128", Methods: []string{}, Paths: []string{}, Rules: []string{"allow * 2001:db8::1"}},
			{Host: "api.test", Kind: HostExact, Limited: true, Methods: []string{}, Paths: []string{"/v1/*"}, Rules: []string{"allow * api.test/v1/*"}},
		},
		Exact:           map[string][]int{"pypi.org": {0}, "github.com": {2, 3}, "api.test": {6}},
		Wildcards:       []int{1},
		IPs:             []int{4, 5},
		RuleOffline:     RuleOffline,
		RuleOpen:        RuleOpen,
		RuleDefaultDeny: RuleDefaultDeny,
		RulePorts:       RulePorts,
		MaxShownRules:   maxShownRules,
	}
	if diff := cmp.Diff(want, c.Data()); diff != "" {
		t.Errorf("Data (-want +got):\n%s", diff)
	}
	// Every rule a decision can name is in the data.
	var all []string
	for _, e := range c.Data().Entries {
		all = append(all, e.Rules...)
	}
	if diff := cmp.Diff(c.Summary().HTTPRules, all); diff != "" {
		t.Errorf("rules in Data and Summary differ:\n%s", diff)
	}
	for _, in := range []string{`{}`, `{"preset": "offline"}`} {
		d := mustCompile(t, in).Data()
		if len(d.Entries) != 0 || len(d.Ports) != 0 || d.Exact == nil {
			t.Errorf("%s: Data = %+v", in, d)
		}
	}
}
