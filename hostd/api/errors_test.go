package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"paddock.dev/paddock/client"
	"paddock.dev/paddock/errdefs"
	"paddock.dev/paddock/hostd/api"
	"paddock.dev/paddock/hostd/daemon/daemontest"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/tokens"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/hypervisor/fake"
	"paddock.dev/paddock/policy"
)

// A machine asked for with failMemoryMB fails to be made with an error
// of no kind (500); one with deafMemoryMB is made, but its agent cannot
// be dialled (502 with workspace.require_ready).
const failMemoryMB, deafMemoryMB = 333, 334

type kindBackend struct{ hypervisor.Backend }

func (b *kindBackend) Create(ctx context.Context, spec hypervisor.MachineSpec) (hypervisor.Machine, error) {
	if spec.MemoryMB == failMemoryMB {
		return nil, errors.New("this test backend fails on purpose")
	}
	m, err := b.Backend.Create(ctx, spec)
	if err != nil || spec.MemoryMB != deafMemoryMB {
		return m, err
	}
	return deafMachine{m}, nil
}

type deafMachine struct{ hypervisor.Machine }

func (deafMachine) Dial(context.Context) (net.Conn, error) {
	return nil, errors.New("this test machine's agent does not answer")
}

// notThroughHTTP are the kinds no handler answers with today: nothing
// is unimplemented, and unavailable is only an SSE error event's kind
// (stream_max_age, checked in TestStreamLimits). errdefs' table test
// covers their status and code.
var notThroughHTTP = map[error]bool{errdefs.ErrNotImplemented: true, errdefs.ErrUnavailable: true}

