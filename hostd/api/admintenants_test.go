package api_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
	"paddock.dev/paddock/hostd/auth"
)

// TestAdminTenants: GET /v1/admin/tenants shows the admin every tenant in
// file order with its limits (default_limits filled in) and how many
// sessions it has, and never a token or its hash; tenant and session
// tokens are refused, and a caller with none.
func TestAdminTenants(t *testing.T) {
	d := fakeDaemon(t)
	ctx := context.Background()
	// No tenants file: an empty list, not null.
	if a := as(t, d.url, token, "GET", "/v1/admin/tenants", nil); a.status != 200 || !strings.Contains(string(a.body), `"tenants": []`) {
		t.Errorf("no tenants: %d %s", a.status, a.body)
	}
	toks := map[string]string{}
	var sums []string
	tf := auth.TenantsFile{DefaultLimits: &auth.Limits{MemoryMB: 4096}}
	for _, n := range []string{"zeta", "acme"} {
		tok, sum := auth.NewTenantToken()
		toks[n] = tok
		sums = append(sums, sum)
		e := auth.TenantEntry{Name: n, TokenSHA256: sum}
		if n == "acme" {
			e.Limits = &auth.Limits{CPUs: 3}
		}
		tf.Tenants = append(tf.Tenants, e)
	}
	ts, err := tf.Check()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.api.Verifier().SetTenants(ts); err != nil {
		t.Fatal(err)
	}
	acme := client.New(d.url, toks["acme"])
	s, err := acme.CreateSession(ctx, apiv1.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := acme.CreateSession(ctx, apiv1.CreateRequest{TTLSeconds: 600}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.CreateSession(ctx, apiv1.CreateRequest{TTLSeconds: 600}); err != nil { // the admin's own: no tenant
		t.Fatal(err)
	}
	a := as(t, d.url, token, "GET", "/v1/admin/tenants", nil)
	var got apiv1.TenantList
	if err := json.Unmarshal(a.body, &got); err != nil || a.status != 200 {
		t.Fatalf("%d %s %v", a.status, a.body, err)
	}
	want := []apiv1.TenantInfo{
		{Name: "zeta", Limits: apiv1.TenantLimits{MemoryMB: 4096}, Sessions: 0},
		{Name: "acme", Limits: apiv1.TenantLimits{MemoryMB: 4096, CPUs: 3}, Sessions: 2},
	}
	if gb, wb := string(mustJSON(got.Tenants)), string(mustJSON(want)); gb != wb {
		t.Errorf("tenants %s, want %s", gb, wb)
	}
	for _, secret := range append(sums, toks["acme"], toks["zeta"]) {
		if strings.Contains(string(a.body), secret) {
			t.Errorf("the tenants list shows a token or its hash: %s", a.body)
		}
	}
	// The SDK reads the same.
	if l, err := d.c.Tenants(ctx); err != nil || len(l.Tenants) != 2 {
		t.Errorf("client Tenants: %+v %v", l, err)
	}
	_, st := mint(t, d.url, toks["acme"], s.ID, map[string]any{"ops": auth.GrantableOps()})
	for _, c := range []struct {
		who, tok string
		status   int
	}{{"tenant", toks["acme"], 403}, {"other tenant", toks["zeta"], 403}, {"session token", st.Token, 403}, {"no token", "", 401}} {
		if a := as(t, d.url, c.tok, "GET", "/v1/admin/tenants", nil); a.status != c.status || strings.Contains(string(a.body), "zeta") {
			t.Errorf("%s: %d %s, want %d", c.who, a.status, a.body, c.status)
		}
	}
}
