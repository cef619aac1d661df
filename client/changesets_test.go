package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"paddock.dev/paddock/api"
	"paddock.dev/paddock/errdefs"
)

// TestChangesetRoutes: each speculation method sends its method and route
// (ids escaped, session and sandbox routes apart) with the body it was
// given, decodes the answer (file contents as bytes), and a 409 refusal
// of apply comes back as a conflict with the server's code. The live
// tests (cmd/paddock TestCLISpeculate) hold the server to the same.
func TestChangesetRoutes(t *testing.T) {
	type seen struct{ method, path, body string }
	var got seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = seen{r.Method, r.URL.EscapedPath(), string(b)}
		switch {
		case r.URL.Path == "/v1/sandboxes/sbx 1/changesets/cs-9/apply":
			w.WriteHeader(http.StatusConflict)
			w.Write([]byte(`{"error":"/etc/x changed since","code":"changeset_conflict"}`))
		case r.Method == http.MethodGet && len(r.URL.Path) > 11 && r.URL.Path[len(r.URL.Path)-11:] == "/changesets":
			json.NewEncoder(w).Encode(api.ChangesetList{Changesets: []api.Changeset{{ID: "cs-1"}, {ID: "cs-2"}}})
		case r.URL.Path[len(r.URL.Path)-6:] == "/apply":
			json.NewEncoder(w).Encode(api.ApplyResult{Changeset: api.Changeset{ID: "cs-1", Status: api.ChangesetApplied}, Applied: []string{"/workspace/a"}})
		default:
			json.NewEncoder(w).Encode(api.Changeset{ID: "cs-1", Files: []api.ChangesetFile{{Path: "/workspace/a", Op: "added", Content: []byte("new\x00bytes")}}})
		}
	}))
	defer srv.Close()
	c := New(srv.URL, "pdk_test")
	ctx := context.Background()
	req := api.SpeculateRequest{Command: "echo new > a", Paths: []string{"a"}, TimeoutSeconds: 5}
	dec := api.ChangesetDecision{Decision: "reject", Reason: "not now"}

	for _, tc := range []struct {
		name string
		call func() (any, error)
		want seen
	}{
		{"Speculate", func() (any, error) { return c.Speculate(ctx, "ses/1", req) },
			seen{"POST", "/v1/agents/sessions/ses%2F1/speculate", `{"command":"echo new \u003e a","paths":["a"],"timeout_seconds":5}`}},
		{"Changesets", func() (any, error) { return c.Changesets(ctx, "ses-1") },
			seen{"GET", "/v1/agents/sessions/ses-1/changesets", ""}},
		{"Changeset", func() (any, error) { return c.Changeset(ctx, "ses-1", "cs/../x") },
			seen{"GET", "/v1/agents/sessions/ses-1/changesets/cs%2F..%2Fx", ""}},
		{"DecideChangeset", func() (any, error) { return c.DecideChangeset(ctx, "ses-1", "cs-1", dec) },
			seen{"POST", "/v1/agents/sessions/ses-1/changesets/cs-1/decide", `{"decision":"reject","reason":"not now"}`}},
		{"ApplyChangeset", func() (any, error) { return c.ApplyChangeset(ctx, "ses-1", "cs-1") },
			seen{"POST", "/v1/agents/sessions/ses-1/changesets/cs-1/apply", `{}`}},
		{"SandboxSpeculate", func() (any, error) { return c.SandboxSpeculate(ctx, "sbx-1", req) },
			seen{"POST", "/v1/sandboxes/sbx-1/speculate", `{"command":"echo new \u003e a","paths":["a"],"timeout_seconds":5}`}},
		{"SandboxChangesets", func() (any, error) { return c.SandboxChangesets(ctx, "sbx-1") },
			seen{"GET", "/v1/sandboxes/sbx-1/changesets", ""}},
		{"SandboxChangeset", func() (any, error) { return c.SandboxChangeset(ctx, "sbx-1", "cs-1") },
			seen{"GET", "/v1/sandboxes/sbx-1/changesets/cs-1", ""}},
		{"SandboxDecideChangeset", func() (any, error) { return c.SandboxDecideChangeset(ctx, "sbx-1", "cs-1", dec) },
			seen{"POST", "/v1/sandboxes/sbx-1/changesets/cs-1/decide", `{"decision":"reject","reason":"not now"}`}},
		{"SandboxApplyChangeset", func() (any, error) { return c.SandboxApplyChangeset(ctx, "sbx-1", "cs-1") },
			seen{"POST", "/v1/sandboxes/sbx-1/changesets/cs-1/apply", `{}`}},
	} {
		got = seen{}
		v, err := tc.call()
		if err != nil || got != tc.want {
			t.Errorf("%s: sent %+v (%v), want %+v", tc.name, got, err, tc.want)
			continue
		}
		switch v := v.(type) {
		case *api.Changeset:
			if v.ID != "cs-1" || len(v.Files) != 1 || string(v.Files[0].Content) != "new\x00bytes" {
				t.Errorf("%s: decoded %+v", tc.name, v)
			}
		case []api.Changeset:
			if len(v) != 2 || v[1].ID != "cs-2" {
				t.Errorf("%s: decoded %+v", tc.name, v)
			}
		case *api.ApplyResult:
			if v.Changeset.Status != api.ChangesetApplied || len(v.Applied) != 1 {
				t.Errorf("%s: decoded %+v", tc.name, v)
			}
		}
	}

	_, err := c.SandboxApplyChangeset(ctx, "sbx 1", "cs-9")
	var e *Error
	if !errors.As(err, &e) || e.Code != "changeset_conflict" || !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("a refused apply: %#v", err)
	}
}
