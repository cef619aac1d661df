package client

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"paddock.dev/paddock/api"
)

// TestSessionObjectRoutes: each Session method sends exactly the request
// its Client counterpart sends for the same id (the id path-escaped, no
// If-Match), the file and job verbs send the routes, queries and bodies
// the API documents, Fork hands back one Session per child in order, and
// Close is quiet about a session already gone (404) but not about other
// refusals. TestSessionObjectLive (hostd/daemon) drives the same methods
// through a real daemon.
func TestSessionObjectRoutes(t *testing.T) {
	type seen struct{ method, uri, ifMatch, body string }
	var got []seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, seen{r.Method, r.URL.RequestURI(), r.Header.Get("If-Match"), string(b)})
		switch {
		case r.Method == http.MethodDelete && strings.HasSuffix(r.URL.Path, "/gone"):
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error":"no such session","code":"not_found"}`))
		case r.Method == http.MethodDelete && strings.HasSuffix(r.URL.Path, "/held"):
			w.WriteHeader(http.StatusConflict)
			w.Write([]byte(`{"error":"busy","code":"conflict"}`))
		case strings.HasSuffix(r.URL.Path, "/fork"):
			w.Write([]byte(`{"children":[{"id":"kid-a","parent":"ses/1"},{"id":"kid-b","parent":"ses/1"}]}`))
		case strings.HasSuffix(r.URL.Path, "/files/content") && r.Method == http.MethodGet:
			json.NewEncoder(w).Encode(api.FileRead{ContentBase64: base64.StdEncoding.EncodeToString([]byte("bytes\x00here"))})
		default:
			w.Write([]byte(`{}`))
		}
	}))
	defer srv.Close()
	c := New(srv.URL, "pdk_test")
	ctx := context.Background()
	const id = "ses/1"
	s := c.Session(id)
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

	// Each pair: the Session method and the Client call it stands for.
	for _, tc := range []struct {
		name       string
		obj, plain func() error
	}{
		{"Exec", func() error { _, err := s.Exec(ctx, api.ExecRequest{Command: "ls", TimeoutSeconds: 7}); return err },
			func() error { _, err := c.Exec(ctx, id, api.ExecRequest{Command: "ls", TimeoutSeconds: 7}); return err }},
		{"Run", func() error { _, err := s.Run(ctx, "ls -l"); return err },
			func() error { _, err := c.Exec(ctx, id, api.ExecRequest{Command: "ls -l"}); return err }},
		{"Refresh", func() error { _, err := s.Refresh(ctx); return err },
			func() error { _, err := c.GetSession(ctx, id); return err }},
		{"Delete", func() error { return s.Delete(ctx) }, func() error { return c.DeleteSession(ctx, id) }},
		{"Checkpoint", func() error { _, err := s.Checkpoint(ctx, api.CheckpointRequest{Tag: "t1"}); return err },
			func() error { _, err := c.Checkpoint(ctx, id, -1, api.CheckpointRequest{Tag: "t1"}); return err }},
		{"Restore", func() error { _, err := s.Restore(ctx, "t1"); return err },
			func() error { _, err := c.Restore(ctx, id, -1, "t1"); return err }},
		{"Fork", func() error { _, err := s.Fork(ctx, 2); return err },
			func() error { _, err := c.Fork(ctx, id, -1, 2); return err }},
		{"ForkWith", func() error {
			_, _, err := s.ForkWith(ctx, api.ForkRequest{Count: 2, Identity: "unique", From: "t1"})
			return err
		}, func() error {
			_, err := c.ForkWith(ctx, id, -1, api.ForkRequest{Count: 2, Identity: "unique", From: "t1"})
			return err
		}},
		{"Promote", func() error {
			_, err := s.Promote(ctx, api.PromoteRequest{DryRun: true, Paths: []string{"a"}})
			return err
		},
			func() error {
				_, err := c.Promote(ctx, id, api.PromoteRequest{DryRun: true, Paths: []string{"a"}})
				return err
			}},
		{"Replay", func() error { _, err := s.Replay(ctx, api.ReplayRequest{DryRun: true}); return err },
			func() error { _, err := c.Replay(ctx, id, api.ReplayRequest{DryRun: true}); return err }},
		{"Rewind", func() error { _, err := s.Rewind(ctx); return err }, func() error { _, err := c.Rewind(ctx, id); return err }},
		{"RewindConfig", func() error {
			on := true
			_, err := s.RewindConfig(ctx, api.RewindConfigRequest{Enabled: &on})
			return err
		},
			func() error {
				on := true
				_, err := c.RewindConfig(ctx, id, api.RewindConfigRequest{Enabled: &on})
				return err
			}},
		{"RewindUndo", func() error { _, err := s.RewindUndo(ctx, api.RewindUndoRequest{To: "p3"}); return err },
			func() error { _, err := c.RewindUndo(ctx, id, api.RewindUndoRequest{To: "p3"}); return err }},
		{"RewindPin", func() error { _, err := s.RewindPin(ctx, "p3", true); return err },
			func() error { _, err := c.RewindPin(ctx, id, "p3", true); return err }},
		{"RewindBisect", func() error { _, err := s.RewindBisect(ctx, api.RewindBisectRequest{Test: "make"}); return err },
			func() error { _, err := c.RewindBisect(ctx, id, api.RewindBisectRequest{Test: "make"}); return err }},
		{"RewindBranch", func() error { _, err := s.RewindBranch(ctx, api.RewindBranchRequest{Tag: "p3", Count: 2}); return err },
			func() error {
				_, err := c.RewindBranch(ctx, id, api.RewindBranchRequest{Tag: "p3", Count: 2})
				return err
			}},
		{"Speculate", func() error { _, err := s.Speculate(ctx, api.SpeculateRequest{Command: "x"}); return err },
			func() error { _, err := c.Speculate(ctx, id, api.SpeculateRequest{Command: "x"}); return err }},
		{"Changesets", func() error { _, err := s.Changesets(ctx); return err },
			func() error { _, err := c.Changesets(ctx, id); return err }},
		{"Changeset", func() error { _, err := s.Changeset(ctx, "cs-1"); return err },
			func() error { _, err := c.Changeset(ctx, id, "cs-1"); return err }},
		{"DecideChangeset", func() error {
			_, err := s.DecideChangeset(ctx, "cs-1", api.ChangesetDecision{Decision: "accept"})
			return err
		}, func() error {
			_, err := c.DecideChangeset(ctx, id, "cs-1", api.ChangesetDecision{Decision: "accept"})
			return err
		}},
		{"ApplyChangeset", func() error { _, err := s.ApplyChangeset(ctx, "cs-1"); return err },
			func() error { _, err := c.ApplyChangeset(ctx, id, "cs-1"); return err }},
		{"Events", func() error { _, err := s.Events(ctx); return err }, func() error { _, err := c.Events(ctx, id); return err }},
		{"EventsSince", func() error { _, err := s.EventsSince(ctx, since); return err },
			func() error { _, err := c.EventsSince(ctx, id, since); return err }},
		{"Artifacts", func() error { _, err := s.Artifacts(ctx); return err },
			func() error { _, err := c.Artifacts(ctx, id); return err }},
		{"Approvals", func() error { _, err := s.Approvals(ctx); return err },
			func() error { _, err := c.Approvals(ctx, id); return err }},
	} {
		got = nil
		if err := tc.obj(); err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		obj := got
		got = nil
		if err := tc.plain(); err != nil {
			t.Fatalf("%s through the Client: %v", tc.name, err)
		}
		if len(obj) != 1 || len(got) != 1 || obj[0] != got[0] || !strings.HasPrefix(obj[0].uri, "/v1/agents/sessions/ses%2F1") {
			t.Errorf("%s sent %+v, the Client method sends %+v", tc.name, obj, got)
		}
	}

	// The file and job verbs have no Client method of their own: their
	// requests as the API documents them.
	f, j := s.Files(), s.Jobs()
	for _, tc := range []struct {
		name string
		call func() error
		want seen
	}{
		{"Files.Read", func() error {
			b, err := f.Read(ctx, "/workspace/a b")
			if err == nil && string(b) != "bytes\x00here" {
				t.Errorf("Files.Read decoded %q", b)
			}
			return err
		}, seen{"GET", "/v1/agents/sessions/ses%2F1/files/content?path=%2Fworkspace%2Fa+b", "", ""}},
		{"Files.Write", func() error { _, err := f.Write(ctx, "/workspace/a", []byte("hi"), "0600"); return err },
			seen{"PUT", "/v1/agents/sessions/ses%2F1/files/content", "", `{"path":"/workspace/a","content_base64":"aGk=","mode":"0600","parents":true}`}},
		{"Files.List", func() error { _, err := f.List(ctx, "/workspace"); return err },
			seen{"GET", "/v1/agents/sessions/ses%2F1/files?path=%2Fworkspace", "", ""}},
		{"Files.Delete", func() error { return f.Delete(ctx, "/workspace/d", true) },
			seen{"DELETE", "/v1/agents/sessions/ses%2F1/files?path=%2Fworkspace%2Fd&recursive=true", "", ""}},
		{"Jobs.Start", func() error { _, err := j.Start(ctx, api.JobStart{Command: "sleep 1", Stdin: true}); return err },
			seen{"POST", "/v1/agents/sessions/ses%2F1/jobs", "", `{"command":"sleep 1","stdin":true}`}},
		{"Jobs.List", func() error { _, err := j.List(ctx); return err },
			seen{"GET", "/v1/agents/sessions/ses%2F1/jobs", "", ""}},
		{"Jobs.Read", func() error { _, err := j.Read(ctx, "j/1", 5, 6, 1500*time.Millisecond); return err },
			seen{"GET", "/v1/agents/sessions/ses%2F1/jobs/j%2F1?offset=5&stderr_offset=6&wait_ms=1500", "", ""}},
		{"Jobs.Stdin", func() error { _, err := j.Stdin(ctx, "j1", api.JobStdin{Text: "x\n", Close: true}); return err },
			seen{"POST", "/v1/agents/sessions/ses%2F1/jobs/j1/stdin", "", `{"text":"x\n","close":true}`}},
		{"Jobs.Kill", func() error { _, err := j.Kill(ctx, "j1", "KILL"); return err },
			seen{"DELETE", "/v1/agents/sessions/ses%2F1/jobs/j1?signal=KILL", "", ""}},
	} {
		got = nil
		err := tc.call()
		if err != nil || len(got) != 1 || got[0] != tc.want {
			t.Errorf("%s: sent %+v (%v), want %+v", tc.name, got, err, tc.want)
		}
	}
	if _, err := f.Write(ctx, "/workspace/big", make([]byte, api.MaxFileWriteBytes+1), ""); err == nil {
		t.Error("a write over the limit of one write went ahead")
	}

	kids, fr, err := s.ForkWith(ctx, api.ForkRequest{Count: 2})
	if err != nil || len(kids) != 2 || kids[0].ID != "kid-a" || kids[1].ID != "kid-b" || kids[1].Info != fr.Children[1] || kids[0].Client() != c {
		t.Errorf("fork: %+v %+v %v", kids, fr, err)
	}

	if err := c.Session("gone").Close(); err != nil {
		t.Errorf("Close of a session already gone: %v", err)
	}
	if err := c.Session("held").Close(); err == nil {
		t.Error("Close hid a 409")
	}
}
