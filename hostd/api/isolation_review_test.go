package api_test

import (
	"bytes"
	"context"
	"sort"
	"strings"
	"testing"

	"paddock.dev/paddock/client"
	"paddock.dev/paddock/hostd/api"
	"paddock.dev/paddock/hostd/session"
)

// TestReviewTenantIsolationAllRoutes: every session route, called by
// tenant beta on acme's session and on a made-up id, answers the same
// status, headers and body (the id swapped).
func TestReviewTenantIsolationAllRoutes(t *testing.T) {
	d := fakeDaemon(t)
	toks := withTenants(t, d, "acme", "beta")
	ctx := context.Background()
	acmeC := client.New(d.url, toks["acme"])
	sa, err := acmeC.CreateSession(ctx, session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	defer d.c.DeleteSession(ctx, sa.ID)
	const madeUp = "ses-0123456789abcdef"
	bodies := map[string]any{
		"exec":       map[string]any{"command": "echo hi"},
		"checkpoint": map[string]any{"tag": "x"},
		"restore":    map[string]any{"tag": "x"},
		"fork":       map[string]any{"count": 1},
		"jobs":       map[string]any{"command": "echo hi"},
		"stdin":      map[string]any{"text": "x"},
		"commit":     map[string]any{"message": "m"},
		"branch":     map[string]any{"name": "b"},
		"content":    map[string]any{"path": "/workspace/a", "content_base64": ""},
		"uploads":    map[string]any{"path": "/workspace/a", "size": 1},
		"grants":     map[string]any{"hosts": []string{"example.com"}, "header": "Authorization", "value": "Bearer x"},
		"tokens":     map[string]any{"ops": []string{"exec"}},
		"approve":    map[string]any{},
		"deny":       map[string]any{},
		"complete":   map[string]any{},
		"stream":     map[string]any{"command": "echo hi"},
		"replay":     map[string]any{"dry_run": true},
	}
	var routes []string
	for r := range api.RouteAccess() {
		if strings.Contains(r, "/v1/agents/sessions/{id}") {
			routes = append(routes, r)
		}
	}
	sort.Strings(routes)
	for _, r := range routes {
		method, pat, _ := strings.Cut(r, " ")
		path := strings.NewReplacer("{job}", "job-0123456789abcdef", "{upload}", "upl-0123456789abcdef",
			"{approval}", "apr-0123456789abcdef", "{token}", "tok-0123456789abcdef", "{grant}", "grt-0123456789abcdef").Replace(pat)
		q := ""
		if strings.Contains(path, "/files") || strings.Contains(path, "/git/") {
			q = "?path=/workspace"
		}
		last := path[strings.LastIndex(path, "/")+1:]
		var body any
		if method == "POST" || method == "PUT" {
			body = bodies[last]
		}
		if method == "PUT" && strings.Contains(path, "/uploads/") {
			q = "?offset=0"
		}
		real := as(t, d.url, toks["beta"], method, strings.Replace(path, "{id}", sa.ID, 1)+q, body)
		fake := as(t, d.url, toks["beta"], method, strings.Replace(path, "{id}", madeUp, 1)+q, body)
		rb := bytes.ReplaceAll(real.body, []byte(sa.ID), []byte("ID"))
		fb := bytes.ReplaceAll(fake.body, []byte(madeUp), []byte("ID"))
		t.Logf("%s → %d %s", r, real.status, bytes.TrimSpace(real.body))
		if real.status != fake.status || !bytes.Equal(rb, fb) || real.header.Get("Content-Type") != fake.header.Get("Content-Type") {
			t.Errorf("%s: another tenant's session %d %q\n   made-up id %d %q", r, real.status, real.body, fake.status, fake.body)
		}
	}
	if s, err := acmeC.GetSession(ctx, sa.ID); err != nil || s.State != session.StateRunning {
		t.Errorf("acme's session after beta's calls: %+v %v", s, err)
	}
}
