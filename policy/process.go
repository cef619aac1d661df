package policy

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Rule names the engine itself gives (the modules name the others).
const (
	RuleLimit = "process.limit" // the command is longer or has more pieces than the engine judges
	RuleError = "policy.error"  // evaluation failed; the decision denies
)

// Process decides whether a session may run one command. The rules must
// pass ValidateProcess (an error wrapping ErrInvalidRules otherwise, with
// a Deny decision). A command longer than MaxCommandBytes, or with more
// than MaxCommandSeparators separators, is denied (RuleLimit). An
// evaluation error returns a Deny decision (RuleError) and the error.
//
// The built-in module decides first; then an operator's process.deny
// turns any result into Deny, and its process.ask turns Allow into Ask.
func (e *Engine) Process(ctx context.Context, in ProcessInput) (ProcessDecision, error) {
	if in.Kind != KindExec && in.Kind != KindJob {
		err := fmt.Errorf("%w: kind %q is unknown; use %q or %q", ErrInvalidInput, in.Kind, KindExec, KindJob)
		return ProcessDecision{Result: Deny, Rule: RuleError, Reason: err.Error()}, err
	}
	if len(in.Command) > MaxCommandBytes {
		return ProcessDecision{Result: Deny, Rule: RuleLimit, Reason: fmt.Sprintf("the command is %d bytes, more than the %d a policy judges; put it in a script file and run that", len(in.Command), MaxCommandBytes)}, nil
	}
	if n := countSeparators(in.Command); n > MaxCommandSeparators {
		return ProcessDecision{Result: Deny, Rule: RuleLimit, Reason: fmt.Sprintf("the command has %d separators (; & | and line breaks), more than the %d a policy judges; put it in a script file and run that", n, MaxCommandSeparators)}, nil
	}
	if n := envBytes(in); n > MaxEnvBytes {
		return ProcessDecision{Result: Deny, Rule: RuleLimit, Reason: fmt.Sprintf("the command's environment and directory are %d bytes, more than the %d a policy judges; pass large values in a file instead", n, MaxEnvBytes)}, nil
	}
	l := e.cur.Load()
	cr, err := l.compiledRules(ctx, in.Rules)
	if errors.Is(err, ErrInvalidRules) {
		return ProcessDecision{Result: Deny, Rule: RuleError, Reason: err.Error()}, err
	}
	var d map[string]any
	var hits []extHit
	if err == nil {
		d, hits, err = l.process.eval(ctx, processInput(in, cr))
	}
	if err != nil {
		// A module's runtime error may quote what it read (to_number's
		// `parsing "..."`): the environment's values never leave here,
		// not to the log, the ledger or the caller's error.
		err = scrubEnv(err, in.Env)
		e.log.Warn("policy: process decision failed; denied", "session", in.Session, "err", err)
		return ProcessDecision{Result: Deny, Rule: RuleError, Reason: "the policy could not decide (" + err.Error() + "), so the command was refused"}, err
	}
	out := ProcessDecision{
		Result:  Result(str(d, "result")),
		Rule:    str(d, "rule"),
		Pattern: str(d, "pattern"),
		Piece:   str(d, "piece"),
		Reason:  str(d, "reason"),
	}
	switch out.Result {
	case Allow, Deny, Ask:
	default:
		err := fmt.Errorf("%w: process.rego answered result %q", ErrEval, out.Result)
		return ProcessDecision{Result: Deny, Rule: RuleError, Reason: err.Error()}, err
	}
	// An operator's message may quote the environment; the ledger gets
	// the reason, so its values are taken out here too.
	if h, ok := firstHit(hits, "deny"); ok {
		return ProcessDecision{Result: Deny, Rule: h.rule.name, Reason: scrubText(h.reasons[0], in.Env)}, nil
	}
	if h, ok := firstHit(hits, "ask"); ok && out.Result == Allow {
		return ProcessDecision{Result: Ask, Rule: h.rule.name, Reason: scrubText(h.reasons[0], in.Env)}, nil
	}
	return out, nil
}

