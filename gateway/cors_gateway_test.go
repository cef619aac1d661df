package gateway_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"paddock.dev/paddock/gateway/caddyfile"
)

// TestGatewayCORS runs the shipped local Caddyfile with one listed
// origin in front of hostd's real API handler: a listed page's preflight
// is answered 204 by the gateway without a token and never reaches
// hostd; its calls, and the gateway's own refusals (401, 413), carry
// Access-Control-Allow-Origin so the page can read them; an unlisted
// page's preflight meets the token check and gets no CORS header; preview
// paths get none.
func TestGatewayCORS(t *testing.T) {
	const app = "http://127.0.0.1:5173"
	h := startHostd(t)
	g := startGateway(t, h, func(o *caddyfile.Options) { o.CORSOrigins = []string{app} })
	pre := func(origin string) map[string]string {
		return map[string]string{"Origin": origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization,content-type"}
	}
	cors := func(hdr http.Header) map[string]string {
		out := map[string]string{}
		for k := range hdr {
			if strings.HasPrefix(k, "Access-Control-") {
				out[k] = strings.Join(hdr.Values(k), ", ")
			}
		}
		return out
	}

	t.Run("listed preflight", func(t *testing.T) {
		h.mu.Lock()
		n := len(h.seen)
		h.mu.Unlock()
		code, hdr, body := g.do(t, "OPTIONS", "/v1/agents/sessions", "", nil, pre(app))
		got := cors(hdr)
		if code != http.StatusNoContent || got["Access-Control-Allow-Origin"] != app || !strings.Contains(got["Access-Control-Allow-Headers"], "Authorization") ||
			!strings.Contains(got["Access-Control-Allow-Methods"], "POST") || got["Access-Control-Max-Age"] == "" {
			t.Errorf("preflight: %d %v %s", code, got, body)
		}
		if _, ok := got["Access-Control-Allow-Credentials"]; ok {
			t.Error("credentials allowed")
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if len(h.seen) != n {
			t.Errorf("the preflight reached hostd: %v", h.seen[n:])
		}
	})

	t.Run("listed calls", func(t *testing.T) {
		code, hdr, body := g.do(t, "GET", "/v1/whoami", adminToken, nil, map[string]string{"Origin": app})
		if code != 200 || hdr.Get("Access-Control-Allow-Origin") != app || !strings.Contains(hdr.Get("Access-Control-Expose-Headers"), "Idempotent-Replayed") {
			t.Errorf("whoami: %d %v %s", code, cors(hdr), body)
		}
		if !strings.Contains(strings.Join(hdr.Values("Vary"), ","), "Origin") {
			t.Errorf("whoami: Vary %q lacks Origin", hdr.Values("Vary"))
		}
		// The edge's own refusals are readable by the page too.
		code, hdr, _ = g.do(t, "GET", "/v1/agents/sessions", "", nil, map[string]string{"Origin": app})
		if code != http.StatusUnauthorized || hdr.Get("Access-Control-Allow-Origin") != app {
			t.Errorf("no token: %d %v", code, cors(hdr))
		}
		big := bytes.Repeat([]byte("x"), 3<<20)
		code, hdr, _ = g.do(t, "POST", "/v1/agents/sessions", adminToken, bytes.NewReader(big), map[string]string{"Origin": app, "Content-Type": "application/json"})
		if code != http.StatusRequestEntityTooLarge || hdr.Get("Access-Control-Allow-Origin") != app {
			t.Errorf("oversized body: %d %v", code, cors(hdr))
		}
		code, hdr, _ = g.do(t, "GET", "/healthz", "", nil, map[string]string{"Origin": app})
		if code != 200 || hdr.Get("Access-Control-Allow-Origin") != app {
			t.Errorf("healthz: %d %v", code, cors(hdr))
		}
	})

	t.Run("unlisted", func(t *testing.T) {
		for _, origin := range []string{"null", "http://127.0.0.1:5174", "https://127.0.0.1:5173", "http://localhost:5173", "http://127.0.0.1:5173.evil.test"} {
			code, hdr, _ := g.do(t, "OPTIONS", "/v1/agents/sessions", "", nil, pre(origin))
			if code != http.StatusUnauthorized || len(cors(hdr)) != 0 {
				t.Errorf("preflight from %s: %d %v, want the token check's 401 and no CORS header", origin, code, cors(hdr))
			}
			code, hdr, _ = g.do(t, "GET", "/v1/whoami", adminToken, nil, map[string]string{"Origin": origin})
			if code != 200 || len(cors(hdr)) != 0 {
				t.Errorf("call from %s: %d %v", origin, code, cors(hdr))
			}
		}
	})

	t.Run("previews", func(t *testing.T) {
		code, hdr, _ := g.do(t, "OPTIONS", "/preview/tok-1/", "", nil, pre(app))
		if len(cors(hdr)) != 0 {
			t.Errorf("a preview path: %d %v", code, cors(hdr))
		}
		if seen := h.lastSeen("/preview/tok-1/"); seen == nil {
			t.Error("the preview's OPTIONS did not reach hostd's preview proxy")
		}
	})
}