// TestErrorKinds provokes an error of every kind through the real HTTP
// handler of a whole daemon (and the finer codes of the refusals with bodies of their own)
// and checks the status, the code, that the body is what the spec says,
// and that the SDK's error made from the answer is of that kind and no
// other.
func TestErrorKinds(t *testing.T) {
	// The fake backend (the real guest agent, in-process): no root
	// needed, so make test-nonroot runs this as an ordinary user.
	d := newTestDaemon(t, daemontest.WithBackends(func(dir string) ([]hypervisor.Backend, error) {
		return []hypervisor.Backend{&kindBackend{fake.New(dir)}}, nil
	}), daemontest.WithImage("any", t.TempDir()))
	ctx := context.Background()
	doc := loadOpenAPI(t)
	newSession := func(req session.CreateRequest) *session.Session {
		t.Helper()
		s, err := d.c.CreateSession(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := newSession(session.CreateRequest{})
	other := newSession(session.CreateRequest{})
	rules := policy.ProcessRules{Allow: []string{"echo *"}, Ask: []string{"touch *"}, Deny: []string{"rm *"}}
	ruled := newSession(session.CreateRequest{Policy: &session.PolicyRequest{Process: &rules}})
	one := int64(1)
	budgeted := newSession(session.CreateRequest{Budget: &session.Budget{MaxExecs: &one}})
	if _, err := d.c.Exec(ctx, budgeted.ID, session.ExecRequest{Command: "true"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Checkpoint(ctx, s.ID, -1, session.CheckpointRequest{Tag: "taken"}); err != nil {
		t.Fatal(err)
	}
	tok, err := d.c.MintToken(ctx, s.ID, tokens.TokenRequest{Ops: []string{"read"}})
	if err != nil {
		t.Fatal(err)
	}
	limits := api.DefaultStreamLimits
	limits.EventStreamsPerSession = 1
	if err := d.api.SetStreamLimits(limits); err != nil {
		t.Fatal(err)
	}
	defer d.api.SetStreamLimits(api.DefaultStreamLimits)
	held := eventStreamOf(t, d.url, token, s.ID)
	wantOpen(t, "the one event stream", held)
	defer held.close()

	sp := "/v1/agents/sessions/"
	type req struct {
		method, path, token, body string
		header                    map[string]string
	}
	for _, tc := range []struct {
		name   string
		before *req // sent first, its answer not checked
		req    req
		kind   error
		code   string
		schema string // the spec's schema of the body
	}{
		{name: "unknown field", req: req{method: "POST", path: "/v1/agents/sessions", body: `{"nope":1}`},
			kind: errdefs.ErrInvalidArgument, code: "invalid_argument"},
		{name: "bad token", req: req{method: "GET", path: "/v1/agents/sessions", token: "pdk_wrong_token_0123456789"},
			kind: errdefs.ErrUnauthenticated, code: "unauthenticated"},
		{name: "session token on another session", req: req{method: "GET", path: sp + other.ID, token: tok.Token},
			kind: errdefs.ErrForbidden, code: "forbidden"},
		{name: "policy refusal", req: req{method: "POST", path: sp + ruled.ID + "/exec", body: `{"command":"rm -rf /workspace"}`},
			kind: errdefs.ErrForbidden, code: "policy_refused", schema: "PolicyRefused"},
		{name: "budget", req: req{method: "POST", path: sp + budgeted.ID + "/exec", body: `{"command":"true"}`},
			kind: errdefs.ErrForbidden, code: "budget_exceeded", schema: "BudgetExceeded"},
		{name: "no such session", req: req{method: "GET", path: sp + "ses-0000000000000000"},
			kind: errdefs.ErrNotFound, code: "not_found"},
		{name: "no such route", req: req{method: "GET", path: "/v1/nowhere"},
			kind: errdefs.ErrNotFound, code: "not_found"},
		{name: "tag taken", req: req{method: "POST", path: sp + s.ID + "/checkpoint", body: `{"tag":"taken"}`},
			kind: errdefs.ErrConflict, code: "conflict"},
		{name: "old revision", req: req{method: "POST", path: sp + s.ID + "/checkpoint", body: `{"tag":"late"}`, header: map[string]string{"If-Match": "999999"}},
			kind: errdefs.ErrRevision, code: "revision_mismatch"},
		{name: "body too large", req: req{method: "POST", path: "/v1/agents/sessions", body: `{"agent":"` + strings.Repeat("a", 2<<20) + `"}`},
			kind: errdefs.ErrTooLarge, code: "too_large"},
		{name: "key reused", before: &req{method: "POST", path: sp + s.ID + "/exec", body: `{"command":"true"}`, header: map[string]string{"Idempotency-Key": "errors-test"}},
			req:  req{method: "POST", path: sp + s.ID + "/exec", body: `{"command":"false"}`, header: map[string]string{"Idempotency-Key": "errors-test"}},
			kind: errdefs.ErrIdempotencyMismatch, code: "idempotency_mismatch"},
		{name: "held for approval", req: req{method: "POST", path: sp + ruled.ID + "/exec", body: `{"command":"touch /workspace/x"}`},
			kind: errdefs.ErrApprovalRequired, code: "approval_required", schema: "Held"},
		{name: "stream cap", req: req{method: "GET", path: sp + s.ID + "/events/stream"},
			kind: errdefs.ErrTooManyRequests, code: "event_streams_session", schema: "StreamLimited"},
		{name: "backend failure", req: req{method: "POST", path: "/v1/agents/sessions", body: fmt.Sprintf(`{"runtime":{"memory_mb":%d}}`, failMemoryMB)},
			kind: errdefs.ErrInternal, code: "internal"},
		{name: "agent unreachable", req: req{method: "POST", path: "/v1/agents/sessions", body: fmt.Sprintf(`{"runtime":{"memory_mb":%d},"workspace":{"require_ready":true}}`, deafMemoryMB)},
			kind: errdefs.ErrBadGateway, code: "bad_gateway"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			send := func(r req) (*http.Response, []byte) {
				t.Helper()
				var body io.Reader
				if r.body != "" {
					body = strings.NewReader(r.body)
				}
				hr, _ := http.NewRequest(r.method, d.url+r.path, body)
				if r.token == "" {
					r.token = token
				}
				hr.Header.Set("Authorization", "Bearer "+r.token)
				for k, v := range r.header {
					hr.Header.Set(k, v)
				}
				resp, err := http.DefaultClient.Do(hr)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
				return resp, data
			}
			if tc.before != nil {
				send(*tc.before)
			}
			resp, data := send(tc.req)
			var body map[string]any
			if err := json.Unmarshal(data, &body); err != nil {
				t.Fatalf("%d %q is not a JSON object", resp.StatusCode, data)
			}
			msg, _ := body["error"].(string)
			code, _ := body["code"].(string)
			if resp.StatusCode != errdefs.HTTPStatus(tc.kind) || code != tc.code || msg == "" {
				t.Fatalf("%d %q, want %d with code %s", resp.StatusCode, data, errdefs.HTTPStatus(tc.kind), tc.code)
			}
			schema := tc.schema
			if schema == "" {
				schema = "Error"
			}
			props, required, err := doc.flatten(asMap(doc.schemas()[schema]), 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range required {
				if _, ok := body[r]; !ok {
					t.Errorf("components/schemas/%s requires %s, which was not sent: %s", schema, r, data)
				}
			}
			for k := range body {
				if _, ok := props[k]; !ok {
					t.Errorf("sent %q, which components/schemas/%s does not have", k, schema)
				}
			}
			// The SDK's error for this answer is of the kind, and of no
			// other.
			var ce error = &client.Error{Status: resp.StatusCode, Code: code, Message: msg}
			for _, k := range errdefs.Kinds() {
				if errors.Is(ce, k.Err) != (k.Err == tc.kind) {
					t.Errorf("errors.Is(client.Error, %v) = %v", k.Err, !(k.Err == tc.kind))
				}
			}
		})
	}
	// The SDK decodes the answers itself too.
	if _, err := d.c.GetSession(ctx, "ses-0000000000000000"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("GetSession of no session: %v, want errdefs.ErrNotFound", err)
	}
	_, err = d.c.Exec(ctx, ruled.ID, session.ExecRequest{Command: "rm -rf /workspace"})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != "policy_refused" || !errors.Is(err, errdefs.ErrForbidden) {
		t.Errorf("a refused command: %v, want a client.Error with code policy_refused of kind forbidden", err)
	}
	if _, err := d.c.Checkpoint(ctx, s.ID, 999999, session.CheckpointRequest{Tag: "late"}); !errors.Is(err, errdefs.ErrRevision) {
		t.Errorf("an old revision: %v, want errdefs.ErrRevision", err)
	}
}

// TestErrorKindsCovered keeps TestErrorKinds whole: a kind added to
// errdefs must be provoked there or named in notThroughHTTP.
func TestErrorKindsCovered(t *testing.T) {
	covered := map[error]bool{
		errdefs.ErrInvalidArgument: true, errdefs.ErrUnauthenticated: true, errdefs.ErrForbidden: true,
		errdefs.ErrNotFound: true, errdefs.ErrConflict: true, errdefs.ErrRevision: true, errdefs.ErrTooLarge: true,
		errdefs.ErrIdempotencyMismatch: true, errdefs.ErrApprovalRequired: true, errdefs.ErrTooManyRequests: true,
		errdefs.ErrInternal: true, errdefs.ErrBadGateway: true,
	}
	for _, k := range errdefs.Kinds() {
		if !covered[k.Err] && !notThroughHTTP[k.Err] {
			t.Errorf("kind %s is neither provoked by TestErrorKinds nor listed in notThroughHTTP", k.Code)
		}
	}
}
