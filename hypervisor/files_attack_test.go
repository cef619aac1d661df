package hypervisor_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
	"paddock.dev/paddock/hypervisor"
)

// wantAgentCode fails unless err is the agent's refusal with status and
// code.
func wantAgentCode(t *testing.T, what string, err error, status int, code string) {
	t.Helper()
	var e *client.Error
	if !errors.As(err, &e) || e.Status != status || e.Code != code {
		t.Errorf("%s: %v, want %d %s", what, err, status, code)
	}
}

// TestAttackFilesAsGuestUser runs issue 16's files-API attack on a real
// sandbox of every backend, against the guest agent the way the host
// calls it (both backends run the same agent: procbox in namespaces, qemu
// in a VM with /.paddock). A write, an upload or a delete of a program in
// /usr/bin, of /bin/sh, of the agent itself or of /etc/passwd, named
// directly or through a link the sandbox planted into /usr/bin, is
// refused (403 system_path); outside the system directories the guest
// user's rights hold (root's home, PID 1's environment: 403
// permission_denied); the write over
// a planted link to a program replaces the link, never the program. The
// programs then still run as they were, and what the files API wrote
// where the guest may write belongs to the guest user.
func TestAttackFilesAsGuestUser(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e backendEnv) {
		_, c := e.create(t, hypervisor.MachineSpec{})
		ctx := ctxT(t)
		sums := "sha256sum /usr/bin/cat /usr/bin/sh /etc/passwd"
		before := mustOK(t, c, sums)
		mustOK(t, c, "ln -s /usr/bin /workspace/sys && ln -s /usr/bin/cat /workspace/catlink")
		payload := []byte("#!/bin/sh\necho PWNED\n")
		for _, p := range []string{"/usr/bin/cat", "/bin/sh", "/bin/cat", "/usr/bin/new", "/workspace/sys/cat",
			"/etc/passwd", "/etc/ld.so.preload", "/.paddock/paddock-guest"} {
			_, err := c.WriteFile(ctx, api.FileContent{Path: p, Content: payload, Mode: "0755"})
			wantAgentCode(t, "write "+p, err, http.StatusForbidden, api.CodeSystemPath)
		}
		for _, p := range []string{"/usr/bin/cat", "/bin/sh", "/workspace/sys/cat"} {
			wantAgentCode(t, "delete "+p, c.DeleteFile(ctx, p, false), http.StatusForbidden, api.CodeSystemPath)
		}
		if _, err := c.UploadPart(ctx, "attack", 0, payload); err != nil {
			t.Fatal(err)
		}
		_, err := c.CompleteUpload(ctx, "attack", api.UploadComplete{Path: "/workspace/sys/cat", Size: int64(len(payload)), Mode: "0755"})
		wantAgentCode(t, "upload over /workspace/sys/cat", err, http.StatusForbidden, api.CodeSystemPath)
		_, err = c.WriteFile(ctx, api.FileContent{Path: "/root/.profile", Content: payload})
		wantAgentCode(t, "write in root's home", err, http.StatusForbidden, api.CodePermission)
		_, err = c.List(ctx, "/root")
		wantAgentCode(t, "list root's home", err, http.StatusForbidden, api.CodePermission)
		_, err = c.ReadFile(ctx, "/proc/1/environ")
		wantAgentCode(t, "read PID 1's environment", err, http.StatusForbidden, api.CodePermission)
		if _, err := c.WriteFile(ctx, api.FileContent{Path: "/workspace/catlink", Content: payload, Mode: "0755"}); err != nil {
			t.Errorf("write over the planted link: %v", err)
		}

		if after := mustOK(t, c, sums); after != before {
			t.Errorf("system files changed:\n%s\nwas\n%s", after, before)
		}
		if out := mustOK(t, c, "cat /etc/passwd >/dev/null && sh -c 'echo real'"); out != "real\n" {
			t.Errorf("cat and sh after the attack: %q", out)
		}
		for _, p := range []string{"/workspace/new/f", "/tmp/f", "/home/agent/f"} {
			if _, err := c.WriteFile(ctx, api.FileContent{Path: p, Content: []byte("ok")}); err != nil {
				t.Errorf("write %s: %v", p, err)
			}
		}
		owners := mustOK(t, c, "stat -c %u:%g /workspace/new /workspace/new/f /tmp/f /home/agent/f /workspace/catlink")
		if want := strings.Repeat("1000:1000\n", 5); owners != want {
			t.Errorf("owners of what the files API wrote: %q, want the guest user's", owners)
		}
	})
}
