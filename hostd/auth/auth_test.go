package auth_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"paddock.dev/paddock/hostd/auth"
)

// fakeTokens is an in-memory SessionTokens.
type fakeTokens map[string]auth.SessionTokenRecord

func (f fakeTokens) SessionToken(_ context.Context, id string) (auth.SessionTokenRecord, bool, error) {
	r, ok := f[id]
	return r, ok, nil
}

// flipLast changes a token's last hex digit.
func flipLast(tok string) string {
	last := "0"
	if strings.HasSuffix(tok, "0") {
		last = "1"
	}
	return tok[:len(tok)-1] + last
}

func tenantsFor(t *testing.T, tokens map[string]string) *auth.Tenants {
	t.Helper()
	var tf auth.TenantsFile
	for name, tok := range tokens {
		h := auth.HashToken(tok)
		tf.Tenants = append(tf.Tenants, auth.TenantEntry{Name: name, TokenSHA256: hex.EncodeToString(h[:])})
	}
	ts, err := tf.Check()
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// TestVerify: each kind of token becomes its identity; wrong, revoked and
// expired ones are ErrUnauthenticated, with the reason only for a caller
// who holds the real token.
func TestVerify(t *testing.T) {
	const admin = "admin-token-0123456789"
	sid, stok, shash := auth.NewSessionToken()
	rid, rtok, rhash := auth.NewSessionToken()
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	src := fakeTokens{
		sid: {ID: sid, Session: "ses-1", Tenant: "acme", Hash: shash, Ops: []string{"exec"}, ExpiresAt: now.Add(time.Minute)},
		rid: {ID: rid, Session: "ses-1", Hash: rhash, Ops: []string{"exec"}, ExpiresAt: now.Add(time.Minute), Revoked: true},
	}
	v := auth.NewVerifier(auth.HashToken(admin), src)
	v.SetClock(func() time.Time { return now })
	acme, _ := auth.NewTenantToken()
	if err := v.SetTenants(tenantsFor(t, map[string]string{"acme": acme, "beta": "beta-token-0123456789"})); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name, token string
		want        auth.Identity
		why         string // "" for success
	}{
		{"admin", admin, auth.Identity{Kind: auth.KindAdmin}, ""},
		{"tenant", acme, auth.Identity{Kind: auth.KindTenant, Tenant: "acme"}, ""},
		{"tenant with any token form", "beta-token-0123456789", auth.Identity{Kind: auth.KindTenant, Tenant: "beta"}, ""},
		{"session", stok, auth.Identity{Kind: auth.KindSession, Tenant: "acme", Session: "ses-1", TokenID: sid, Ops: []string{"exec"}, ExpiresAt: now.Add(time.Minute)}, ""},
		{"session token, wrong secret", flipLast(stok), auth.Identity{}, "required"},
		{"unknown session token id", "pdk_tok-0000000000000000_" + strings.Repeat("a", 64), auth.Identity{}, "required"},
		{"revoked", rtok, auth.Identity{}, "revoked"},
		{"empty", "", auth.Identity{}, "required"},
		{"too long", strings.Repeat("x", auth.MaxTokenBytes+1), auth.Identity{}, "required"},
		{"garbage", "nope", auth.Identity{}, "required"},
	} {
		got, err := v.Verify(ctx, tc.token)
		if tc.why == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			} else if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("%s: identity (-want +got):\n%s", tc.name, d)
			}
			continue
		}
		if !errors.Is(err, auth.ErrUnauthenticated) || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("%s: %v, want ErrUnauthenticated saying %q", tc.name, err, tc.why)
		}
		if err != nil && strings.Contains(err.Error(), tc.token) && tc.token != "" {
			t.Errorf("%s: the error repeats the token", tc.name)
		}
	}
	// Expiry follows the clock, and Recheck sees it.
	id, err := v.Verify(ctx, stok)
	if err != nil {
		t.Fatal(err)
	}
	// A tenant taken out of the tenants file takes its sessions' tokens
	// with it (at once, for calls under way too); back in, they work.
	if err := v.SetTenants(tenantsFor(t, map[string]string{"beta": "beta-token-0123456789"})); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(ctx, stok); !errors.Is(err, auth.ErrUnauthenticated) || !strings.Contains(err.Error(), "no longer has") {
		t.Errorf("session token of a removed tenant: %v", err)
	}
	if err := v.Recheck(ctx, id); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Errorf("recheck after the tenant went: %v", err)
	}
	if err := v.SetTenants(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(ctx, stok); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Errorf("session token of a tenant, no tenants at all: %v", err)
	}
	if err := v.SetTenants(tenantsFor(t, map[string]string{"acme": acme, "beta": "beta-token-0123456789"})); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(ctx, stok); err != nil {
		t.Errorf("the tenant back: %v", err)
	}
	now = now.Add(time.Minute)
	if _, err := v.Verify(ctx, stok); !errors.Is(err, auth.ErrUnauthenticated) || !strings.Contains(err.Error(), "expired") {
		t.Errorf("at expiry: %v", err)
	}
	if err := v.Recheck(ctx, id); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Errorf("recheck at expiry: %v", err)
	}
	if err := v.Recheck(ctx, auth.Admin()); err != nil {
		t.Errorf("recheck of the admin: %v", err)
	}
	// A tenant holding the admin's token is refused and the old set stays.
	if err := v.SetTenants(tenantsFor(t, map[string]string{"evil": admin})); err == nil {
		t.Error("a tenant with the admin token's hash was accepted")
	}
	if got, _ := v.Verify(ctx, acme); got.Tenant != "acme" {
		t.Errorf("after a refused SetTenants: %+v", got)
	}
	// Without a source, session tokens are unknown.
	if _, err := auth.NewVerifier(auth.HashToken(admin), nil).Verify(ctx, stok); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Errorf("no source: %v", err)
	}
}

