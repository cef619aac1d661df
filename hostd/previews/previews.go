// Package previews is the sessions' preview URLs: an expiring URL that
// reaches a port on a running session's sandbox loopback, and the proxy
// that serves them (proxy.go). It is a sibling of the session core
// (hostd/session): it works through the core's surface and drops a
// session's previews when the core says the session stopped.
package previews

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/store"
)

// Limits on preview URLs.
const (
	MaxPreviewsPerSession    = apiv1.MaxPreviewsPerSession
	MaxPreviewTTLSeconds     = apiv1.MaxPreviewTTLSeconds
	DefaultPreviewTTLSeconds = apiv1.DefaultPreviewTTLSeconds
)

// PreviewTokenPrefix starts every preview token; PreviewPathPrefix every
// preview URL's path (PreviewPathPrefix + token + "/").
const (
	PreviewTokenPrefix = apiv1.PreviewTokenPrefix
	PreviewPathPrefix  = apiv1.PreviewPathPrefix
)

// A preview token is "pvw-" and 52 characters of lower-case base32: 256
// random bits that survive a browser lower-casing a host name, and short
// enough (56) to be one DNS label of <token>.preview.<domain>.
var (
	previewTokenRE = regexp.MustCompile(`^pvw-[a-z2-7]{52}$`)
	previewIDRE    = regexp.MustCompile(`^pv-[0-9a-f]{16}$`)
	lowerBase32    = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)
)

// previewReservedPorts are the sandbox's own egress listeners (its HTTP
// proxy, resolver and redirect port, guest/egressfwd): a preview of one
// would hand whoever holds the URL the session's way out, grants
// included, so they are refused.
var previewReservedPorts = func() map[int]string {
	port := func(addr string) int {
		_, p, _ := net.SplitHostPort(addr)
		n, _ := strconv.Atoi(p)
		return n
	}
	return map[int]string{
		port(api.ProxyAddr): "the sandbox's egress proxy",
		port(api.DNSAddr):   "the sandbox's resolver",
		api.RedirectPort:    "the sandbox's egress redirect listener",
	}
}()

// The public wire types (package api), kept under these names here.
type (
	PreviewRequest = apiv1.PreviewRequest
	Preview        = apiv1.Preview
)

func previewView(p store.PreviewRow) Preview {
	return Preview{ID: p.ID, Port: p.Port, CreatedAt: p.CreatedAt.UTC(), ExpiresAt: p.ExpiresAt.UTC()}
}

// Service is the previews of a Manager's sessions: the rows are in the
// store (a token's SHA-256, never the token), the connections open
// through each preview in memory.
type Service struct {
	m     *session.Manager
	st    *store.Store
	log   *slog.Logger
	now   func() time.Time
	conns previewConnTable
}

// New returns the previews of m's sessions, and has m tell it when a
// session stops running (its previews are then deleted).
func New(m *session.Manager) *Service {
	p := &Service{m: m, st: m.Store(), log: m.Logger(), now: m.Now}
	m.OnStop(p.stopped)
	return p
}

var (
	bad           = session.BadRequest
	ErrNotFound   = session.ErrNotFound
	ErrConflict   = session.ErrConflict
	ErrBadGateway = session.ErrBadGateway
)

// IsPreviewToken reports whether s has the shape of a preview token.
func IsPreviewToken(s string) bool { return previewTokenRE.MatchString(s) }

// newPreviewToken returns a new token and its SHA-256.
func newPreviewToken() (string, [32]byte) {
	var b [32]byte
	rand.Read(b[:])
	tok := PreviewTokenPrefix + lowerBase32.EncodeToString(b[:])
	return tok, sha256.Sum256([]byte(tok))
}

func newPreviewID() string {
	var b [8]byte
	rand.Read(b[:])
	return "pv-" + hex.EncodeToString(b[:])
}

