package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
)

// TestToolHeader: a request naming its tool in Mcp-Tool gets the name
// recorded as mcp_tool in the ledger entry it causes; a request without
// it records none; a header that is not a tool name (too long, spaces, two
// values) is refused with 400 invalid_argument before anything runs.
func TestToolHeader(t *testing.T) {
	d := fakeDaemon(t)
	ctx := t.Context()
	s, err := d.c.CreateSession(ctx, apiv1.CreateRequest{Agent: "tool"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Exec(client.WithTool(ctx, "session_exec"), s.ID, apiv1.ExecRequest{Command: "echo tooled"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Exec(ctx, s.ID, apiv1.ExecRequest{Command: "echo plain"}); err != nil {
		t.Fatal(err)
	}
	// A read by a tool is recorded (route and path, never content); the
	// same read without the header is not.
	if _, err := d.c.GetSession(client.WithTool(ctx, "session_get"), s.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.GetSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	es, err := d.c.Events(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	var tooled, plain string
	reads := 0
	for _, e := range es {
		if e.Kind == "mcp.read" {
			reads++
			var data struct {
				Route string `json:"route"`
				Tool  string `json:"mcp_tool"`
			}
			if json.Unmarshal(e.Data, &data); data.Route != "GET /v1/agents/sessions/{id}" || data.Tool != "session_get" {
				t.Errorf("mcp.read entry: %s", e.Data)
			}
		}
		var data struct {
			Command string `json:"command"`
			Tool    string `json:"mcp_tool"`
		}
		json.Unmarshal(e.Data, &data)
		switch {
		case e.Kind == "exec" && data.Command == "echo tooled":
			tooled = data.Tool
		case e.Kind == "exec" && data.Command == "echo plain":
			plain = data.Tool + "(none)"
		}
	}
	if reads != 1 {
		t.Errorf("%d mcp.read entries for one read by a tool", reads)
	}
	if tooled != "session_exec" || plain != "(none)" {
		t.Errorf("ledger tool notes: tooled %q, plain %q", tooled, plain)
	}

	// A sandbox's file read by a tool is recorded in the sandbox's ledger.
	sb, err := d.c.CreateSandbox(ctx, apiv1.SandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.SandboxWriteFile(ctx, sb.ID, "/workspace/f.txt", []byte("sandbox content"), ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.c.SandboxReadFile(client.WithTool(ctx, "sandbox_read_file"), sb.ID, "/workspace/f.txt"); err != nil {
		t.Fatal(err)
	}
	ses, err := d.led.List(ctx, sb.ID, 0, 0) // a sandbox's ledger has no route
	if err != nil {
		t.Fatal(err)
	}
	var sbRead string
	for _, e := range ses {
		if e.Kind == "mcp.read" {
			sbRead = string(e.Data)
		}
	}
	if !strings.Contains(sbRead, `"POST /v1/sandboxes/{id}/fs/read"`) || !strings.Contains(sbRead, `"sandbox_read_file"`) || strings.Contains(sbRead, "sandbox content") {
		t.Errorf("sandbox read entry: %q", sbRead)
	}

	for _, bad := range [][]string{{strings.Repeat("a", 65)}, {"rm -rf"}, {"a", "b"}, {""}} {
		req, _ := http.NewRequest(http.MethodPost, d.url+"/v1/agents/sessions/"+s.ID+"/exec", bytes.NewReader([]byte(`{"command":"echo bad"}`)))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header[client.ToolHeader] = bad
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct{ Code string }
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || body.Code != "invalid_argument" {
			t.Errorf("header %q: %d %q", bad, resp.StatusCode, body.Code)
		}
	}
	es2, _ := d.c.Events(ctx, s.ID)
	for _, e := range es2 {
		if strings.Contains(string(e.Data), "echo bad") {
			t.Errorf("a refused request ran: %s", e.Data)
		}
	}
}
