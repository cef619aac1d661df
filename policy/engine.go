package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/topdown"
	"github.com/open-policy-agent/opa/v1/topdown/cache"
)

// MaxEvalTime bounds one decision. A module that takes longer (an
// operator's comprehension over a huge range, say) is cut off and the
// decision denies.
const MaxEvalTime = 500 * time.Millisecond

// regexCacheEntries is how many compiled patterns (one regular expression
// per pattern list) the engine keeps between decisions.
const regexCacheEntries = 4096

// Options configure an Engine.
type Options struct {
	// ExtDir holds the operator's modules: a directory of .rego files
	// (searched recursively) or an OPA bundle (.tar.gz). Empty: the
	// built-in modules alone.
	ExtDir string
	// BundleKey, when set, makes ExtDir have to be an OPA bundle signed
	// with its private half (LoadBundleKey); a directory, an unsigned
	// bundle or one whose files do not match their signature is refused.
	BundleKey *BundleKey
	// Logger receives loads, refused loads and evaluation errors. Nil:
	// nothing is logged.
	Logger *slog.Logger
	// MaxEvalTime bounds one decision; a decision that takes longer is a
	// deny. Zero: MaxEvalTime. Tests that decide many times at once on a
	// loaded machine raise it.
	MaxEvalTime time.Duration
}

// Engine makes policy decisions. It is safe for concurrent use; a reload
// swaps the whole prepared set at once, so a decision sees either the old
// set or the new one.
type Engine struct {
	opts  Options
	log   *slog.Logger
	cache cache.InterQueryValueCache

	cur    atomic.Pointer[loaded]
	loadMu sync.Mutex // one load at a time

	statusMu sync.Mutex
	status   Status
}

// loaded is one compiled, tested and prepared set of modules.
type loaded struct {
	revision int
	builtin  []string
	operator []string

	process      *prepared
	compiled     *prepared // data.paddock.process.compiled, per set of rules
	rules        *rulesCache
	httpCompiled *prepared // data.paddock.http.compiled, per session
	name         *prepared
	tunnel       *prepared
	request      *prepared
	grant        *prepared
	approval     *prepared
}

// prepared is one decision's query: the built-in rule bound to d, and
// each operator rule of its category bound to x0, x1, ….
type prepared struct {
	pq      rego.PreparedEvalQuery
	ext     []extRule // ext[i] is bound to "x<i>"
	maxEval time.Duration
}

// New compiles the built-in modules and the operator's (Options.ExtDir),
// runs every test module, and prepares the queries. It fails when any of
// that fails: a daemon should not start on a policy it cannot load.
func New(opts Options) (*Engine, error) {
	e := &Engine{opts: opts, log: opts.Logger}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	n := regexCacheEntries
	e.cache = cache.NewInterQueryValueCache(context.Background(), &cache.Config{
		InterQueryBuiltinValueCache: cache.InterQueryBuiltinValueCacheConfig{MaxNumEntries: &n},
	})
	if err := e.Reload(); err != nil {
		return nil, err
	}
	return e, nil
}

// Status reports what the engine runs on now.
func (e *Engine) Status() Status {
	e.statusMu.Lock()
	defer e.statusMu.Unlock()
	s := e.status
	s.Builtin = append([]string(nil), s.Builtin...)
	s.Operator = append([]string(nil), s.Operator...)
	return s
}

// Reload reads the operator's modules again and, when they compile and
// every test passes, puts them in force. Otherwise the modules in force
// stay, the error is logged and kept in Status, and returned (wrapping
// ErrLoad).
func (e *Engine) Reload() error {
	e.loadMu.Lock()
	defer e.loadMu.Unlock()
	ctx := context.Background()
	prev := e.cur.Load()
	rev := 1
	if prev != nil {
		rev = prev.revision + 1
	}
	l, err := load(ctx, e.opts.ExtDir, e.opts.BundleKey, rev, e.cache, e.opts.MaxEvalTime)
	now := time.Now()
	e.statusMu.Lock()
	defer e.statusMu.Unlock()
	if err != nil {
		err = fmt.Errorf("%w: %w", ErrLoad, err)
		e.status.LastError = err.Error()
		e.status.FailedAt = now
		e.status.Source = e.opts.ExtDir
		if prev != nil {
			e.log.Error("policy: modules refused; the previous set stays in force", "source", e.opts.ExtDir, "revision", prev.revision, "err", err)
		}
		return err
	}
	e.cur.Store(l)
	e.status = Status{
		Revision: l.revision,
		LoadedAt: now,
		Builtin:  l.builtin,
		Operator: l.operator,
		Source:   e.opts.ExtDir,
	}
	e.log.Info("policy: modules loaded", "revision", l.revision, "builtin", len(l.builtin), "operator", len(l.operator), "source", e.opts.ExtDir)
	return nil
}

