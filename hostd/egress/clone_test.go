package egress_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"paddock.dev/paddock/egress/ca"
	"paddock.dev/paddock/egress/rules"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/internal/testutil"
)

// testCA makes a CA and a server certificate for host signed by it.
func testCA(t *testing.T, host string) (caPEM []byte, leaf tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "paddock test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestWorkspaceCloneThroughEgress is a session's workspace.git cloned for
// real inside a sandbox (debian image, real git): through the egress proxy
// to an HTTPS git server that demands the credential in the URL and whose
// certificate the sandbox trusts only because the daemon adds the
// operator's CA. The credential reaches the server and is left nowhere:
// not the record, the ledger, the clone's .git/config.
func TestWorkspaceCloneThroughEgress(t *testing.T) {
	onBackends(t, procboxOnly, workspaceCloneThroughEgress)
}

func workspaceCloneThroughEgress(t *testing.T, backend string) {
	testutil.RequiresRoot(t)
	testutil.RequiresCommand(t, "git")
	ctx := context.Background()
	tmp := t.TempDir()
	hostGit := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + tmp, "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com"}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	work, root := filepath.Join(tmp, "work"), filepath.Join(tmp, "srv")
	os.MkdirAll(work, 0o755)
	os.MkdirAll(root, 0o755)
	hostGit("-C", work, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(work, "README"), []byte("cloned through egress\n"), 0o644)
	hostGit("-C", work, "add", "README")
	hostGit("-C", work, "commit", "-q", "-m", "first")
	hostGit("clone", "-q", "--bare", work, filepath.Join(root, "r.git"))

	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatal(err)
	}
	gitHTTP := &cgi.Handler{Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("user:s3cret"))
	var gotAuth []string
	caPEM, leaf := testCA(t, "git.test")
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth = append(gotAuth, r.Header.Get("Authorization"))
		if r.Header.Get("Authorization") != want {
			w.Header().Set("WWW-Authenticate", `Basic realm="t"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		gitHTTP.ServeHTTP(w, r)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{leaf}}
	srv.StartTLS()
	defer srv.Close()

	tn := newTestNet(t, map[string]string{"git.test.": "10.99.0.20"}, map[string]string{"10.99.0.20:443": srv.Listener.Addr().String()})
	m, st, _ := daemonFor(t, backend, tn.egressConfig(), caPEM)
	s, err := m.Create(ctx, "", session.CreateRequest{
		Workspace: session.WorkspaceRequest{Git: "https://user:s3cret@git.test/r.git", RequireReady: true},
		Policy:    &session.PolicyRequest{PolicyInput: rules.PolicyInput{Network: &rules.Network{Default: "deny", Allow: []rules.AllowEntry{{Host: "git.test"}}}}},
	})
	if err != nil {
		t.Fatalf("create with a clone: %v (the server saw %d requests)", err, len(gotAuth))
	}
	if s.Workspace.Note != "" || s.Workspace.Git != "https://***@git.test/r.git" {
		t.Errorf("workspace: %+v", s.Workspace)
	}
	res, err := m.Exec(ctx, "", s.ID, session.ExecRequest{Command: "cat README; cat .git/config; git log --oneline | wc -l"})
	if err != nil || !strings.HasPrefix(res.Stdout, "cloned through egress\n") {
		t.Fatalf("the clone: %+v %v", res, err)
	}
	if strings.Contains(res.Stdout, "s3cret") || strings.Contains(res.Stdout, want) {
		t.Errorf("the credential is in the clone's config:\n%s", res.Stdout)
	}
	ok := false
	for _, a := range gotAuth {
		ok = ok || a == want
	}
	if !ok {
		t.Errorf("the server never got the credential: %q", gotAuth)
	}
	evs, _ := m.Events(ctx, "", s.ID)
	var all bytes.Buffer
	for _, e := range evs {
		fmt.Fprintf(&all, "%s %s\n", e.Kind, e.Data)
	}
	if !strings.Contains(all.String(), `workspace.clone`) || !strings.Contains(all.String(), `"ok":true`) {
		t.Errorf("ledger:\n%s", all.String())
	}
	if strings.Contains(all.String(), "s3cret") {
		t.Error("the ledger holds the credential")
	}
	if row, _ := st.GetSession(ctx, s.ID); bytes.Contains(row.Record, []byte("s3cret")) {
		t.Error("the record holds the credential")
	}
}

// TestInterceptionFromASandbox: a host with method and path rules over
// HTTPS, judged per request. The daemon's CA (egress/ca) intercepts the
// TLS, the sandbox trusts it through the session config, and the proxy
// verifies the real server against its own roots.
func TestInterceptionFromASandbox(t *testing.T) {
	onBackends(t, procboxOnly, interceptionFromASandbox)
}

func interceptionFromASandbox(t *testing.T, backend string) {
	testutil.RequiresRoot(t)
	ctx := context.Background()
	upCA, leaf := testCA(t, "paths.test")
	var seen []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Method+" "+r.URL.Path)
		fmt.Fprintf(w, "tls upstream %s %s", r.Method, r.URL.Path)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{leaf}}
	srv.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(upCA)
	authority, err := ca.LoadOrCreate(filepath.Join(t.TempDir(), "ca"))
	if err != nil {
		t.Fatal(err)
	}
	tn := newTestNet(t, map[string]string{"paths.test.": "10.99.0.30"}, map[string]string{"10.99.0.30:443": srv.Listener.Addr().String()})
	cfg := tn.egressConfig()
	cfg.CA, cfg.UpstreamRoots = authority, roots
	m, _, _ := daemonFor(t, backend, cfg, nil) // the daemon has sandboxes trust its CA
	s, err := m.Create(ctx, "", session.CreateRequest{Policy: &session.PolicyRequest{PolicyInput: rules.PolicyInput{Network: &rules.Network{Default: "deny",
		Allow: []rules.AllowEntry{{Host: "paths.test", Methods: []string{"GET"}, Paths: []string{"/ok/*"}}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Capabilities.HTTPPolicy {
		t.Error("capabilities.http_policy is false with a CA")
	}
	if len(s.Policy.Unenforced) != 0 {
		t.Errorf("with interception nothing should be unenforced: %v", s.Policy.Unenforced)
	}
	for _, c := range []struct{ cmd, want string }{
		{"curl -sS https://paths.test/ok/x", "tls upstream GET /ok/x"},
		{"curl -s -o /dev/null -w '%{http_code}' -X POST https://paths.test/ok/x", "403"},
		{"curl -s -o /dev/null -w '%{http_code}' https://paths.test/secret", "403"},
		{"curl -s -o /dev/null -w '%{http_code}' --path-as-is https://paths.test/ok/../secret", "40"},
		{"curl -sS --noproxy '*' https://paths.test/ok/direct", "tls upstream GET /ok/direct"},
	} {
		res, err := m.Exec(ctx, "", s.ID, session.ExecRequest{Command: c.cmd, TimeoutSeconds: 60})
		if err != nil || !strings.Contains(res.Stdout, c.want) {
			t.Errorf("%s: %+v %v, want %q", c.cmd, res, err, c.want)
		}
	}
	if got := strings.Join(seen, ","); got != "GET /ok/x,GET /ok/direct" {
		t.Errorf("the upstream saw %q: refused requests must not reach it", got)
	}
}
