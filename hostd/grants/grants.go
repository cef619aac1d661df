// Package grants is the sessions' credential grants: a credential the
// egress proxy adds to a running session's requests to the hosts a grant
// names (inside intercepted TLS only), so the sandbox never holds it.
// Grants live in this daemon's memory only. The Service is the proxy's
// egress.GrantSource; it works through the session core (hostd/session)
// and forgets a session's grants when the core says it stopped.
package grants

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/egress"
	"paddock.dev/paddock/egress/rules"
	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/policy"
)

// Limits on credential grants.
const (
	MaxGrantsPerSession    = apiv1.MaxGrantsPerSession
	MaxGrantHosts          = apiv1.MaxGrantHosts
	MaxGrantValueBytes     = apiv1.MaxGrantValueBytes
	MaxGrantTTLSeconds     = apiv1.MaxGrantTTLSeconds
	DefaultGrantTTLSeconds = apiv1.DefaultGrantTTLSeconds
	// SecretEnvPrefix names the daemon's environment variables a
	// secret_ref points at: secret_ref GH_TOKEN is PADDOCK_SECRET_GH_TOKEN.
	SecretEnvPrefix = "PADDOCK_SECRET_"
	// DefaultGrantHeader is the header a grant sets when it names none.
	DefaultGrantHeader = apiv1.DefaultGrantHeader
)

var secretRefRE = regexp.MustCompile(`^[A-Z0-9_]{1,64}$`)

// refusedGrantHeaders may never carry a grant: the proxy owns Host and the
// hop-by-hop headers, and Cookie would mix the credential into state the
// sandbox's own requests set.
var refusedGrantHeaders = []string{"Host", "Cookie", "Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length"}

// The public wire types (package api), kept under these names here.
type (
	GrantRequest = apiv1.GrantRequest
	Grant        = apiv1.Grant
)

func grantView(g egress.Grant) Grant {
	return Grant{ID: g.ID, SecretRef: g.SecretRef, Hosts: slices.Clone(g.Hosts), Methods: slices.Clone(g.Methods),
		Paths: slices.Clone(g.Paths), Header: g.Header, ExpiresAt: g.ExpiresAt}
}

// Service holds every session's grants, in memory only: a secret never
// reaches the database or the ledger, so a daemon restart forgets them.
type Service struct {
	m      *session.Manager
	policy session.Decider
	log    *slog.Logger
	now    func() time.Time

	t grantTable
}

// New returns the grants of m's sessions, and has m tell it when a
// session stops running (its grants are then revoked).
func New(m *session.Manager) *Service {
	g := &Service{m: m, policy: m.Policy(), log: m.Logger(), now: m.Now}
	m.OnStop(g.stopped)
	return g
}

type grantTable struct {
	mu sync.RWMutex
	by map[string][]egress.Grant // session id → grants, oldest first
}

var (
	bad          = session.BadRequest
	ErrConflict  = session.ErrConflict
	ErrNotFound  = session.ErrNotFound
	ErrForbidden = session.ErrForbidden
)

// The codes of a refused caller.
const (
	CodeSecretRefAdminOnly      = session.CodeSecretRefAdminOnly
	CodeGrantNeedsAdminOrTenant = session.CodeGrantNeedsAdminOrTenant
)

// live returns id's grants that are live at now.
func (t *grantTable) live(id string, now time.Time) []egress.Grant {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var out []egress.Grant
	for _, g := range t.by[id] {
		if now.Before(g.ExpiresAt) {
			out = append(out, g)
		}
	}
	return out
}

// take removes and returns id's grants (all of them when grant is "").
func (t *grantTable) take(id, grant string) []egress.Grant {
	t.mu.Lock()
	defer t.mu.Unlock()
	if grant == "" {
		out := t.by[id]
		delete(t.by, id)
		return out
	}
	gs := t.by[id]
	i := slices.IndexFunc(gs, func(g egress.Grant) bool { return g.ID == grant })
	if i < 0 {
		return nil
	}
	out := []egress.Grant{gs[i]}
	gs = slices.Delete(slices.Clone(gs), i, i+1)
	if len(gs) == 0 {
		delete(t.by, id)
	} else {
		t.by[id] = gs
	}
	return out
}

// GrantsFor returns the live credential grants of sandbox (a session id),
// for the egress proxy; it is called on every intercepted request, so it
// only reads memory.
func (m *Service) GrantsFor(sandbox string) []egress.Grant {
	return m.t.live(sandbox, m.now())
}

// grantJudge is the part of the policy engine that decides whether a
// grant covers a request (the http Rego module).
type grantJudge interface {
	GrantApplies(ctx context.Context, in policy.GrantInput) (bool, string, error)
}

