package api_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"paddock.dev/paddock/client"
	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/sandboxes"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/internal/testutil"
)

// TestAttackTenantCannotReachDaemonHost tries, with a tenant's token and
// a session token holding every op, the ways a create or a session route
// could name something of the daemon's host instead of the sandbox's: the
// daemon's environment (where PADDOCK_SECRET_ variables and the admin
// token live) read from the sandbox's commands, files routes and the
// lower sandbox API; an image name climbing out of the images directory
// (aimed at a real image directory, so only the name check stops it);
// workspace.git naming a host path or a file:// URL; a workspace path or
// overlay lower climbing with ..; a backend named by a path; volumes on a
// sandbox; and the admin's policy route. Each is refused with a 4xx that
// says what to use instead, or finds nothing of the host.
func TestAttackTenantCannotReachDaemonHost(t *testing.T) {
	const secret = "daemon-env-secret-3c8e1f"
	t.Setenv("PADDOCK_SECRET_HOST_REACH", secret)
	d := newTestDaemon(t)
	toks := withTenants(t, d, "acme")
	ctx := context.Background()
	acme := client.New(d.url, toks["acme"])
	s, err := acme.CreateSession(ctx, session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	_, st := mint(t, d.url, toks["acme"], s.ID, map[string]any{"ops": auth.GrantableOps()})
	if st.Token == "" {
		t.Fatal("no session token")
	}

	t.Run("daemon environment", func(t *testing.T) {
		// Every process's environment the guest user can read, its own.
		r, err := acme.Exec(ctx, s.ID, session.ExecRequest{Command: "env; cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'; echo done"})
		if err != nil || !strings.Contains(r.Stdout, "PATH=") || !strings.HasSuffix(r.Stdout, "done\n") {
			t.Fatalf("exec: %+v %v", r, err)
		}
		if strings.Contains(r.Stdout, secret) || strings.Contains(r.Stdout, "PADDOCK_SECRET_") {
			t.Errorf("a command sees the daemon's environment:\n%s", r.Stdout)
		}
		for _, p := range []string{"/proc/1/environ", "/proc/self/environ"} {
			a := as(t, d.url, st.Token, "GET", "/v1/agents/sessions/"+s.ID+"/files/content?path="+p, nil)
			if strings.Contains(string(a.body), secret) || strings.Contains(string(a.body), "UEFERE9DS19TRUNSRVRf") { // base64 of PADDOCK_SECRET_
				t.Errorf("files read of %s holds the daemon's environment: %d %s", p, a.status, a.body)
			}
		}
		sbx, err := acme.CreateSandbox(ctx, sandboxes.SandboxRequest{TTLSeconds: 600})
		if err != nil {
			t.Fatal(err)
		}
		a := as(t, d.url, toks["acme"], "POST", "/v1/sandboxes/"+sbx.ID+"/process", map[string]any{"command": "env; cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'"})
		if a.status != 200 || !strings.Contains(string(a.body), "PATH=") || strings.Contains(string(a.body), secret) {
			t.Errorf("sandbox process: %d %s", a.status, a.body)
		}
	})

	// The images directory's own name, so that a name climbing out of it
	// and back in names the real mini image.
	climb := "../" + filepath.Base(testutil.MiniImages(t)) + "/" + testutil.MiniImageName
	for _, tc := range []struct {
		name, method, path string
		body               any
		status             int
		says               string
	}{
		{"image climbing to a real image", "POST", "/v1/agents/sessions", map[string]any{"runtime": map[string]any{"image": climb}}, 400, "runtime.image"},
		{"image as an absolute path", "POST", "/v1/agents/sessions", map[string]any{"runtime": map[string]any{"image": "/etc"}}, 400, "runtime.image"},
		{"sandbox image climbing", "POST", "/v1/sandboxes", map[string]any{"image": climb}, 400, "image"},
		{"git file URL", "POST", "/v1/agents/sessions", map[string]any{"workspace": map[string]any{"git": "file:///etc"}}, 400, "https://"},
		{"git host path", "POST", "/v1/agents/sessions", map[string]any{"workspace": map[string]any{"git": "/root/.ssh"}}, 400, "https://"},
		{"git scp form", "POST", "/v1/agents/sessions", map[string]any{"workspace": map[string]any{"git": "git@localhost:/etc"}}, 400, "https://"},
		{"git ext transport", "POST", "/v1/agents/sessions", map[string]any{"workspace": map[string]any{"git": "ext::sh%20-c%20id"}}, 400, "https://"},
		{"workspace climbing", "POST", "/v1/agents/sessions", map[string]any{"workspace": map[string]any{"path": "/workspace/../../etc"}}, 400, "workspace.path"},
		{"overlay lower climbing", "POST", "/v1/agents/sessions", map[string]any{"workspace": map[string]any{"mode": "overlay", "lower": "/usr/../../etc"}}, 400, "workspace.lower"},
		{"backend as a path", "POST", "/v1/agents/sessions", map[string]any{"runtime": map[string]any{"backend": "../procbox"}}, 400, "backend"},
		{"sandbox volumes", "POST", "/v1/sandboxes", map[string]any{"volumes": []any{map[string]any{"host": "/etc", "path": "/mnt"}}}, 400, "volumes"},
		{"admin policy, tenant", "GET", "/v1/admin/policy", nil, 403, "only the admin"},
	} {
		a := as(t, d.url, toks["acme"], tc.method, tc.path, tc.body)
		if a.status != tc.status || !strings.Contains(a.errorText(), tc.says) {
			t.Errorf("%s: %d %s, want %d naming %q", tc.name, a.status, a.body, tc.status, tc.says)
		}
	}
	if a := as(t, d.url, st.Token, "GET", "/v1/admin/policy", nil); a.status != http.StatusForbidden {
		t.Errorf("admin policy, session token: %d %s", a.status, a.body)
	}
	// Nothing was made by the refused creates.
	if ss, err := acme.ListSessions(ctx); err != nil || len(ss) != 1 {
		t.Errorf("the tenant has %d sessions (%v), want only the first", len(ss), err)
	}
}