func TestTokenFormats(t *testing.T) {
	id, tok, h := auth.NewSessionToken()
	if !auth.IsTokenID(id) || !strings.HasPrefix(tok, "pdk_"+id+"_") || len(tok) != len("pdk_")+len(id)+1+64 {
		t.Errorf("session token %q id %q", tok, id)
	}
	if h != auth.HashToken(tok) {
		t.Error("hash is not SHA-256 of the token")
	}
	if got, ok := auth.SessionTokenID(tok); !ok || got != id {
		t.Errorf("SessionTokenID: %q %v", got, ok)
	}
	_, tok2, _ := auth.NewSessionToken()
	if tok2 == tok {
		t.Error("two tokens alike")
	}
	for _, s := range []string{"", "pdk_tok-0123", "pdk_tok-0123456789abcdef_" + strings.Repeat("A", 64), "pdk_" + strings.Repeat("a", 48), "xpdk_tok-0123456789abcdef_" + strings.Repeat("a", 64)} {
		if _, ok := auth.SessionTokenID(s); ok {
			t.Errorf("SessionTokenID(%q) accepted", s)
		}
	}
	tt, sum := auth.NewTenantToken()
	h2 := auth.HashToken(tt)
	if !strings.HasPrefix(tt, "pdk_tn_") || sum != hex.EncodeToString(h2[:]) {
		t.Errorf("tenant token %q sum %q", tt, sum)
	}
}