// scrubEnv returns err with every value of env in its text (as it is,
// and as Go quotes it) replaced by "<value of NAME>", keeping what err
// wraps (errors.Is still sees ErrEval). Values shorter than 3 bytes are
// left: they say little, and replacing them would garble the message
// (line numbers). err itself when env is empty or its text has none.
func scrubEnv(err error, env map[string]string) error {
	if err == nil || len(env) == 0 {
		return err
	}
	msg := scrubText(err.Error(), env)
	if msg == err.Error() {
		return err
	}
	return &scrubbedError{msg: msg, err: err}
}

// scrubText is s with env's values taken out, as scrubEnv does.
func scrubText(s string, env map[string]string) string {
	if len(env) == 0 {
		return s
	}
	names := make([]string, 0, len(env))
	for k, v := range env {
		if len(v) >= 3 {
			names = append(names, k)
		}
	}
	// Longest values first, so one that contains another goes whole.
	sort.Slice(names, func(i, j int) bool {
		if a, b := len(env[names[i]]), len(env[names[j]]); a != b {
			return a > b
		}
		return names[i] < names[j]
	})
	for _, k := range names {
		v, mark := env[k], "<value of "+k+">"
		s = strings.ReplaceAll(s, v, mark)
		if q := strconv.Quote(v); q[1:len(q)-1] != v {
			s = strings.ReplaceAll(s, q[1:len(q)-1], mark)
		}
	}
	return s
}

// scrubbedError is an error whose text had the environment's values taken
// out; it unwraps to the kinds (ErrEval) the original wraps, not to the
// original itself, whose text still has them.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }

func (e *scrubbedError) Is(target error) bool { return errors.Is(e.err, target) }

// envBytes is the size of a command's environment (as NAME=value lines)
// and directory.
func envBytes(in ProcessInput) int {
	n := len(in.Cwd)
	for k, v := range in.Env {
		n += len(k) + 1 + len(v) + 1
	}
	return n
}

func countSeparators(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ';', '&', '|', '\n', '\r':
			n++
		}
	}
	return n
}

var (
	kSession  = ast.StringTerm("session")
	kKind     = ast.StringTerm("kind")
	kCommand  = ast.StringTerm("command")
	kRules    = ast.StringTerm("rules")
	kAllow    = ast.StringTerm("allow")
	kDeny     = ast.StringTerm("deny")
	kAsk      = ast.StringTerm("ask")
	kEnforce  = ast.StringTerm("enforce")
	kCompiled = ast.StringTerm("compiled")
	kEnv      = ast.StringTerm("env")
	kCwd      = ast.StringTerm("cwd")
)

// processInput builds the module's input as an AST value directly, with
// no JSON in between, from the rules' cached terms (see compiledRules).
func processInput(in ProcessInput, cr compiledRules) ast.Value {
	obj := ast.NewObject(
		ast.Item(kSession, ast.StringTerm(in.Session)),
		ast.Item(kKind, ast.StringTerm(in.Kind)),
		ast.Item(kCommand, ast.StringTerm(in.Command)),
		ast.Item(kRules, cr.rules),
	)
	if cr.compiled != nil {
		obj.Insert(kCompiled, cr.compiled)
	}
	if len(in.Env) > 0 {
		env := ast.NewObject()
		for k, v := range in.Env {
			env.Insert(ast.StringTerm(k), ast.StringTerm(v))
		}
		obj.Insert(kEnv, ast.NewTerm(env))
	}
	if in.Cwd != "" {
		obj.Insert(kCwd, ast.StringTerm(in.Cwd))
	}
	return obj
}

func rulesTerm(r ProcessRules) *ast.Term {
	return ast.NewTerm(ast.NewObject(
		ast.Item(kAllow, stringArray(r.Allow)),
		ast.Item(kDeny, stringArray(r.Deny)),
		ast.Item(kAsk, stringArray(r.Ask)),
		ast.Item(kEnforce, ast.StringTerm(r.Enforce)),
	))
}