// withheldBuiltins are OPA built-in functions the modules may not call: a
// decision must not wait on, or leak to, another host, nor read the
// daemon's environment.
var withheldBuiltins = map[string]bool{"http.send": true, "net.lookup_ip_addr": true, "opa.runtime": true}

// capabilities are OPA's built-in functions minus withheldBuiltins.
func capabilities() *ast.Capabilities {
	c := ast.CapabilitiesForThisVersion()
	c.Builtins = slicesDeleteFunc(c.Builtins, func(b *ast.Builtin) bool { return withheldBuiltins[b.Name] })
	c.AllowNet = []string{}
	return c
}

func slicesDeleteFunc[T any](s []T, del func(T) bool) []T {
	out := s[:0]
	for _, x := range s {
		if !del(x) {
			out = append(out, x)
		}
	}
	return out
}

func newCompiler() *ast.Compiler {
	return ast.NewCompiler().
		WithCapabilities(capabilities()).
		WithDefaultRegoVersion(ast.RegoV1).
		WithStrict(true)
}

// sources reads, parses and checks the built-in and operator modules.
func sources(extDir string, key *BundleKey) (builtin, operator map[string]*ast.Module, err error) {
	builtin, err = parseModules(builtinFiles(), false)
	if err != nil {
		return nil, nil, fmt.Errorf("built-in modules: %w", err) // a bug, caught by the tests
	}
	files, err := readExt(extDir, key)
	if err != nil {
		return nil, nil, err
	}
	operator, err = parseModules(files, true)
	if err != nil {
		return nil, nil, err
	}
	return builtin, operator, nil
}

// load builds a new set: parse, check, run the tests, compile the
// decision modules (tests left out), prepare the queries.
func load(ctx context.Context, extDir string, key *BundleKey, rev int, c cache.InterQueryValueCache, maxEval time.Duration) (*loaded, error) {
	if maxEval <= 0 {
		maxEval = MaxEvalTime
	}
	builtin, operator, err := sources(extDir, key)
	if err != nil {
		return nil, err
	}
	all := make(map[string]*ast.Module, len(builtin)+len(operator))
	decide := map[string]*ast.Module{}
	for _, set := range []map[string]*ast.Module{builtin, operator} {
		for name, m := range set {
			all[name] = m
			if !strings.HasSuffix(name, "_test.rego") {
				decide[name] = m.Copy()
			}
		}
	}
	rep, err := runTests(ctx, all, false)
	if err != nil {
		return nil, err
	}
	if failed := rep.failures(); len(failed) > 0 {
		run := "paddock policy test"
		if extDir != "" {
			run += " --ext " + extDir
		}
		return nil, fmt.Errorf("%d of %d Rego tests failed: %s (run `%s` to see them all)", len(failed), len(rep.Tests), strings.Join(failed, "; "), run)
	}
	comp := newCompiler()
	if comp.Compile(decide); comp.Failed() {
		return nil, comp.Errors
	}
	opMods := map[string]*ast.Module{}
	for name := range operator {
		if !strings.HasSuffix(name, "_test.rego") {
			opMods[name] = comp.Modules[name]
		}
	}
	ext, err := findExtRules(opMods, comp.Graph)
	if err != nil {
		return nil, err
	}
	l := &loaded{revision: rev, builtin: sortedKeys(builtin), operator: sortedKeys(operator), rules: newRulesCache()}
	for _, q := range []struct {
		dst      **prepared
		rule     string
		category string
	}{
		{&l.process, "data.paddock.process.decision", "process"},
		{&l.compiled, "data.paddock.process.compiled", ""},
		{&l.httpCompiled, "data.paddock.http.compiled", ""},
		{&l.name, "data.paddock.http.allows_name", "http"},
		{&l.tunnel, "data.paddock.http.tunnel", "http"},
		{&l.request, "data.paddock.http.decision", "http"},
		{&l.grant, "data.paddock.http.grant", "grant"},
		{&l.approval, "data.paddock.approval.decision", "approval"},
	} {
		p, err := prepare(ctx, comp, q.rule, q.category, ext, c)
		if err != nil {
			return nil, fmt.Errorf("preparing %s: %w", q.rule, err)
		}
		p.maxEval = maxEval
		*q.dst = p
	}
	return l, nil
}

