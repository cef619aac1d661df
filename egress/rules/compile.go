package rules

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	apiv1 "paddock.dev/paddock/api"
)

// ErrInvalidPolicy is wrapped by every Compile error: the policy as
// written cannot be compiled, and the message says what to change (an
// API answers 400).
var ErrInvalidPolicy = errors.New("invalid network policy")

// Presets.
const (
	PresetOffline       = "offline"
	PresetDeveloperSafe = "developer-safe"
	PresetOpen          = "open"
)

// Modes, as reported by Compiled.Mode and Summary.
const (
	ModeOffline   = "offline"   // no network at all
	ModeAllowlist = "allowlist" // only the allow entries
	ModeOpen      = "open"      // whatever the address checks allow
)

// Enforcement values.
const (
	EnforcementStrict     = "strict"
	EnforcementBestEffort = "best-effort"
)

// developerSafeHosts is the developer-safe preset: package registries and
// source hosting a coding agent commonly needs.
var developerSafeHosts = []string{
	"github.com",
	"*.github.com",
	"*.githubusercontent.com",
	"crates.io",
	"*.crates.io",
	"static.crates.io",
	"pypi.org",
	"files.pythonhosted.org",
	"registry.npmjs.org",
	"proxy.golang.org",
	"sum.golang.org",
}

// DeveloperSafeHosts returns the host patterns of the developer-safe
// preset.
func DeveloperSafeHosts() []string { return slices.Clone(developerSafeHosts) }

// entry is one compiled allow entry.
type entry struct {
	host   hostPattern
	limits Limits
	rules  []string // one readable rule per path pattern (one when paths are unlimited)
}

// Compiled is a policy ready to be evaluated. It implements egress.Policy
// and is safe for concurrent use.
type Compiled struct {
	mode        string
	preset      string
	enforcement string
	entries     []entry // allowlist mode only; in order: preset's, then the client's

	mu         sync.Mutex
	unenforced []string
}

// Compile checks a policy and compiles it. Every error wraps
// ErrInvalidPolicy.
//
// The outcome:
//   - preset "offline": nothing is allowed (Offline); allow entries are
//     refused, and so is network.default "allow".
//   - preset "developer-safe": its hosts, plus the client's allow entries.
//   - preset "open", or no preset and no allow entries: open.
//   - network.default "deny": the preset's hosts and the allow entries,
//     merged; offline when that leaves nothing.
//   - network.default "allow": open; refused with allow entries or with a
//     preset that denies by default.
//
// Entries are merged by host pattern: identical entries become one, and
// an entry without limits replaces every limited entry for the same
// pattern (it allows all they allow).
func Compile(p PolicyInput) (*Compiled, error) {
	c, err := compile(p)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidPolicy, err)
	}
	return c, nil
}

func compile(p PolicyInput) (*Compiled, error) {
	c := &Compiled{preset: p.Preset, enforcement: EnforcementStrict}
	var presetDefault string
	var presetHosts []string
	switch p.Preset {
	case PresetOffline:
		presetDefault = "deny"
	case PresetDeveloperSafe:
		presetDefault, presetHosts = "deny", developerSafeHosts
	case PresetOpen:
		presetDefault = "allow"
	case "":
	default:
		return nil, fmt.Errorf("preset %q is unknown; use %s, %s or %s", p.Preset, PresetOffline, PresetDeveloperSafe, PresetOpen)
	}

	var n Network
	if p.Network != nil {
		n = *p.Network
	}
	switch n.Enforcement {
	case "":
	case EnforcementStrict, EnforcementBestEffort:
		c.enforcement = n.Enforcement
	default:
		return nil, fmt.Errorf("network.enforcement %q is unknown; use %s or %s", n.Enforcement, EnforcementStrict, EnforcementBestEffort)
	}
	if len(n.Allow) > MaxAllowEntries {
		return nil, fmt.Errorf("network.allow has %d entries, more than %d", len(n.Allow), MaxAllowEntries)
	}

	def := n.Default
	switch def {
	case "deny", "allow":
	case "":
		def = presetDefault
		if def == "" {
			def = "allow"
			if len(n.Allow) > 0 {
				def = "deny"
			}
		}
	default:
		return nil, fmt.Errorf(`network.default %q is unknown; use "deny" or "allow"`, n.Default)
	}
	if presetDefault != "" && def != presetDefault {
		return nil, fmt.Errorf("network.default %q contradicts preset %s, which is %q by default; drop one of them", def, p.Preset, presetDefault)
	}
	if def == "allow" {
		if len(n.Allow) > 0 {
			return nil, fmt.Errorf(`network.allow needs network.default "deny": with "allow" everything is allowed already`)
		}
		c.mode = ModeOpen
		return c, nil
	}
	if p.Preset == PresetOffline && len(n.Allow) > 0 {
		return nil, fmt.Errorf("preset offline allows no network; drop network.allow, or use preset developer-safe or no preset")
	}

	for _, h := range presetHosts {
		hp, err := parseHostPattern(h)
		if err != nil { // a bug in the preset, not the client's doing
			return nil, fmt.Errorf("preset %s: %w", p.Preset, err)
		}
		c.add(entry{host: hp})
	}
	for i, a := range n.Allow {
		hp, err := parseHostPattern(a.Host)
		if err != nil {
			return nil, fmt.Errorf("network.allow[%d]: %w", i, err)
		}
		l, err := NewLimits(a.Methods, a.Paths)
		if err != nil {
			return nil, fmt.Errorf("network.allow[%d] (%s): %w", i, hp.text, err)
		}
		c.add(entry{host: hp, limits: l})
	}
	if len(c.entries) == 0 {
		c.mode = ModeOffline
		return c, nil
	}
	c.mode = ModeAllowlist
	for i := range c.entries {
		c.entries[i].rules = ruleTexts(c.entries[i])
	}
	return c, nil
}

