package egress_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"paddock.dev/paddock/egress/rules"
	"paddock.dev/paddock/hostd/ledger"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/policy"
)

// TestOperatorModuleNarrowsEgress: an operator's Rego module (a directory
// the engine watches) refuses a request the session's own policy allows,
// from a real sandbox, and the refusal names the operator's rule; a broken
// module is refused while the working one stays in force; removing the
// module lets the request through again. Nothing refused reaches the
// upstream.
func TestOperatorModuleNarrowsEgress(t *testing.T) {
	onBackends(t, procboxOnly, operatorModuleNarrowsEgress)
}

func operatorModuleNarrowsEgress(t *testing.T, backend string) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var hits atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprintf(w, "upstream %s %s", r.Method, r.URL.Path)
	}))
	defer up.Close()
	tn := newTestNet(t, map[string]string{"allowed.test.": "10.99.0.10"}, map[string]string{"10.99.0.10:80": up.Listener.Addr().String()})
	ext := t.TempDir()
	write := func(name, src string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(ext, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("noadmin.rego", `package paddock.ext.noadmin.http

import rego.v1

deny contains "the admin pages are off limits" if {
	input.action == "request"
	startswith(input.request.path, "/admin")
}

# A path is judged per request: HTTPS to this host must be intercepted.
inspect if input.request.host == "allowed.test"
`)
	eng, err := policy.New(policy.Options{ExtDir: ext})
	if err != nil {
		t.Fatal(err)
	}
	go eng.Watch(ctx)
	m, _, _ := daemonWith(t, backend, tn.egressConfig(), nil, eng)
	s, err := m.Create(ctx, "", session.CreateRequest{Policy: &session.PolicyRequest{PolicyInput: rules.PolicyInput{
		Network: &rules.Network{Default: "deny", Allow: []rules.AllowEntry{{Host: "allowed.test"}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	curl := func(path string) string {
		t.Helper()
		res, err := m.Exec(ctx, "", s.ID, session.ExecRequest{Command: "curl -s -w ' %{http_code}' http://allowed.test" + path, TimeoutSeconds: 60})
		if err != nil {
			t.Fatal(err)
		}
		return res.Stdout
	}
	if got := curl("/public"); got != "upstream GET /public 200" {
		t.Fatalf("allowed request: %q", got)
	}
	before := hits.Load()
	if got := curl("/admin/users"); !strings.HasSuffix(got, " 403") || !strings.Contains(got, "off limits") {
		t.Fatalf("the operator's deny: %q", got)
	}
	if hits.Load() != before {
		t.Fatal("a refused request reached the upstream")
	}
	if ev, _ := m.Events(ctx, "", s.ID); !strings.Contains(fmt.Sprint(ledgerText(ev)), "ext.noadmin") {
		t.Errorf("the refusal is not ledgered with the operator's rule: %v", ledgerText(ev))
	}

	// A module that does not compile is refused; the working one stays.
	write("broken.rego", "package paddock.ext.broken.http\n\ndeny contains x if {\n")
	waitFor(t, func() bool { return eng.Status().LastError != "" })
	if got := curl("/admin/users"); !strings.HasSuffix(got, " 403") {
		t.Fatalf("after a broken module: %q", got)
	}
	// Gone: the request goes through again.
	os.Remove(filepath.Join(ext, "broken.rego"))
	os.Remove(filepath.Join(ext, "noadmin.rego"))
	waitFor(t, func() bool { return len(eng.Status().Operator) == 0 && eng.Status().LastError == "" })
	if got := curl("/admin/users"); got != "upstream GET /admin/users 200" {
		t.Fatalf("after removing the module: %q", got)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met within 10 s")
}

// ledgerText is each entry as "kind data", for searching.
func ledgerText(ev []ledger.Entry) []string {
	var out []string
	for _, e := range ev {
		out = append(out, e.Kind+" "+string(e.Data))
	}
	return out
}
