package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
	"paddock.dev/paddock/egress/rules"
	"paddock.dev/paddock/hostd/api/routes"
)

// TestPolicyCompileAgreesWithCreate: for each policy, POST
// /v1/policy/compile says ok exactly when a create with it succeeds, and
// its first refusal has the status and code the create answers. Compile
// itself creates nothing.
func TestPolicyCompileAgreesWithCreate(t *testing.T) {
	d := fakeDaemon(t)
	ctx := context.Background()
	allow := func(hosts ...string) *apiv1.Network {
		n := &apiv1.Network{Default: "deny"}
		for _, h := range hosts {
			n.Allow = append(n.Allow, apiv1.AllowEntry{Host: h})
		}
		return n
	}
	many := make([]string, rules.MaxAllowEntries+1)
	for i := range many {
		many[i] = fmt.Sprintf("h%d.example.com", i)
	}
	for _, c := range []struct {
		name    string
		req     apiv1.PolicyCompileRequest
		ok      bool
		network string
		says    string // in the first refusal
	}{
		{"none", apiv1.PolicyCompileRequest{}, true, "offline", ""},
		{"offline preset", apiv1.PolicyCompileRequest{Policy: &apiv1.PolicyRequest{PolicyInput: apiv1.PolicyInput{Preset: "offline"}}}, true, "offline", ""},
		{"allowlist without egress", apiv1.PolicyCompileRequest{Policy: &apiv1.PolicyRequest{PolicyInput: apiv1.PolicyInput{Network: allow("example.com")}}}, false, "", "serves no egress"},
		{"best effort without egress", apiv1.PolicyCompileRequest{Policy: &apiv1.PolicyRequest{PolicyInput: apiv1.PolicyInput{Network: func() *apiv1.Network {
			n := allow("example.com")
			n.Enforcement = "best-effort"
			return n
		}()}}}, true, "offline", ""},
		{"bad host", apiv1.PolicyCompileRequest{Policy: &apiv1.PolicyRequest{PolicyInput: apiv1.PolicyInput{Network: allow("exa mple.com")}}}, false, "", "policy"},
		{"too many hosts", apiv1.PolicyCompileRequest{Policy: &apiv1.PolicyRequest{PolicyInput: apiv1.PolicyInput{Network: allow(many...)}}}, false, "", fmt.Sprint(rules.MaxAllowEntries)},
		{"process ask", apiv1.PolicyCompileRequest{Policy: &apiv1.PolicyRequest{Process: &apiv1.ProcessRules{Ask: []string{"git push*"}}}}, true, "offline", ""},
		{"exec enforcement without confinement", apiv1.PolicyCompileRequest{Policy: &apiv1.PolicyRequest{Process: &apiv1.ProcessRules{Allow: []string{"ls"}, Enforce: "exec"}}}, false, "offline", "Landlock"},
		{"exec enforcement with a pattern", apiv1.PolicyCompileRequest{Policy: &apiv1.PolicyRequest{Process: &apiv1.ProcessRules{Allow: []string{"ls*"}, Enforce: "exec"}}}, false, "offline", "literally"},
		{"unknown backend", apiv1.PolicyCompileRequest{Backend: "nope"}, false, "offline", "runtime.backend"},
		{"backend name too long", apiv1.PolicyCompileRequest{Backend: strings.Repeat("b", 65)}, false, "offline", "at most"},
		{"too many process rules", apiv1.PolicyCompileRequest{Policy: &apiv1.PolicyRequest{Process: &apiv1.ProcessRules{Allow: many}}}, false, "offline", "policy.process"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before, err := d.c.ListSessions(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got, err := d.c.CompilePolicy(ctx, c.req)
			if err != nil {
				t.Fatal(err)
			}
			after, _ := d.c.ListSessions(ctx)
			if len(after) != len(before) {
				t.Fatalf("compile made a session (%d, then %d)", len(before), len(after))
			}
			if got.OK != c.ok || got.Network != c.network || got.OK != (len(got.Refusals) == 0) {
				t.Fatalf("compile: %+v, want ok %v network %q", got, c.ok, c.network)
			}
			if c.ok && (got.Policy == nil || got.Policy.Mode == "") {
				t.Errorf("an accepted policy without its compiled form: %+v", got)
			}
			if !c.ok && !strings.Contains(got.Refusals[0].Error, c.says) {
				t.Errorf("first refusal %+v, want it to name %q", got.Refusals[0], c.says)
			}
			// The same policy through a real create.
			cr := apiv1.CreateRequest{TTLSeconds: 60, Policy: c.req.Policy, Runtime: apiv1.Runtime{Backend: c.req.Backend}}
			s, err := d.c.CreateSession(ctx, cr)
			if c.ok {
				if err != nil {
					t.Fatalf("compile said ok, create refused: %v", err)
				}
				if s.Policy.Mode != got.Policy.Mode || s.Policy.Enforcement != got.Policy.Enforcement || fmt.Sprint(s.Policy.Unenforced) != fmt.Sprint(got.Policy.Unenforced) {
					t.Errorf("create recorded %+v, compile showed %+v", s.Policy, *got.Policy)
				}
				d.c.DeleteSession(ctx, s.ID)
				return
			}
			var ce *client.Error
			if !errors.As(err, &ce) {
				t.Fatalf("compile refused, create answered %v", err)
			}
			if r := got.Refusals[0]; r.Status != ce.Status || r.Code != ce.Code {
				t.Errorf("compile's refusal %d %s, create's %d %s (%s)", r.Status, r.Code, ce.Status, ce.Code, ce.Message)
			}
		})
	}
}

