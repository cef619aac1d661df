package egress_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"paddock.dev/paddock/egress/ca"
	"paddock.dev/paddock/egress/rules"
	"paddock.dev/paddock/hostd/daemon/daemontest"
	"paddock.dev/paddock/hostd/grants"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/internal/testutil"
)

// TestGrantFromASandbox is a credential grant used for real: a debian
// sandbox curls an HTTPS upstream that records the Authorization header it
// gets. The proxy adds the grant's value only inside TLS it intercepts,
// only on the grant's paths, never over plain HTTP, and not after the
// grant is revoked; the sandbox never sees the value (not in its
// environment, not in what curl sent or printed), and the ledger has the
// grant without it.
func TestGrantFromASandbox(t *testing.T) {
	onBackends(t, procboxOnly, grantFromASandbox)
}

func grantFromASandbox(t *testing.T, backend string) {
	testutil.RequiresRoot(t)
	ctx := context.Background()
	const secret = "Bearer s3cret"
	upCA, leaf := testCA(t, "api.test")
	var mu sync.Mutex
	var seen []string // "scheme path auth"
	record := func(scheme string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen = append(seen, scheme+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
			mu.Unlock()
			fmt.Fprintf(w, "upstream %s %s\n", scheme, r.URL.Path)
		}
	}
	last := func() string {
		mu.Lock()
		defer mu.Unlock()
		if len(seen) == 0 {
			return ""
		}
		return seen[len(seen)-1]
	}
	tlsSrv := httptest.NewUnstartedServer(record("https"))
	tlsSrv.TLS = &tls.Config{Certificates: []tls.Certificate{leaf}}
	tlsSrv.StartTLS()
	defer tlsSrv.Close()
	plainSrv := httptest.NewServer(record("http"))
	defer plainSrv.Close()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(upCA)
	authority, err := ca.LoadOrCreate(filepath.Join(t.TempDir(), "ca"))
	if err != nil {
		t.Fatal(err)
	}
	tn := newTestNet(t, map[string]string{"api.test.": "10.99.0.40"}, map[string]string{
		"10.99.0.40:443": tlsSrv.Listener.Addr().String(),
		"10.99.0.40:80":  plainSrv.Listener.Addr().String(),
	})
	// The proxy's grants are the manager's (the daemon wires them).
	cfg := tn.egressConfig()
	cfg.CA, cfg.UpstreamRoots = authority, roots
	// The sandbox trusts the daemon's CA (intercepted TLS; the daemon
	// adds it) and the upstream's (TLS relayed untouched before the
	// grant).
	const token = "pdk_grant_test_token_0123"
	d := egressDaemon(t, backend, cfg, upCA, engine(t), daemontest.WithToken(token))
	c := d.Client

	s, err := c.CreateSession(ctx, session.CreateRequest{Policy: &session.PolicyRequest{PolicyInput: rules.PolicyInput{Network: &rules.Network{Default: "deny",
		Allow: []rules.AllowEntry{{Host: "api.test"}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	run := func(cmd string) string {
		t.Helper()
		res, err := c.Exec(ctx, s.ID, session.ExecRequest{Command: cmd, TimeoutSeconds: 60})
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		out := res.Stdout + res.Stderr
		if strings.Contains(out, "s3cret") {
			t.Errorf("%s: the sandbox saw the secret:\n%s", cmd, out)
		}
		return out
	}
	curl := func(url, want string) {
		t.Helper()
		out := run("curl -sS -v " + url + " 2>&1")
		if !strings.Contains(out, "upstream ") {
			t.Fatalf("curl %s: no answer from the upstream:\n%s", url, out)
		}
		// -v shows the request curl sent: it had no credential.
		if strings.Contains(strings.ToLower(out), "> authorization") {
			t.Errorf("curl %s sent an Authorization header itself:\n%s", url, out)
		}
		if got := last(); got != want {
			t.Errorf("curl %s: the upstream saw %q, want %q", url, got, want)
		}
	}

	curl("https://api.test/x", "https /x ")
	g, err := c.Grant(ctx, s.ID, grants.GrantRequest{Value: secret, Hosts: []string{"api.test"}, Paths: []string{"/x*"}})
	if err != nil {
		t.Fatal(err)
	}
	curl("https://api.test/x", "https /x "+secret)
	curl("https://api.test/xyz?q=1", "https /xyz "+secret)
	curl("--noproxy '*' https://api.test/x", "https /x "+secret)
	curl("https://api.test/other", "https /other ")
	curl("http://api.test/x", "http /x ")
	curl("--noproxy '*' http://api.test/x", "http /x ")
	// Inside the granted tunnel, a request naming another host (Host vs
	// CONNECT/SNI) is refused before anything, secret included, is sent.
	before := last()
	if out := run("curl -s -o /dev/null -w '%{http_code}' -H 'Host: other.test' https://api.test/x"); !strings.Contains(out, "403") {
		t.Errorf("Host/SNI mismatch on a granted route: %q", out)
	}
	if got := last(); got != before {
		t.Errorf("a request with a mismatched Host reached the upstream: %q", got)
	}
	if out := run("env; cat /proc/self/environ | tr '\\0' '\\n'"); strings.Contains(out, "s3cret") {
		t.Error("the sandbox's environment holds the secret")
	}
	if err := c.Ungrant(ctx, s.ID, g.ID); err != nil {
		t.Fatal(err)
	}
	curl("https://api.test/x", "https /x ")

	evs, err := c.Events(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for _, e := range evs {
		var data bytes.Buffer
		json.Compact(&data, e.Data)
		fmt.Fprintf(&all, "%s %s\n", e.Kind, data.String())
	}
	for _, want := range []string{"grant.create " + `{"expires_at"`, `"id":"` + g.ID + `"`, "grant.revoke", `"grant":"` + g.ID + `"`} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("the ledger has no %s:\n%s", want, all.String())
		}
	}
	if strings.Contains(all.String(), "s3cret") {
		t.Errorf("the ledger holds the secret:\n%s", all.String())
	}
}
