package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/open-policy-agent/opa/v1/ast"

	"paddock.dev/paddock/egress"
	"paddock.dev/paddock/egress/rules"
)

// Network returns an egress.Policy for a session's compiled network policy
// that decides with http.rego, and with the operator's http rules:
//
//   - With no operator http rules, every answer (AllowsName, and Allow,
//     Inspect and Rule of Tunnel and Decide) is the one c gives; a test
//     holds the two to that.
//   - An operator's http.deny turns an answer into a refusal, for names
//     (action "name"), tunnels ("tunnel") and requests ("request"), and
//     its http.inspect marks an allowed tunnel for inspection, so that its
//     method and path rules see the requests inside HTTPS.
//
// The policy is converted once here; each decision reads the modules in
// force at that moment, so a reload applies to sessions already running.
// An evaluation error denies (and is logged).
func (e *Engine) Network(session string, c *rules.Compiled) egress.Policy {
	obj := ast.NewObject()
	if b, err := json.Marshal(c.Data()); err == nil {
		if v, err := ast.ValueFromReader(bytes.NewReader(b)); err == nil {
			if o, ok := v.(ast.Object); ok {
				obj = o
			}
		}
	}
	return &network{e: e, id: session, session: ast.StringTerm(session), data: obj}
}

type network struct {
	e       *Engine
	id      string
	session *ast.Term
	data    ast.Object // rules.Data

	policy atomic.Pointer[policyTerm]
	cache  decisionCache
}

// decisionCache keeps a session's recent network decisions, each made by
// the modules in force then: the same question (action, host, port,
// scheme, method, path) under the same loaded set of modules gets the
// answer OPA gave, without asking again (a decision costs about a hundred
// microseconds; a proxied request should not). A reload changes the
// revision, which no cached answer matches. At most maxCachedDecisions
// answers; when full it starts over.
type decisionCache struct {
	mu sync.Mutex
	m  map[decisionKey]cachedDecision
}

const maxCachedDecisions = 4096

type decisionKey struct {
	revision             int
	action               string
	host, scheme, method string
	path                 string
	port                 int
}

type cachedDecision struct {
	name bool
	d    egress.Decision
}

func (c *decisionCache) get(k decisionKey) (cachedDecision, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

func (c *decisionCache) put(k decisionKey, v cachedDecision) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCachedDecisions {
		c.m = make(map[decisionKey]cachedDecision, 64)
	}
	c.m[k] = v
}

func keyOf(l *loaded, action *ast.Term, r egress.Request) decisionKey {
	a, _ := action.Value.(ast.String)
	return decisionKey{revision: l.revision, action: string(a), host: r.Host, scheme: r.Scheme, method: r.Method, path: r.Path, port: r.Port}
}

// policyTerm is the session's policy as input for one loaded set of
// modules: rules.Data with what http.rego's "compiled" rule makes of it
// (one regular expression per entry's paths), computed once per session
// and set instead of on every decision.
type policyTerm struct {
	revision int
	term     *ast.Term
}

func (n *network) policyFor(l *loaded) *ast.Term {
	if p := n.policy.Load(); p != nil && p.revision == l.revision {
		return p.term
	}
	obj := n.data.Copy()
	d, _, err := l.httpCompiled.eval(context.Background(), ast.NewObject(ast.Item(kPolicy, ast.NewTerm(n.data))))
	if err == nil {
		if v, err := ast.InterfaceToValue(d["value"]); err == nil {
			obj.Insert(kCompiled, ast.NewTerm(v))
		}
	} else {
		// Without it the module compiles the paths on every decision:
		// slower, same answers.
		n.e.log.Warn("policy: compiling a network policy failed", "session", n.id, "err", err)
	}
	p := &policyTerm{revision: l.revision, term: ast.NewTerm(obj)}
	n.policy.Store(p)
	return p.term
}

var (
	kAction  = ast.StringTerm("action")
	kPolicy  = ast.StringTerm("policy")
	kRequest = ast.StringTerm("request")
	kHost    = ast.StringTerm("host")
	kPort    = ast.StringTerm("port")
	kScheme  = ast.StringTerm("scheme")
	kMethod  = ast.StringTerm("method")
	kPath    = ast.StringTerm("path")
	kGrant   = ast.StringTerm("grant")
	kID      = ast.StringTerm("id")
	kHosts   = ast.StringTerm("hosts")
	kMethods = ast.StringTerm("methods")
	kPaths   = ast.StringTerm("paths")

	actionName    = ast.StringTerm("name")
	actionTunnel  = ast.StringTerm("tunnel")
	actionRequest = ast.StringTerm("request")
	actionGrant   = ast.StringTerm("grant")
)

func (n *network) input(l *loaded, action *ast.Term, r egress.Request) ast.Value {
	return ast.NewObject(
		ast.Item(kAction, action),
		ast.Item(kSession, n.session),
		ast.Item(kPolicy, n.policyFor(l)),
		ast.Item(kRequest, ast.NewTerm(ast.NewObject(
			ast.Item(kHost, ast.StringTerm(r.Host)),
			ast.Item(kPort, ast.IntNumberTerm(r.Port)),
			ast.Item(kScheme, ast.StringTerm(r.Scheme)),
			ast.Item(kMethod, ast.StringTerm(r.Method)),
			ast.Item(kPath, ast.StringTerm(r.Path)),
		))),
	)
}

