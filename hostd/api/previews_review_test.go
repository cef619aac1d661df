package api_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"paddock.dev/paddock/hostd/daemon/daemontest"
	"paddock.dev/paddock/hostd/previews"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/workspace"
)

// earlyHintsServer answers /early with a 103 carrying Link (what Early
// Hints are for, which a preview passes on) and headers a preview must
// never pass on (they act on the daemon's origin), then 200 "ok".
const earlyHintsServer = `package main

import (
	"net/http"
	"os"
)

func main() {
	http.HandleFunc("/early", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Set-Cookie", "pwn=1; Path=/")
		w.Header().Set("Clear-Site-Data", "\"*\"")
		w.Header().Set("Link", "</style.css>; rel=preload; as=style")
		w.WriteHeader(http.StatusEarlyHints)
		for k := range w.Header() {
			delete(w.Header(), k)
		}
		w.Write([]byte("ok"))
	})
	http.ListenAndServe(os.Args[1], nil)
}
`

func buildReviewServer(t *testing.T, src string) []byte {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", "srv", "main.go")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=", "GO111MODULE=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	bin, err := os.ReadFile(filepath.Join(dir, "srv"))
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestReviewPreview covers two findings on one real sandbox:
//
//   - informational: a guest's 1xx response reaches the viewer with its
//     headers untouched (httputil.ReverseProxy forwards 1xx through
//     Got1xxResponse, which ModifyResponse never sees), so Set-Cookie and
//     Clear-Site-Data go out on the daemon's origin;
//   - delete-by-token: DELETE .../preview/{token} (the shape issue 6 and
//     the spec give) does not revoke, answers 404, and writes the live
//     token into hostd's request log.
func TestReviewPreview(t *testing.T) {
	// The daemon's log, read by "delete by token".
	logs := &syncBuf{}
	d := newTestDaemon(t, daemontest.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	ctx := context.Background()
	s, err := d.c.CreateSession(ctx, session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	bin := buildReviewServer(t, earlyHintsServer)
	if err := d.c.Call(ctx, "PUT", s.ID, "/files/content", nil, workspace.FileWrite{Path: "/tmp/early",
		ContentBase64: base64.StdEncoding.EncodeToString(bin), Mode: "0755"}, nil); err != nil {
		t.Fatal(err)
	}
	var job session.Job
	if err := d.c.Call(ctx, "POST", s.ID, "/jobs", nil, session.JobStart{Command: "/tmp/early 127.0.0.1:8000"}, &job); err != nil {
		t.Fatal(err)
	}
	p, err := d.c.CreatePreview(ctx, s.ID, previews.PreviewRequest{Port: 8000})
	if err != nil {
		t.Fatal(err)
	}
	base := d.c.PreviewURL(p)

	t.Run("1xx headers", func(t *testing.T) {
		var mu sync.Mutex
		var early []textproto.MIMEHeader
		var codes []int
		deadline := time.Now().Add(30 * time.Second)
		for {
			req, _ := http.NewRequest("GET", base+"early", nil)
			req = req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
				Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
					mu.Lock()
					early, codes = append(early, h), append(codes, code)
					mu.Unlock()
					return nil
				},
			}))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				if string(body) != "ok" {
					t.Errorf("the final answer after the 103: %q, want ok", body)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the server never came up: %d", resp.StatusCode)
			}
			time.Sleep(100 * time.Millisecond)
		}
		mu.Lock()
		defer mu.Unlock()
		// The 103 must arrive (what is checked is what a 1xx carries),
		// with its Link and nothing else of the guest's.
		if len(early) != 1 || codes[0] != http.StatusEarlyHints {
			t.Fatalf("1xx answers that reached the viewer: %v, want one 103", codes)
		}
		if v := early[0].Get("Link"); v != "</style.css>; rel=preload; as=style" {
			t.Errorf("the 103's Link: %q, want the guest's", v)
		}
		for _, h := range early {
			for _, name := range []string{"Set-Cookie", "Clear-Site-Data"} {
				if v := h.Values(name); len(v) > 0 {
					t.Errorf("a guest's 103 carried %s %q to the viewer on the daemon's origin", name, v)
				}
			}
		}
	})

	t.Run("delete by token", func(t *testing.T) {
		c := d.c
		// The preview serves before the delete, so a 404 after it is the
		// revocation's.
		if resp, body := get(t, "GET", base+"early", nil, nil); resp.StatusCode != 200 {
			t.Fatalf("before the delete the preview answered %d %q", resp.StatusCode, body)
		}
		if err := c.DeletePreview(ctx, s.ID, p.Token); err != nil {
			t.Errorf("DELETE .../preview/<token>: %v, want 204", err)
		}
		if resp, body := get(t, "GET", base+"early", nil, nil); resp.StatusCode != 404 {
			t.Errorf("after DELETE .../preview/<token> the preview answered %d %q, want 404", resp.StatusCode, body)
		}
		if ps, err := c.Previews(ctx, s.ID); err != nil || slices.ContainsFunc(ps, func(q previews.Preview) bool { return q.ID == p.ID }) {
			t.Errorf("previews after the delete: %+v %v, want %s gone", ps, err, p.ID)
		}
		if err := c.DeletePreview(ctx, s.ID, p.Token); status(err) != 404 {
			t.Errorf("a second DELETE with the token: %v, want 404", err)
		}
		// The log has the deletes, with the token redacted.
		log := logs.String()
		if strings.Contains(log, p.Token) || strings.Contains(log, strings.TrimPrefix(p.Token, previews.PreviewTokenPrefix)) {
			t.Errorf("DELETE .../preview/<token> wrote the live token into hostd's log:\n%s", log)
		}
		if n := strings.Count(log, "DELETE"); n != 2 || strings.Count(log, previews.PreviewTokenPrefix+"[redacted]") != 2 {
			t.Errorf("hostd's log should have both deletes with the token redacted (%d DELETE lines):\n%s", n, log)
		}
	})
}
