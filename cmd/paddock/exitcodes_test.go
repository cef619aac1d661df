package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"paddock.dev/paddock/errdefs"
	"paddock.dev/paddock/hypervisor"
)

// TestExitCodeFollowsCode runs `paddock session get` against a daemon
// that answers with an error body, and checks the exit code comes from
// the body's code: a status that disagrees with the code (a proxy in the
// way, a finer code) does not change it, and a body with no code falls
// back to the status.
func TestExitCodeFollowsCode(t *testing.T) {
	var status int
	var code string
	daemon := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		body := map[string]string{"error": "refused on purpose"}
		if code != "" {
			body["code"] = code
		}
		json.NewEncoder(w).Encode(body)
	}))
	defer daemon.Close()
	for _, tc := range []struct {
		status int
		code   string
		want   int
	}{
		{400, "invalid_argument", exitUsage},
		{413, "too_large", exitUsage},
		{404, "not_found", exitNotFound},
		{409, "conflict", exitConflict},
		{412, "revision_mismatch", exitConflict},
		{403, "forbidden", exitForbidden},
		{401, "unauthenticated", exitUnauthorized},
		{428, "approval_required", exitHeld},
		{422, "idempotency_mismatch", exitError},
		{429, "too_many_requests", exitError},
		{500, "internal", exitError},
		{502, "bad_gateway", exitError},
		// The code wins over the status.
		{400, "not_found", exitNotFound},
		{500, "conflict", exitConflict},
		// Finer codes are of their kind.
		{409, "disk_exhausted", exitConflict},
		{403, "budget_exceeded", exitForbidden},
		{400, "memory_above_host", exitUsage},
		// No code (an older daemon, a proxy's page): the status.
		{404, "", exitNotFound},
		{403, "", exitForbidden},
		{503, "", exitError},
	} {
		t.Run(fmt.Sprintf("%d %s", tc.status, tc.code), func(t *testing.T) {
			status, code = tc.status, tc.code
			root := newRoot()
			var out, errOut bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&errOut)
			root.SetArgs([]string{"session", "get", "ses-1", "--url", daemon.URL, "--token", "pdk_fake"})
			err := root.Execute()
			if got := exitCode(err); got != tc.want {
				t.Errorf("exit code %d, want %d (err %v)", got, tc.want, err)
			}
		})
	}
}

// The CLI's own refusals and a backend's sentinels exit by their kind.
func TestExitCodeOfLocalErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, exitOK},
		{exitCodeError(42), 42},
		{usageError{fmt.Errorf("bad flag")}, exitUsage},
		{notFoundError{fmt.Errorf("no tenant x")}, exitNotFound},
		{conflictError{fmt.Errorf("tenant x exists")}, exitConflict},
		{fmt.Errorf("run: %w", hypervisor.ErrNotFound), exitNotFound},
		{fmt.Errorf("run: %w", hypervisor.ErrStopped), exitConflict},
		{fmt.Errorf("run: %w", hypervisor.ErrNotSupported), exitConflict},
		{fmt.Errorf("run: %w", hypervisor.ErrInvalidSpec), exitUsage},
		{fmt.Errorf("plain failure"), exitError},
		{fmt.Errorf("%w: boom", errdefs.ErrInternal), exitError},
	} {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}