// CreatePreview makes an expiring URL that reaches port on the running
// session's sandbox loopback. The answer carries the token once; the
// store keeps its SHA-256, and the ledger the preview's id, port and
// expiry.
func (m *Service) CreatePreview(ctx context.Context, tenant, id string, req PreviewRequest) (*Preview, error) {
	if req.Port < 1 || req.Port > 65535 {
		return nil, bad("port %d must be from 1 to 65535", req.Port)
	}
	if what, ok := previewReservedPorts[req.Port]; ok {
		return nil, bad("port %d is %s, which cannot be previewed", req.Port, what)
	}
	if req.TTLSeconds == 0 {
		req.TTLSeconds = DefaultPreviewTTLSeconds
	}
	if req.TTLSeconds < 1 || req.TTLSeconds > MaxPreviewTTLSeconds {
		return nil, bad("ttl_seconds %d must be from 1 to %d", req.TTLSeconds, MaxPreviewTTLSeconds)
	}
	s, _, err := m.m.Running(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if s.Kind == session.KindSandbox {
		return nil, session.NotSession(id)
	}
	now := m.now().UTC()
	expires := now.Add(time.Duration(req.TTLSeconds) * time.Second)
	if expires.After(s.ExpiresAt) {
		expires = s.ExpiresAt.UTC() // never past the session
	}
	if !expires.After(now) {
		return nil, fmt.Errorf("%w: session %s expires now", ErrConflict, id)
	}
	tok, hash := newPreviewToken()
	row := store.PreviewRow{ID: newPreviewID(), SessionID: id, Hash: hash, Port: req.Port,
		CreatedBy: auth.ActorOf(ctx), CreatedAt: now, ExpiresAt: expires}
	err = m.st.PutPreview(ctx, row, MaxPreviewsPerSession)
	switch {
	case errors.Is(err, store.ErrTooManyPreviews):
		return nil, fmt.Errorf("%w: session %s already has %d live previews; delete one first", ErrConflict, id, MaxPreviewsPerSession)
	case errors.Is(err, store.ErrNotFound):
		return nil, fmt.Errorf("%w: session %s", ErrNotFound, id)
	case err != nil:
		return nil, err
	}
	m.m.LedgerAppend(ctx, id, "preview.create", previewLedger(row))
	out := previewView(row)
	out.Token, out.URL = tok, PreviewPathPrefix+tok+"/"
	return &out, nil
}

// Previews lists a session's live previews: never a token or its URL.
func (m *Service) Previews(ctx context.Context, tenant, id string) ([]Preview, error) {
	if _, err := m.m.LoadSession(ctx, tenant, id); err != nil {
		return nil, err
	}
	rows, err := m.st.ListPreviews(ctx, id, m.now())
	if err != nil {
		return nil, err
	}
	out := make([]Preview, 0, len(rows))
	for _, r := range rows {
		out = append(out, previewView(r))
	}
	return out, nil
}

// DeletePreview revokes one of the session's previews at once: its URL
// answers 404 from now on, and connections open through it are closed.
// preview is the preview's id (pv-…) or its token (pvw-…); a token is
// looked up by its SHA-256 among the session's previews and is never
// repeated in an error. An id or token the session does not have (or no
// longer has) is ErrNotFound.
func (m *Service) DeletePreview(ctx context.Context, tenant, id, preview string) error {
	if _, err := m.m.LoadSession(ctx, tenant, id); err != nil {
		return err
	}
	name := preview // what an error may show
	switch {
	case IsPreviewToken(preview):
		name = "with that token"
		p, err := m.st.PreviewByHash(ctx, sha256.Sum256([]byte(preview)))
		switch {
		case errors.Is(err, store.ErrNotFound) || (err == nil && p.SessionID != id):
			return fmt.Errorf("%w: session %s has no preview %s", ErrNotFound, id, name)
		case err != nil:
			return fmt.Errorf("look up a preview of session %s by token: %w", id, err)
		}
		preview = p.ID
	case strings.HasPrefix(preview, PreviewTokenPrefix):
		return fmt.Errorf("%w: session %s has no preview with that token", ErrNotFound, id)
	case !previewIDRE.MatchString(preview):
		return fmt.Errorf("%w: session %s has no preview %q", ErrNotFound, id, session.ClipText(preview, 40))
	}
	p, err := m.st.DeletePreview(ctx, id, preview)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: session %s has no preview %s", ErrNotFound, id, name)
	}
	if err != nil {
		return err
	}
	m.conns.closeAll(p.ID)
	if p.Live(m.now()) {
		data := previewLedger(p)
		data["reason"] = "revoked"
		m.m.LedgerAppend(ctx, id, "preview.delete", data)
	}
	return nil
}

// stopped removes a session's previews when it stops running (deleted,
// expired, lost), closes what is open through them, and ledgers each live
// one as deleted with why. At the daemon's shutdown they stay: the
// session stays running for the next start to adopt.
func (m *Service) stopped(ctx context.Context, id string, why session.StopReason) {
	if why == session.StopShutdown {
		return
	}
	gone, err := m.st.DeleteSessionPreviews(ctx, id)
	if err != nil {
		m.log.Error("drop session previews", "session", id, "err", err)
		return
	}
	now := m.now()
	for _, p := range gone {
		m.conns.closeAll(p.ID)
		if !p.Live(now) {
			continue // expired on its own: nothing was revoked
		}
		data := previewLedger(p)
		data["reason"] = why.String()
		m.m.LedgerAppend(ctx, id, "preview.delete", data)
	}
}