// GrantApplies decides, for the egress proxy, whether grant g of sandbox
// covers request r inside intercepted TLS: through the policy engine when
// it has the http module, else by the grant's own methods and paths (as
// the proxy alone would). With GrantsFor it makes the Manager the proxy's
// egress.GrantSource.
func (m *Service) GrantApplies(sandbox string, g egress.Grant, r egress.Request) bool {
	if j, ok := m.policy.(grantJudge); ok && m.policy != nil {
		ok, _, err := j.GrantApplies(context.Background(), policy.GrantInput{Session: sandbox, Grant: g.ID,
			Hosts: g.Hosts, Methods: g.Methods, Paths: g.Paths,
			Scheme: r.Scheme, Host: r.Host, Port: r.Port, Method: r.Method, Path: r.Path})
		if err != nil {
			m.log.Warn("policy: a grant matches nothing", "sandbox", sandbox, "grant", g.ID, "err", err)
		}
		return ok && err == nil
	}
	lim, err := rules.NewLimits(g.Methods, g.Paths)
	if err != nil {
		m.log.Warn("egress: a grant's limits are invalid; it matches nothing", "sandbox", sandbox, "grant", g.ID, "err", err)
		return false
	}
	return lim.Allows(r.Method, r.Path)
}

var _ egress.GrantSource = (*Service)(nil)

func newGrantID() string {
	var b [8]byte
	rand.Read(b[:])
	return "gr-" + hex.EncodeToString(b[:])
}

// checkGrant validates req and returns the grant it asks for, without an
// id or expiry, and with its secret read.
func checkGrant(req GrantRequest) (egress.Grant, error) {
	g := egress.Grant{SecretRef: req.SecretRef}
	switch {
	case req.Value != "" && req.SecretRef != "":
		return g, bad("give value or secret_ref, not both")
	case req.Value == "" && req.SecretRef == "":
		return g, bad("give the credential as value or name it with secret_ref")
	}
	if len(req.Hosts) < 1 || len(req.Hosts) > MaxGrantHosts {
		return g, bad("hosts: give 1 to %d host patterns (api.example.com or *.example.com), not %d", MaxGrantHosts, len(req.Hosts))
	}
	for i, h := range req.Hosts {
		c, err := rules.CanonicalHostPattern(h)
		if err != nil {
			return g, bad("hosts[%d]: %v", i, err)
		}
		if !slices.Contains(g.Hosts, c) {
			g.Hosts = append(g.Hosts, c)
		}
	}
	lim, err := rules.NewLimits(req.Methods, req.Paths)
	if err != nil {
		return g, bad("%v", err)
	}
	g.Methods, g.Paths = lim.MethodList(), lim.PathList()
	g.Header = DefaultGrantHeader
	if req.Header != "" {
		if !httpguts.ValidHeaderFieldName(req.Header) {
			return g, bad("header %q is not a valid header name", req.Header)
		}
		g.Header = http.CanonicalHeaderKey(req.Header)
		if slices.Contains(refusedGrantHeaders, g.Header) {
			return g, bad("header %s cannot carry a credential (Host, Cookie and hop-by-hop headers are refused)", g.Header)
		}
	}
	if req.Value != "" {
		if len(req.Value) > MaxGrantValueBytes {
			return g, bad("value is %d bytes, more than %d", len(req.Value), MaxGrantValueBytes)
		}
		if !httpguts.ValidHeaderFieldValue(req.Value) {
			return g, bad("value is not a valid header value (control characters such as a newline are refused)")
		}
		g.Value = req.Value
		return g, nil
	}
	if !secretRefRE.MatchString(req.SecretRef) {
		return g, bad("secret_ref %q: use upper-case letters, digits and '_', at most 64", req.SecretRef)
	}
	name := SecretEnvPrefix + req.SecretRef
	v := os.Getenv(name)
	switch {
	case v == "":
		return g, bad("secret_ref %s: the daemon has no environment variable %s (set it where paddock serve runs, and restart it)", req.SecretRef, name)
	case len(v) > MaxGrantValueBytes:
		return g, bad("secret_ref %s: %s is more than %d bytes", req.SecretRef, name, MaxGrantValueBytes)
	case !httpguts.ValidHeaderFieldValue(v):
		return g, bad("secret_ref %s: %s is not a valid header value (it has control characters such as a newline)", req.SecretRef, name)
	}
	g.Value = v
	return g, nil
}