// maxCachedRules bounds the sets of rules kept compiled.
const maxCachedRules = 4096

// compiledRules is one set of process rules, checked (ValidateProcess),
// as an input term, and with what process.rego's "compiled" rule makes of
// them (one regular expression per list). All of it depends on the rules
// alone, so it is made once per session's rules and handed back as
// input.compiled on every decision, instead of being rebuilt from the
// patterns each time.
type compiledRules struct {
	rules    *ast.Term
	compiled *ast.Term
}

// rulesCache keeps compiledRules by rules. It belongs to one loaded set
// of modules, so a reload starts it afresh.
type rulesCache struct {
	mu sync.Mutex
	m  map[string]compiledRules
}

func newRulesCache() *rulesCache { return &rulesCache{m: map[string]compiledRules{}} }

// rulesKey writes rules as a map key: every list and pattern with its
// length first, so that no two sets of rules share a key.
func rulesKey(r ProcessRules) string {
	var b strings.Builder
	put := func(s string) {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	put(r.Enforce)
	for _, l := range [][]string{r.Allow, r.Deny, r.Ask} {
		b.WriteString(strconv.Itoa(len(l)))
		b.WriteByte('/')
		for _, p := range l {
			put(p)
		}
	}
	return b.String()
}

// compiledRules returns rules checked and compiled, from the cache or
// made now. Rules that fail ValidateProcess give its error.
func (l *loaded) compiledRules(ctx context.Context, r ProcessRules) (compiledRules, error) {
	key := rulesKey(r)
	l.rules.mu.Lock()
	cr, ok := l.rules.m[key]
	l.rules.mu.Unlock()
	if ok {
		return cr, nil
	}
	if err := ValidateProcess(r); err != nil {
		return compiledRules{}, err
	}
	cr.rules = rulesTerm(r)
	d, _, err := l.compiled.eval(ctx, ast.NewObject(ast.Item(kRules, cr.rules)))
	if err != nil {
		return compiledRules{}, err
	}
	v, err := ast.InterfaceToValue(d)
	if err != nil {
		return compiledRules{}, fmt.Errorf("%w: %w", ErrEval, err)
	}
	cr.compiled = ast.NewTerm(v)
	l.rules.mu.Lock()
	defer l.rules.mu.Unlock()
	if len(l.rules.m) >= maxCachedRules {
		for k := range l.rules.m { // drop one, more or less at random
			delete(l.rules.m, k)
			break
		}
	}
	l.rules.m[key] = cr
	return cr, nil
}

// EnforceExec is ProcessRules.Enforce for the guest's execute list.
const EnforceExec = "exec"

// ValidateProcess checks a session's process rules, as a create request
// should before it is accepted. Every error wraps ErrInvalidRules and says
// what to change.
//
//   - At most MaxPatterns patterns per list, each 1 to MaxPatternBytes
//     bytes of UTF-8 text on one line (no control characters), without a
//     separator (; & | ( ) `: a piece never holds one, so such a pattern
//     could never match), without leading or trailing spaces (pieces are
//     trimmed) or runs of white space (a piece's are one space).
//   - Enforce is "" or "exec". With "exec", allow and ask together name at
//     least one pattern, and each of their patterns starts with a program:
//     a literal name without * or / (git), or an absolute path without *
//     (/usr/bin/git).
func ValidateProcess(r ProcessRules) error {
	for _, l := range []struct {
		name string
		ps   []string
	}{{"allow", r.Allow}, {"deny", r.Deny}, {"ask", r.Ask}} {
		if len(l.ps) > MaxPatterns {
			return fmt.Errorf("%w: process.%s has %d patterns, more than %d; merge some with *", ErrInvalidRules, l.name, len(l.ps), MaxPatterns)
		}
		for i, p := range l.ps {
			if err := checkPattern(p); err != nil {
				return fmt.Errorf("%w: process.%s[%d]: %w", ErrInvalidRules, l.name, i, err)
			}
		}
	}
	switch r.Enforce {
	case "":
		return nil
	case EnforceExec:
	default:
		return fmt.Errorf("%w: process.enforce %q is unknown; use %q or leave it out", ErrInvalidRules, r.Enforce, EnforceExec)
	}
	if len(r.Allow)+len(r.Ask) == 0 {
		return fmt.Errorf("%w: process.enforce %q needs process.allow or process.ask patterns: their first words are the programs the guest lets start", ErrInvalidRules, EnforceExec)
	}
	for _, l := range []struct {
		name string
		ps   []string
	}{{"allow", r.Allow}, {"ask", r.Ask}} {
		for i, p := range l.ps {
			if err := checkProgram(firstWord(p)); err != nil {
				return fmt.Errorf("%w: process.%s[%d] %q: with enforce %q %w", ErrInvalidRules, l.name, i, p, EnforceExec, err)
			}
		}
	}
	return nil
}

func checkPattern(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("the pattern is empty; remove it")
	case len(p) > MaxPatternBytes:
		return fmt.Errorf("the pattern is %d bytes, more than %d; shorten it (* matches any run)", len(p), MaxPatternBytes)
	case !utf8.ValidString(p):
		return fmt.Errorf("the pattern is not valid UTF-8")
	case p[0] == ' ' || p[len(p)-1] == ' ':
		return fmt.Errorf("%q starts or ends with a space, which a command's pieces never do (they are trimmed); remove it", p)
	}
	for i, c := range p {
		if c < 0x20 || c == 0x7f || c == 0x85 || c == 0x2028 || c == 0x2029 {
			return fmt.Errorf("%q holds a control character or line break (%U at byte %d); a pattern is one line of text", p, c, i)
		}
		if c == ';' || c == '&' || c == '|' || c == '(' || c == ')' || c == '`' {
			return fmt.Errorf("%q holds %q, which splits a command into pieces, so it can never match; write one pattern per piece", p, c)
		}
		if c == '\t' || i > 0 && c == ' ' && p[i-1] == ' ' {
			return fmt.Errorf("%q holds a tab or two spaces in a row; a piece's white space is always one space, so write one", p)
		}
	}
	return nil
}

