package session

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"paddock.dev/paddock/errdefs"
	"paddock.dev/paddock/guest/client"
	"paddock.dev/paddock/hostd/auth"
)

// TestAttackGuestErrKinds: the guest agent runs inside the sandbox, so
// what it answers is the sandbox's word. guestErr must pass on only the
// kinds an agent answers (400, 403, 404, 409, 413, and the files routes'
// 403 codes), by the status, never by a code the agent chose: an agent
// that says "unauthenticated", "approval_required" or "budget_exceeded"
// must not make the daemon answer 401, 428 or a budget refusal, and an
// agent's 5xx must stay a server error whatever code it names.
func TestAttackGuestErrKinds(t *testing.T) {
	for _, tt := range []struct {
		name       string
		ge         *client.Error
		wantStatus int
		wantCode   string
	}{
		{"plain 409", &client.Error{Status: 409, Code: "conflict", Message: "conflict: busy"}, 409, errdefs.CodeConflict},
		{"files code", &client.Error{Status: 403, Code: "system_path", Message: "forbidden: /usr"}, 403, errdefs.CodeSystemPath},
		{"400 naming unauthenticated", &client.Error{Status: 400, Code: "unauthenticated", Message: "log in again"}, 400, errdefs.CodeInvalidArgument},
		{"400 naming approval_required", &client.Error{Status: 400, Code: "approval_required", Message: "ask"}, 400, errdefs.CodeInvalidArgument},
		{"401 from the agent", &client.Error{Status: 401, Code: "unauthenticated", Message: "token"}, 502, errdefs.CodeBadGateway},
		{"412 from the agent", &client.Error{Status: 412, Code: "revision_mismatch", Message: "rev"}, 502, errdefs.CodeBadGateway},
		{"403 with a budget code", &client.Error{Status: 403, Code: "budget_exceeded", Message: "budget"}, 403, errdefs.CodeForbidden},
		{"403 with a secret code", &client.Error{Status: 403, Code: "secret_ref_admin_only", Message: "x"}, 403, errdefs.CodeForbidden},
		{"500 naming not_found", &client.Error{Status: 500, Code: "not_found", Message: "gone"}, 500, errdefs.CodeInternal},
		{"502 naming conflict", &client.Error{Status: 502, Code: "conflict", Message: "x"}, 500, errdefs.CodeInternal},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := guestErr(tt.ge)
			if got := errdefs.HTTPStatus(err); got != tt.wantStatus {
				t.Errorf("status %d, want %d (err %v)", got, tt.wantStatus, err)
			}
			if got := errdefs.Code(err); got != tt.wantCode {
				t.Errorf("code %q, want %q", got, tt.wantCode)
			}
			if tt.wantStatus == http.StatusBadGateway && !errors.Is(err, errdefs.ErrBadGateway) {
				t.Errorf("not a bad gateway: %v", err)
			}
		})
	}
}

// TestAttackNoCallerIsNotAdmin: a call that reaches the manager with no
// caller (a route that lost its identity on the way, the daemon's own
// work), or with an identity of no known kind, must not be taken for the
// admin by the policy: callerOf is what the approval module's "only an
// admin may decide" sees. It refuses such a call (403) instead.
func TestAttackNoCallerIsNotAdmin(t *testing.T) {
	for name, ctx := range map[string]context.Context{
		"no identity":      context.Background(),
		"without identity": auth.WithoutIdentity(auth.WithIdentity(context.Background(), auth.Admin())),
		"zero identity":    auth.WithIdentity(context.Background(), auth.Identity{}),
		"unknown kind":     auth.WithIdentity(context.Background(), auth.Identity{Kind: "root"}),
	} {
		a, err := callerOf(ctx)
		if a.Kind == "admin" || actorString(a) == "admin" || !errors.Is(err, ErrForbidden) {
			t.Errorf("%s: callerOf = %+v, %v; want a 403 refusal and never the admin", name, a, err)
		}
	}
	if a, err := callerOf(auth.WithIdentity(context.Background(), auth.Admin())); a.Kind != "admin" || err != nil {
		t.Errorf("the admin's identity: callerOf = %+v, %v", a, err)
	}
	// The approvals service's Decide refuses such a call too: see
	// hostd/approvals (TestDecideNoCallerIsNotAdmin).
}

// TestAttackRecordAfterDisconnect: a command that reached the guest is
// ledgered even when its caller goes away between the guest's answer and
// the record step (a client that hangs up as the command ends must not
// leave a command that ran without its ledger entry). The caller's
// context is cancelled as the record step starts, for an exec and a job
// on the fake backend (a file write: hostd/workspace's
// TestAttackFileRecordAfterDisconnect).
func TestAttackRecordAfterDisconnect(t *testing.T) {
	m := fakeManager(t)
	base, stop := context.WithTimeout(context.Background(), 2*time.Minute)
	defer stop()
	s, err := m.Create(base, "", CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	var cancelMu sync.Mutex
	var cancel context.CancelFunc
	m.cmds.mu.Lock()
	m.cmds.trace = func(_ CommandKind, step string) {
		if step == StepRecord {
			cancelMu.Lock()
			cancel()
			cancelMu.Unlock()
		}
	}
	m.cmds.mu.Unlock()
	callerCtx := func() context.Context {
		cancelMu.Lock()
		defer cancelMu.Unlock()
		var ctx context.Context
		ctx, cancel = context.WithCancel(base)
		return ctx
	}
	if _, err := m.Exec(callerCtx(), "", s.ID, ExecRequest{Command: "echo gone-exec"}); err != nil {
		t.Fatalf("exec: %v", err)
	}
	if d := lastEntry(t, m, s.ID, "exec"); d["command"] != "echo gone-exec" {
		t.Errorf("the exec that ran is not ledgered: last exec entry %v", d)
	}
	if _, err := m.StartJob(callerCtx(), "", s.ID, JobStart{Command: "echo gone-job"}); err != nil {
		t.Fatalf("job: %v", err)
	}
	if kinds := pipeKinds(t, m, s.ID); !slices.Contains(kinds, "job.start") {
		t.Errorf("the job that started is not ledgered: %v", kinds)
	}
}