// add merges e into c.entries.
func (c *Compiled) add(e entry) {
	for i, o := range c.entries {
		if o.host.text != e.host.text {
			continue
		}
		if o.limits.Unlimited() || o.limits.equal(e.limits) {
			return // already covered
		}
		if e.limits.Unlimited() {
			// e supersedes every limited entry for this host: put it in
			// the first one's place and drop the others.
			c.entries[i] = e
			c.entries = slices.DeleteFunc(c.entries, func(x entry) bool {
				return x.host.text == e.host.text && !x.limits.Unlimited()
			})
			return
		}
	}
	c.entries = append(c.entries, e)
}

// ruleTexts writes an entry as readable rules: "allow * pypi.org",
// "allow GET,HEAD github.com/org/*" (one per path pattern).
func ruleTexts(e entry) []string {
	m := e.limits.methodText()
	if e.limits.paths == nil {
		return []string{"allow " + m + " " + e.host.text}
	}
	out := make([]string, len(e.limits.paths))
	for i, p := range e.limits.paths {
		out[i] = "allow " + m + " " + hostInRule(e.host) + p
	}
	return out
}

// hostInRule brackets an IPv6 literal so that a path after it reads well.
func hostInRule(h hostPattern) string {
	if h.ip.Is6() {
		return "[" + h.text + "]"
	}
	return h.text
}

// Mode is ModeOffline, ModeAllowlist or ModeOpen.
func (c *Compiled) Mode() string { return c.mode }

// Offline reports whether nothing at all is allowed (the sandbox needs no
// network card).
func (c *Compiled) Offline() bool { return c.mode == ModeOffline }

// Open reports whether every destination the address checks allow is
// allowed.
func (c *Compiled) Open() bool { return c.mode == ModeOpen }

// Enforcement is EnforcementStrict or EnforcementBestEffort.
func (c *Compiled) Enforcement() string { return c.enforcement }

// HasLimits reports whether any allow entry limits methods or paths, so
// that enforcing the policy needs an HTTP-aware proxy (and TLS
// interception for HTTPS).
func (c *Compiled) HasLimits() bool {
	for _, e := range c.entries {
		if !e.limits.Unlimited() {
			return true
		}
	}
	return false
}

// Entries returns the merged allow entries in canonical form (preset's
// first), for building another engine from the same policy.
func (c *Compiled) Entries() []AllowEntry {
	out := make([]AllowEntry, len(c.entries))
	for i, e := range c.entries {
		out[i] = AllowEntry{Host: e.host.text, Methods: e.limits.MethodList(), Paths: e.limits.PathList()}
	}
	return out
}

// AddUnenforced records a part of the policy that the caller cannot
// enforce (with enforcement best-effort), in words for the session record,
// such as "http method and path rules: no TLS interception". Repeats are
// kept once.
func (c *Compiled) AddUnenforced(what string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.Contains(c.unenforced, what) {
		c.unenforced = append(c.unenforced, what)
	}
}

// Summary is the public wire type api.NetworkSummary, kept under this name here.
type Summary = apiv1.NetworkSummary

// Summary describes the compiled policy.
func (c *Compiled) Summary() Summary {
	s := Summary{Mode: c.mode, Preset: c.preset, Enforcement: c.enforcement}
	for _, e := range c.entries {
		if !slices.Contains(s.AllowHosts, e.host.text) {
			s.AllowHosts = append(s.AllowHosts, e.host.text)
		}
		s.HTTPRules = append(s.HTTPRules, e.rules...)
	}
	c.mu.Lock()
	s.Unenforced = slices.Clone(c.unenforced)
	c.mu.Unlock()
	return s
}