func firstWord(p string) string {
	w, _, _ := strings.Cut(p, " ")
	return w
}

// checkProgram checks the program a pattern names for the execute list.
func checkProgram(w string) error {
	switch {
	case strings.Contains(w, "*"):
		return fmt.Errorf("the first word %q must name one program literally, without *", w)
	case w == "." || w == "..":
		return fmt.Errorf("the first word %q is not a program", w)
	case strings.HasPrefix(w, "/"):
		if filepath.Clean(w) != w || w == "/" {
			return fmt.Errorf("the first word %q must be a clean absolute path (%s)", w, filepath.Clean(w))
		}
	case strings.Contains(w, "/"):
		return fmt.Errorf("the first word %q is a relative path; name the program (git) or its absolute path (/usr/bin/git)", w)
	}
	return nil
}

// ExecPrograms returns the programs named by the first word of each allow
// and ask pattern, each once, in order: the guest's execute list when
// Enforce is "exec". Check the rules with ValidateProcess first.
func ExecPrograms(r ProcessRules) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range append(append([]string(nil), r.Allow...), r.Ask...) {
		w := firstWord(p)
		if w != "" && !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

// ValidateProcess is the package's ValidateProcess, for callers that hold
// an Engine.
func (e *Engine) ValidateProcess(r ProcessRules) error { return ValidateProcess(r) }

// ExecPrograms is the package's ExecPrograms, for callers that hold an
// Engine.
func (e *Engine) ExecPrograms(r ProcessRules) []string { return ExecPrograms(r) }

func stringArray(ss []string) *ast.Term {
	ts := make([]*ast.Term, len(ss))
	for i, s := range ss {
		ts[i] = ast.StringTerm(s)
	}
	return ast.ArrayTerm(ts...)
}