// TestPermit is the decision table of Identity.Permit.
func TestPermit(t *testing.T) {
	admin := auth.Admin()
	tenant := auth.Identity{Kind: auth.KindTenant, Tenant: "acme"}
	tok := auth.Identity{Kind: auth.KindSession, Tenant: "acme", Session: "ses-1", TokenID: "tok-1", Ops: []string{auth.OpExec, auth.OpFilesRead}}
	for _, tc := range []struct {
		who     auth.Identity
		access  auth.Access
		session string
		want    string // "" allowed, else a piece of the refusal
	}{
		{admin, auth.AccessAdmin, "", ""},
		{tenant, auth.AccessAdmin, "", "only the admin"},
		{tok, auth.AccessAdmin, "", "only the admin"},
		{admin, auth.AccessTenant, "ses-1", ""},
		{tenant, auth.AccessTenant, "ses-9", ""},
		{tok, auth.AccessTenant, "ses-1", "a session token cannot"},
		{tok, auth.AccessAny, "", ""},
		{tok, auth.AccessPublic, "", ""},
		{admin, auth.OpGit, "ses-9", ""},
		{tenant, auth.OpGit, "ses-9", ""},
		{tok, auth.OpExec, "ses-1", ""},
		{tok, auth.OpFilesRead, "ses-1", ""},
		{tok, auth.OpExec, "ses-2", "works only on /v1/agents/sessions/ses-1"},
		{tok, auth.OpExec, "", "works only on"},
		{tok, auth.OpFilesWrite, "ses-1", "not granted files.write"},
		{tok, auth.Access("bogus"), "ses-1", "no access rule"},
		{auth.Identity{}, auth.OpExec, "ses-1", "unknown caller"},
	} {
		err := tc.who.Permit(tc.access, tc.session)
		name := fmt.Sprintf("%s %s on %q", tc.who.Actor(), tc.access, tc.session)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		if !errors.Is(err, auth.ErrForbidden) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a refusal saying %q", name, err, tc.want)
		}
	}
}

func TestActorAndContext(t *testing.T) {
	for _, tc := range []struct {
		id   auth.Identity
		want string
	}{
		{auth.Admin(), "admin"},
		{auth.Identity{Kind: auth.KindTenant, Tenant: "acme"}, "tenant:acme"},
		{auth.Identity{Kind: auth.KindSession, TokenID: "tok-0123456789abcdef"}, "session-token:tok-0123456789abcdef"},
	} {
		if got := tc.id.Actor(); got != tc.want {
			t.Errorf("Actor %+v: %q, want %q", tc.id, got, tc.want)
		}
		ctx := auth.WithIdentity(context.Background(), tc.id)
		if got := auth.ActorOf(ctx); got != tc.want {
			t.Errorf("ActorOf: %q, want %q", got, tc.want)
		}
		if got := auth.ActorOf(auth.WithoutIdentity(ctx)); got != auth.ActorDaemon {
			t.Errorf("WithoutIdentity: %q", got)
		}
	}
	if got := auth.ActorOf(context.Background()); got != auth.ActorDaemon {
		t.Errorf("no identity: %q", got)
	}
	// whoami has no secret and omits what a kind lacks.
	b, _ := json.Marshal(auth.Identity{Kind: auth.KindTenant, Tenant: "acme"}.WhoAmI())
	if string(b) != `{"kind":"tenant","tenant":"acme"}` {
		t.Errorf("tenant whoami %s", b)
	}
}

func TestNormalizeOps(t *testing.T) {
	got, err := auth.NormalizeOps([]string{"git", "exec", "git", "preview"})
	if err != nil || strings.Join(got, ",") != "exec,git,preview" {
		t.Errorf("normalize: %v %v", got, err)
	}
	if _, err := auth.NormalizeOps(nil); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty ops: %v", err)
	}
	if _, err := auth.NormalizeOps([]string{"exec", "delete"}); err == nil || !strings.Contains(err.Error(), `"delete"`) {
		t.Errorf("unknown op: %v", err)
	}
}

