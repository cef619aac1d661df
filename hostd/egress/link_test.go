package egress_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"paddock.dev/paddock/egress/rules"
	hegress "paddock.dev/paddock/hostd/egress"
	"paddock.dev/paddock/hostd/ledger"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/store"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/hypervisor/procbox"
	"paddock.dev/paddock/internal/testutil"
)

// TestLinksAcrossLifecycle follows a procbox sandbox's veth link through
// what gives it a new network namespace or a new daemon: a restore, a
// fork (each child its own link, on its own addresses) and a daemon
// restart (the new daemon's egress namespace, a new link for the adopted
// sandbox). After each, a program that ignores proxy settings still gets
// through the link to the allowed name, and to nothing else.
func TestLinksAcrossLifecycle(t *testing.T) {
	testutil.RequiresRoot(t)
	ctx := context.Background()
	allowed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s", r.URL.Path)
	}))
	defer allowed.Close()
	tn := newTestNet(t, map[string]string{"allowed.test.": "10.99.0.10", "other.test.": "10.99.0.11"},
		map[string]string{"10.99.0.10:80": allowed.Listener.Addr().String(), "10.99.0.11:80": allowed.Listener.Addr().String()})
	images, _ := testutil.DebianImages(t)
	state := t.TempDir()
	st, err := store.Open(filepath.Join(state, "paddock.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// daemon is one run of a daemon on state: a backend (which adopts
	// what an earlier run left), an egress host and a manager.
	daemon := func() (*session.Manager, *hegress.Host, io.Closer) {
		eg := hegress.New(tn.egressConfig())
		if err := eg.Links(); err != nil {
			eg.Shutdown()
			t.Skipf("no veth links here: %v", err)
		}
		b, err := procbox.New(hypervisor.Config{StateDir: state, GuestBinary: testutil.GuestBinary(t), ImagesDir: images, AdoptLeftovers: true})
		if err != nil {
			t.Fatal(err)
		}
		b.SetNetAttach(eg.AttachLink)
		m := session.New(session.Config{Store: st, Ledger: ledger.New(st), Backend: b, DefaultImage: testutil.DebianImageName,
			Egress: eg, EgressRoot: filepath.Join(state, "egress"), Policy: engine(t)})
		return m, eg, b
	}
	m, eg, b := daemon()
	stopped := false
	defer func() {
		if !stopped {
			m.Shutdown(ctx)
			eg.Shutdown()
			b.Close()
		}
	}()
	s, err := m.Create(ctx, "", session.CreateRequest{Policy: &session.PolicyRequest{PolicyInput: rules.PolicyInput{
		Network: &rules.Network{Default: "deny", Allow: []rules.AllowEntry{{Host: "allowed.test"}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	// check runs the probes in session id and returns its link's gateway.
	check := func(m *session.Manager, id, when string) string {
		t.Helper()
		res, err := m.Exec(ctx, "", id, session.ExecRequest{TimeoutSeconds: 60, Command: `
ls /sys/class/net | tr '\n' ' '; echo
awk '$2=="00000000"{print $3}' /proc/net/route
curl -sS --noproxy '*' http://allowed.test/` + when + `; echo
curl -s -o /dev/null -w '%{http_code}' --noproxy '*' http://10.99.0.11/; echo`})
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		lines := strings.Split(res.Stdout, "\n")
		if len(lines) < 4 || lines[0] != "eth0 lo " || lines[1] == "" || lines[2] != "hello /"+when || lines[3] != "403" {
			t.Fatalf("%s: %q %q, want eth0, a gateway, the allowed name's answer and 403 for another address", when, res.Stdout, res.Stderr)
		}
		return lines[1]
	}
	check(m, s.ID, "created")
	if _, err := m.Checkpoint(ctx, "", s.ID, -1, session.CheckpointRequest{Tag: "t1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Restore(ctx, "", s.ID, -1, session.RestoreRequest{Tag: "t1"}); err != nil {
		t.Fatal(err)
	}
	check(m, s.ID, "restored")
	kids, err := m.Fork(ctx, "", s.ID, -1, session.ForkRequest{Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	gws := map[string]bool{check(m, s.ID, "parent"): true}
	for i, k := range kids {
		gws[check(m, k.ID, fmt.Sprintf("child%d", i))] = true
	}
	if len(gws) != 3 {
		t.Errorf("parent and two children share link addresses: gateways %v", gws)
	}
	// A new daemon on the same state: the old one's egress namespace (and
	// with it every link) is gone; the adopted sandboxes get new ones.
	m.Detach(ctx)
	eg.Shutdown()
	b.Close()
	stopped = true
	m, eg, b = daemon()
	stopped = false
	if adopted, lost := m.Reattach(ctx); adopted != 3 || lost != 0 {
		t.Fatalf("reattach: adopted %d, lost %d, want 3 and 0", adopted, lost)
	}
	check(m, s.ID, "adopted")
	check(m, kids[0].ID, "adopted-child")
}