// prepare builds one decision's query: "d = <rule>", then for each
// operator rule of the category "x<i> = [reason | some reason in <rule>]"
// (or, for inspect, "x<i> = [v | v := <rule>]", which is empty when the
// rule is undefined).
func prepare(ctx context.Context, comp *ast.Compiler, rule, category string, ext []extRule, c cache.InterQueryValueCache) (*prepared, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "d = %s", rule)
	p := &prepared{}
	for _, r := range ext {
		if r.category != category {
			continue
		}
		i := len(p.ext)
		if r.kind == "inspect" {
			fmt.Fprintf(&b, "; x%d = [v | v := %s]", i, r.path)
		} else {
			fmt.Fprintf(&b, "; x%d = [v | some v in %s]", i, r.path)
		}
		p.ext = append(p.ext, r)
	}
	pq, err := rego.New(
		rego.Compiler(comp),
		rego.Query(b.String()),
		rego.StrictBuiltinErrors(true),
		rego.InterQueryBuiltinValueCache(c),
		rego.Capabilities(capabilities()),
	).PrepareForEval(ctx)
	if err != nil {
		return nil, err
	}
	p.pq = pq
	return p, nil
}

// noMetrics spares each evaluation a metrics registry of its own.
var noMetrics = metrics.NoOp()

// extHit is what one operator rule said.
type extHit struct {
	rule    extRule
	reasons []string // deny, ask: the set's members
	inspect bool
}

// eval runs a prepared query on input, within its time limit and ctx, and
// returns the built-in result and what the operator's rules said.
func (p *prepared) eval(ctx context.Context, input ast.Value) (map[string]any, []extHit, error) {
	cancel := topdown.NewCancel()
	stop := context.AfterFunc(ctx, cancel.Cancel)
	defer stop()
	limit := p.maxEval
	if limit <= 0 {
		limit = MaxEvalTime
	}
	t := time.AfterFunc(limit, cancel.Cancel)
	defer t.Stop()
	rs, err := p.pq.Eval(ctx, rego.EvalParsedInput(input), rego.EvalExternalCancel(cancel), rego.EvalMetrics(noMetrics))
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrEval, cerr)
		}
		var te *topdown.Error
		if errors.As(err, &te) && te.Code == topdown.CancelErr {
			return nil, nil, fmt.Errorf("%w: a module took longer than %v", ErrEval, limit)
		}
		return nil, nil, fmt.Errorf("%w: %w", ErrEval, err)
	}
	if len(rs) != 1 {
		return nil, nil, fmt.Errorf("%w: %d results, want 1 (is a rule undefined?)", ErrEval, len(rs))
	}
	b := rs[0].Bindings
	d, ok := b["d"].(map[string]any)
	if !ok {
		// allows_name is a boolean.
		d = map[string]any{"value": b["d"]}
	}
	var hits []extHit
	for i, r := range p.ext {
		vs, _ := b[fmt.Sprintf("x%d", i)].([]any)
		if len(vs) == 0 {
			continue
		}
		h := extHit{rule: r}
		for _, v := range vs {
			switch v := v.(type) {
			case string:
				h.reasons = append(h.reasons, v)
			case bool:
				h.inspect = h.inspect || v
				if r.kind != "inspect" {
					h.reasons = append(h.reasons, fmt.Sprint(v))
				}
			default:
				j, _ := json.Marshal(v)
				h.reasons = append(h.reasons, string(j))
			}
		}
		sort.Strings(h.reasons)
		hits = append(hits, h)
	}
	return d, hits, nil
}

// firstHit returns the first operator rule of a kind that said something.
func firstHit(hits []extHit, kind string) (extHit, bool) {
	for _, h := range hits {
		if h.rule.kind == kind && len(h.reasons) > 0 {
			return h, true
		}
	}
	return extHit{}, false
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

func boolean(m map[string]any, k string) bool {
	b, _ := m[k].(bool)
	return b
}