// TestTenantsFile: the file is parsed strictly and refused, with a message
// naming the problem, when it is unsafe or wrong.
func TestTenantsFile(t *testing.T) {
	dir := t.TempDir()
	hash := strings.Repeat("ab", 32)
	write := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.json", `{"tenants":[{"name":"acme","token_sha256":"`+hash+`"},{"name":"b-2","token_sha256":"`+strings.Repeat("cd", 32)+`"}]}`, 0o600)
	ts, err := auth.LoadTenants(good)
	if err != nil || strings.Join(ts.Names(), ",") != "acme,b-2" {
		t.Fatalf("good file: %v %v", ts.Names(), err)
	}
	if ts, err := auth.LoadTenants(write("empty.json", `{"tenants":[]}`, 0o640)); err != nil || ts.Len() != 0 {
		t.Errorf("empty list, mode 0640: %v", err)
	}
	many := auth.TenantsFile{}
	for i := range auth.MaxTenants + 1 {
		many.Tenants = append(many.Tenants, auth.TenantEntry{Name: fmt.Sprintf("t%d", i), TokenSHA256: fmt.Sprintf("%064x", i)})
	}
	manyJSON, _ := json.Marshal(many)
	for _, tc := range []struct {
		name, body string
		mode       os.FileMode
		want       string
	}{
		{"group-writable", `{"tenants":[]}`, 0o620, "writable by its group or others (mode 0620)"},
		{"world-writable", `{"tenants":[]}`, 0o602, "writable by its group or others"},
		{"not json", `{"tenants":`, 0o600, "not valid JSON"},
		{"unknown field", `{"tenants":[],"admins":[]}`, 0o600, `unknown field "admins"`},
		{"entry field", `{"tenants":[{"name":"a","token":"x"}]}`, 0o600, `unknown field "token"`},
		{"trailing", `{"tenants":[]} {}`, 0o600, "trailing data"},
		{"upper-case name", `{"tenants":[{"name":"Acme","token_sha256":"` + hash + `"}]}`, 0o600, `tenants[0]: name "Acme"`},
		{"long name", `{"tenants":[{"name":"` + strings.Repeat("a", 64) + `","token_sha256":"` + hash + `"}]}`, 0o600, "1 to 63"},
		{"empty name", `{"tenants":[{"name":"","token_sha256":"` + hash + `"}]}`, 0o600, `name ""`},
		{"short hash", `{"tenants":[{"name":"a","token_sha256":"abcd"}]}`, 0o600, "64 lowercase hex"},
		{"upper hash", `{"tenants":[{"name":"a","token_sha256":"` + strings.ToUpper(hash) + `"}]}`, 0o600, "64 lowercase hex"},
		{"duplicate name", `{"tenants":[{"name":"a","token_sha256":"` + hash + `"},{"name":"a","token_sha256":"` + strings.Repeat("cd", 32) + `"}]}`, 0o600, `tenants[1]: name "a" appears twice`},
		{"duplicate hash", `{"tenants":[{"name":"a","token_sha256":"` + hash + `"},{"name":"b","token_sha256":"` + hash + `"}]}`, 0o600, "the same token_sha256 as a"},
		{"too many", string(manyJSON), 0o600, "1001 tenants, at most 1000"},
	} {
		p := write(strings.ReplaceAll(tc.name, " ", "-")+".json", tc.body, tc.mode)
		_, err := auth.LoadTenants(p)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v, want an error naming %s and saying %q", tc.name, err, p, tc.want)
		}
	}
	if _, err := auth.LoadTenants(filepath.Join(dir, "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := auth.LoadTenants(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a directory: %v", err)
	}
	// Written files are 0600, whole, and read back the same.
	out := filepath.Join(dir, "out.json")
	tf := auth.TenantsFile{Tenants: []auth.TenantEntry{{Name: "acme", TokenSHA256: hash}}}
	if err := auth.WriteTenantsFile(out, tf); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(out)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("written mode %v %v", fi.Mode(), err)
	}
	back, err := auth.ReadTenantsFile(out)
	if err != nil || cmp.Diff(tf, back) != "" {
		t.Errorf("round trip: %+v %v", back, err)
	}
	if err := auth.WriteTenantsFile(out, auth.TenantsFile{Tenants: []auth.TenantEntry{{Name: "BAD", TokenSHA256: hash}}}); err == nil {
		t.Error("WriteTenantsFile wrote an invalid file")
	}
	if ents, _ := os.ReadDir(dir); len(ents) == 0 {
		t.Error("no files")
	} else {
		for _, e := range ents {
			if strings.Contains(e.Name(), ".tmp-") {
				t.Errorf("temporary file left: %s", e.Name())
			}
		}
	}
}