// Grant gives a running session a credential the egress proxy adds to its
// requests to the named hosts (inside intercepted TLS only), so the
// sandbox never holds it. The grant lives in this daemon's memory only.
func (m *Service) Grant(ctx context.Context, tenant, id string, req GrantRequest) (*Grant, error) {
	if err := grantCaller(ctx, req.SecretRef != ""); err != nil {
		return nil, err
	}
	if req.TTLSeconds == 0 {
		req.TTLSeconds = DefaultGrantTTLSeconds
	}
	if req.TTLSeconds < 1 || req.TTLSeconds > MaxGrantTTLSeconds {
		return nil, bad("ttl_seconds %d must be from 1 to %d", req.TTLSeconds, MaxGrantTTLSeconds)
	}
	g, err := checkGrant(req)
	if err != nil {
		return nil, err
	}
	s, _, err := m.m.Running(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if s.Kind == session.KindSandbox {
		return nil, session.NotSession(id)
	}
	now := m.now()
	g.ID = newGrantID()
	g.ExpiresAt = now.Add(time.Duration(req.TTLSeconds) * time.Second).UTC()
	if g.ExpiresAt.After(s.ExpiresAt) {
		g.ExpiresAt = s.ExpiresAt.UTC()
	}
	t := &m.t
	t.mu.Lock()
	gs := slices.DeleteFunc(slices.Clone(t.by[id]), func(o egress.Grant) bool { return !now.Before(o.ExpiresAt) })
	if len(gs) >= MaxGrantsPerSession {
		t.mu.Unlock()
		return nil, fmt.Errorf("%w: session %s already has %d live grants; revoke one first", ErrConflict, id, MaxGrantsPerSession)
	}
	if m.m.Machine(id) == nil {
		t.mu.Unlock()
		return nil, fmt.Errorf("%w: session %s has no running sandbox any more", ErrConflict, id)
	}
	if t.by == nil {
		t.by = map[string][]egress.Grant{}
	}
	t.by[id] = append(gs, g)
	t.mu.Unlock()
	v := grantView(g)
	data := grantLedger(g)
	data["header"], data["expires_at"] = v.Header, v.ExpiresAt
	if len(v.Methods) > 0 {
		data["methods"] = v.Methods
	}
	if len(v.Paths) > 0 {
		data["paths"] = v.Paths
	}
	m.m.LedgerAppend(ctx, id, "grant.create", data)
	return &v, nil
}

// Grants lists a session's live grants, without their values.
func (m *Service) Grants(ctx context.Context, tenant, id string) ([]Grant, error) {
	if err := grantCaller(ctx, false); err != nil {
		return nil, err
	}
	if _, err := m.m.LoadSession(ctx, tenant, id); err != nil {
		return nil, err
	}
	out := []Grant{}
	for _, g := range m.GrantsFor(id) {
		out = append(out, grantView(g))
	}
	return out, nil
}

// Ungrant revokes one grant of the session (404 when it has no such live
// grant), or all of them when grant is "".
func (m *Service) Ungrant(ctx context.Context, tenant, id, grant string) error {
	if err := grantCaller(ctx, false); err != nil {
		return err
	}
	if _, err := m.m.LoadSession(ctx, tenant, id); err != nil {
		return err
	}
	gone := m.t.take(id, grant)
	now := m.now()
	if grant != "" && (len(gone) == 0 || !now.Before(gone[0].ExpiresAt)) {
		return fmt.Errorf("%w: session %s has no live grant %s", ErrNotFound, id, grant)
	}
	m.ledgerRevoke(ctx, id, gone, "revoked")
	return nil
}

// grantCaller checks who asks for a grant, before anything else is
// looked at (so a refused caller learns nothing about the session or the
// daemon's environment). The daemon's PADDOCK_SECRET_ variables are the
// operator's: only the admin token may aim one at a host (secretRef), or
// a tenant could send the operator's credential to a host it controls.
// A tenant grants values it supplies itself, on its own sessions (load
// scopes those). A session token never reaches a grant: the route table
// keeps it out, and this holds even if that table changes. A call with no
// caller at all is refused like a session token's.
func grantCaller(ctx context.Context, secretRef bool) error {
	id, ok := auth.FromContext(ctx)
	if !ok || (id.Kind != auth.KindAdmin && id.Kind != auth.KindTenant) {
		return &session.CodedError{Code: CodeGrantNeedsAdminOrTenant, Err: fmt.Errorf(
			"%w: credential grants need the admin token or the session's tenant's token; a session token cannot make, list or revoke them", ErrForbidden)}
	}
	if secretRef && id.Kind != auth.KindAdmin {
		return &session.CodedError{Code: CodeSecretRefAdminOnly, Err: fmt.Errorf(
			"%w: secret_ref names one of the daemon's own secrets (PADDOCK_SECRET_<REF>), which only the admin token may grant; "+
				"send the credential itself as value instead (it is used for this session's requests only), or ask the operator to grant the secret", ErrForbidden)}
	}
	return nil
}

// stopped forgets a session's grants when it stops running (deleted,
// expired, lost), ledgering each live one as revoked with why; at the
// daemon's shutdown they are forgotten without a record (they did not
// end: the daemon did).
func (m *Service) stopped(ctx context.Context, id string, why session.StopReason) {
	gone := m.t.take(id, "")
	if why == session.StopShutdown {
		return
	}
	m.ledgerRevoke(context.Background(), id, gone, why.String())
}

func (m *Service) ledgerRevoke(ctx context.Context, id string, gs []egress.Grant, why string) {
	now := m.now()
	for _, g := range gs {
		if !now.Before(g.ExpiresAt) {
			continue // expired on its own: nothing was revoked
		}
		data := grantLedger(g)
		data["reason"] = why
		m.m.LedgerAppend(ctx, id, "grant.revoke", data)
	}
}

// grantLedger is what the ledger keeps of a grant: its id, hosts and the
// secret's reference, never the value. The ledger refuses keys that name
// a secret (secret_ref among them), so the reference goes in as "ref".
func grantLedger(g egress.Grant) map[string]any {
	data := map[string]any{"id": g.ID, "hosts": g.Hosts}
	if g.SecretRef != "" {
		data["ref"] = g.SecretRef
	}
	return data
}