// AllowsName reports whether some request to host could be allowed.
func (n *network) AllowsName(host string) bool {
	l := n.e.cur.Load()
	r := egress.Request{Sandbox: n.id, Host: host}
	k := keyOf(l, actionName, r)
	if v, ok := n.cache.get(k); ok {
		return v.name
	}
	d, hits, err := l.name.eval(context.Background(), n.input(l, actionName, r))
	if err != nil {
		n.e.log.Warn("policy: name decision failed; refused", "session", n.id, "host", host, "err", err)
		return false // not kept: an error is not an answer
	}
	allow := boolean(d, "value")
	if _, ok := firstHit(hits, "deny"); ok {
		allow = false
	}
	n.cache.put(k, cachedDecision{name: allow})
	return allow
}

// Tunnel decides whether a connection to host:port may start.
func (n *network) Tunnel(host string, port int) egress.Decision {
	return n.decide(actionTunnel, egress.Request{Sandbox: n.id, Host: host, Port: port})
}

// Decide judges one HTTP request.
func (n *network) Decide(r egress.Request) egress.Decision {
	return n.decide(actionRequest, r)
}

func (n *network) decide(action *ast.Term, r egress.Request) egress.Decision {
	l := n.e.cur.Load()
	k := keyOf(l, action, r)
	if v, ok := n.cache.get(k); ok {
		return v.d
	}
	d, ok := n.evalDecision(l, action, r)
	if ok {
		n.cache.put(k, cachedDecision{d: d})
	}
	return d
}

// evalDecision asks OPA; ok is false when it could not decide.
func (n *network) evalDecision(l *loaded, action *ast.Term, r egress.Request) (egress.Decision, bool) {
	q := l.tunnel
	if action == actionRequest {
		q = l.request
	}
	d, hits, err := q.eval(context.Background(), n.input(l, action, r))
	if err != nil {
		n.e.log.Warn("policy: network decision failed; refused", "session", n.id, "host", r.Host, "err", err)
		return egress.Decision{Rule: RuleError, Reason: "the policy could not decide (" + err.Error() + "), so the connection was refused"}, false
	}
	out := egress.Decision{
		Allow:   boolean(d, "allow"),
		Rule:    str(d, "rule"),
		Reason:  str(d, "reason"),
		Inspect: boolean(d, "inspect"),
	}
	for _, h := range hits {
		if h.rule.kind == "inspect" && h.inspect {
			out.Inspect = true
		}
	}
	if h, ok := firstHit(hits, "deny"); ok {
		return egress.Decision{Rule: h.rule.name, Reason: h.reasons[0], Inspect: out.Inspect}, true
	}
	return out, true
}

// GrantApplies reports whether a credential grant applies to one request
// inside intercepted TLS, and the rule that said so ("grant.applies", or
// the one that refused: "grant.scheme", "grant.port", "grant.host",
// "grant.path_not_canonical", "grant.method", "grant.path", or an
// operator's "ext.<name>.grant"). The grant's hosts, methods and paths
// are checked as the proxy checks them (rules.CanonicalHostPattern,
// rules.NewLimits); a grant that fails those applies to nothing and the
// error (wrapping ErrInvalidInput) says why.
func (e *Engine) GrantApplies(ctx context.Context, in GrantInput) (bool, string, error) {
	if len(in.Hosts) == 0 || len(in.Hosts) > MaxGrantHosts {
		return false, RuleError, fmt.Errorf("%w: a grant names 1 to %d hosts, not %d", ErrInvalidInput, MaxGrantHosts, len(in.Hosts))
	}
	for i, h := range in.Hosts {
		if _, err := rules.CanonicalHostPattern(h); err != nil {
			return false, RuleError, fmt.Errorf("%w: grant %s hosts[%d]: %w", ErrInvalidInput, in.Grant, i, err)
		}
	}
	lim, err := rules.NewLimits(in.Methods, in.Paths)
	if err != nil {
		return false, RuleError, fmt.Errorf("%w: grant %s: %w", ErrInvalidInput, in.Grant, err)
	}
	hosts := make([]*ast.Term, len(in.Hosts))
	for i, h := range in.Hosts {
		hosts[i] = ast.StringTerm(h)
	}
	input := ast.NewObject(
		ast.Item(kAction, actionGrant),
		ast.Item(kSession, ast.StringTerm(in.Session)),
		ast.Item(kGrant, ast.NewTerm(ast.NewObject(
			ast.Item(kID, ast.StringTerm(in.Grant)),
			ast.Item(kHosts, ast.ArrayTerm(hosts...)),
			ast.Item(kMethods, stringArray(lim.MethodList())),
			ast.Item(kPaths, stringArray(lim.PathList())),
		))),
		ast.Item(kRequest, ast.NewTerm(ast.NewObject(
			ast.Item(kHost, ast.StringTerm(in.Host)),
			ast.Item(kPort, ast.IntNumberTerm(in.Port)),
			ast.Item(kScheme, ast.StringTerm(in.Scheme)),
			ast.Item(kMethod, ast.StringTerm(in.Method)),
			ast.Item(kPath, ast.StringTerm(in.Path)),
		))),
	)
	l := e.cur.Load()
	d, hits, err := l.grant.eval(ctx, input)
	if err != nil {
		e.log.Warn("policy: grant decision failed; not applied", "session", in.Session, "grant", in.Grant, "err", err)
		return false, RuleError, err
	}
	if h, ok := firstHit(hits, "deny"); ok {
		return false, h.rule.name, nil
	}
	return boolean(d, "applies"), str(d, "rule"), nil
}