// TestPolicyCompileAccess: admin and tenant tokens may ask, a session
// token may not (it cannot create), nor a caller with no token; a body
// that is not a policy is a 400 and one over the route's limit a 413.
func TestPolicyCompileAccess(t *testing.T) {
	d := fakeDaemon(t)
	toks := withTenants(t, d, "acme", "other")
	ctx := context.Background()
	s, err := client.New(d.url, toks["acme"]).CreateSession(ctx, apiv1.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	_, st := mint(t, d.url, toks["acme"], s.ID, map[string]any{"ops": []string{"read", "exec"}})
	body := map[string]any{"policy": map[string]any{"preset": "offline"}}
	for _, c := range []struct {
		who, tok string
		status   int
	}{
		{"admin", token, 200}, {"tenant", toks["acme"], 200}, {"other tenant", toks["other"], 200},
		{"session token", st.Token, 403}, {"no token", "", 401},
	} {
		a := as(t, d.url, c.tok, "POST", "/v1/policy/compile", body)
		if a.status != c.status {
			t.Errorf("%s: %d %s, want %d", c.who, a.status, a.body, c.status)
		}
	}
	// Another tenant's compile says nothing of acme's sessions: the
	// answer names no session at all.
	if a := as(t, d.url, toks["other"], "POST", "/v1/policy/compile", body); strings.Contains(string(a.body), s.ID) {
		t.Errorf("a compile answer names a session: %s", a.body)
	}
	for _, c := range []struct {
		name   string
		body   string
		status int
		code   string
	}{
		{"unknown field", `{"policy":{"preset":"offline"},"image":"x"}`, 400, "invalid_argument"},
		{"unknown policy field", `{"policy":{"presets":"offline"}}`, 400, "invalid_argument"},
		{"not JSON", `{"policy":`, 400, "invalid_argument"},
		{"over the limit", `{"backend":"` + strings.Repeat("a", routes.JSONBody) + `"}`, 413, ""},
	} {
		req, _ := http.NewRequest("POST", d.url+"/v1/policy/compile", strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer "+toks["acme"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e struct{ Error, Code string }
		json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != c.status || (c.code != "" && e.Code != c.code) {
			t.Errorf("%s: %d %s %q, want %d %s", c.name, resp.StatusCode, e.Code, e.Error, c.status, c.code)
		}
	}
}
