package api_test

import (
	"encoding/json"
	"net/http"
	"testing"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
)

// TestToolReadPath: an mcp.read entry records the path of the query only
// for a route that takes one: a made-up ?path= on a route that reads no
// file is not written into the ledger.
func TestToolReadPath(t *testing.T) {
	d := fakeDaemon(t)
	ctx := t.Context()
	s, err := d.c.CreateSession(ctx, apiv1.CreateRequest{Agent: "tool"})
	if err != nil {
		t.Fatal(err)
	}
	read := func(route string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.url+"/v1/agents/sessions/"+s.ID+route, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set(client.ToolHeader, "session_get")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", route, resp.StatusCode)
		}
	}
	read("?path=/made/up/by/the/caller")
	read("/files?path=/workspace")
	es, err := d.c.Events(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range es {
		if e.Kind != "mcp.read" {
			continue
		}
		var data struct {
			Route string `json:"route"`
			Path  string `json:"path"`
		}
		json.Unmarshal(e.Data, &data)
		got[data.Route] = data.Path
	}
	if p, ok := got["GET /v1/agents/sessions/{id}"]; !ok || p != "" {
		t.Errorf("a route that takes no path: entry %v, path %q", ok, p)
	}
	if p := got["GET /v1/agents/sessions/{id}/files"]; p != "/workspace" {
		t.Errorf("a file listing's entry has path %q, want /workspace", p)
	}
}