// previewLedger is what the ledger keeps of a preview: never its token.
func previewLedger(p store.PreviewRow) map[string]any {
	return map[string]any{"id": p.ID, "port": p.Port, "expires_at": p.ExpiresAt.UTC()}
}

// ErrPreviewNotFound is every reason a preview URL does not lead
// anywhere: a malformed, unknown, expired or revoked token, or a session
// that is not running. They are one error on purpose, so the URL's
// answer cannot tell them apart.
var ErrPreviewNotFound = fmt.Errorf("%w: no such preview", ErrNotFound)

// PreviewTarget is where a live preview leads, found by its token.
type PreviewTarget struct {
	ID        string
	Session   string
	Port      int
	ExpiresAt time.Time

	m  *Service
	cl *client.Client
}

// ResolvePreview finds the preview a token names, when it is live and its
// session is running on this daemon; otherwise ErrPreviewNotFound. It
// looks the token up by its SHA-256, so how long it takes does not depend
// on how much of a guess matches a real token. Nothing is ledgered.
func (m *Service) ResolvePreview(ctx context.Context, token string) (*PreviewTarget, error) {
	if !IsPreviewToken(token) {
		return nil, ErrPreviewNotFound
	}
	p, err := m.st.PreviewByHash(ctx, sha256.Sum256([]byte(token)))
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrPreviewNotFound
	}
	if err != nil {
		return nil, err
	}
	now := m.now()
	if !p.Live(now) || p.SessionState != session.StateRunning || !now.Before(p.SessionEnds) {
		return nil, ErrPreviewNotFound
	}
	mc := m.m.Machine(p.SessionID)
	if mc == nil {
		return nil, ErrPreviewNotFound
	}
	return &PreviewTarget{ID: p.ID, Session: p.SessionID, Port: p.Port, ExpiresAt: p.ExpiresAt, m: m, cl: session.Guest(mc)}, nil
}

// Dial opens a connection to the preview's port in its sandbox. The
// connection is closed when the preview expires or is deleted, or its
// session ends, whichever comes first. A refusal from the sandbox
// (nothing listening, too many forwards) is ErrBadGateway.
func (t *PreviewTarget) Dial(ctx context.Context) (net.Conn, error) {
	c, err := t.cl.DialPort(ctx, t.Port)
	if err != nil {
		var ge *client.Error
		if errors.As(err, &ge) {
			return nil, fmt.Errorf("%w: %s", ErrBadGateway, ge.Message)
		}
		return nil, fmt.Errorf("%w: the sandbox's agent did not answer: %v", ErrBadGateway, err)
	}
	return t.m.conns.track(t.ID, c, time.Until(t.ExpiresAt)), nil
}

// previewConnTable holds the connections open through each preview, so
// a delete closes them at once.
type previewConnTable struct {
	mu sync.Mutex
	by map[string]map[*previewConn]struct{} // preview id → open connections
}

// previewConn is a connection through a preview: it closes itself when
// the preview expires.
type previewConn struct {
	net.Conn
	t     *previewConnTable
	id    string
	timer *time.Timer
	once  sync.Once
}

func (c *previewConn) Close() error {
	var err error
	c.once.Do(func() {
		c.t.mu.Lock()
		if c.timer != nil {
			c.timer.Stop()
		}
		delete(c.t.by[c.id], c)
		if len(c.t.by[c.id]) == 0 {
			delete(c.t.by, c.id)
		}
		c.t.mu.Unlock()
		err = c.Conn.Close()
	})
	return err
}

// CloseWrite half-closes when the connection underneath can.
func (c *previewConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.New("preview connection cannot half-close")
}

func (t *previewConnTable) track(id string, c net.Conn, ttl time.Duration) net.Conn {
	pc := &previewConn{Conn: c, t: t, id: id}
	t.mu.Lock()
	if t.by == nil {
		t.by = map[string]map[*previewConn]struct{}{}
	}
	if t.by[id] == nil {
		t.by[id] = map[*previewConn]struct{}{}
	}
	t.by[id][pc] = struct{}{}
	pc.timer = time.AfterFunc(max(ttl, 0), func() { pc.Close() })
	t.mu.Unlock()
	return pc
}

func (t *previewConnTable) closeAll(id string) {
	t.mu.Lock()
	conns := make([]*previewConn, 0, len(t.by[id]))
	for c := range t.by[id] {
		conns = append(conns, c)
	}
	t.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}
