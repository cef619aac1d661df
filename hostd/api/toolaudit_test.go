package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
	"paddock.dev/paddock/hostd/api"
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

// TestToolReadFolded: a reader sending Mcp-Tool on 1000 GETs of one
// session adds a bounded number of mcp.read entries: the first read of
// each distinct (tool, route, path) at once, the repeats as one counted
// entry when the window closes, and distinct reads past the window's
// bound as one "other_reads" count. Every distinct tool still appears.
// (The timer's own close is TestToolReadWindowTimer's.)
func TestToolReadFolded(t *testing.T) {
	// A window longer than the test: it is closed by the test.
	defer api.SetReadFold(time.Hour, 8, 4096)()
	d := fakeDaemon(t)
	ctx := t.Context()
	s, err := d.c.CreateSession(ctx, apiv1.CreateRequest{Agent: "tool"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Exec(ctx, s.ID, apiv1.ExecRequest{Command: "for i in $(seq 3 19); do mkdir -p d$i; done"}); err != nil {
		t.Fatal(err)
	}
	before, err := d.c.Events(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	get := func(route, tool string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.url+"/v1/agents/sessions/"+s.ID+route, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set(client.ToolHeader, tool)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d", route, resp.StatusCode)
		}
	}
	const n = 1000
	var wg sync.WaitGroup
	jobs := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				switch {
				case i < 20: // distinct paths: past the window's bound of 8
					get("/files?path=/workspace/d"+strconv.Itoa(i), "session_files")
				default:
					get("", "session_get")
				}
			}
		}()
	}
	// The three tools' first reads go before the rest, one at a time: sent
	// to the workers they could lose the race to the distinct paths and
	// fall past the window's bound.
	for i := range 3 {
		get("", []string{"session_get", "session_events", "session_artifacts"}[i])
	}
	for i := 3; i < n; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	type read struct {
		Route, Path, Tool string
		Repeats, Other    int
	}
	reads := func() []read {
		es, err := d.c.Events(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		var out []read
		for _, e := range es[len(before):] {
			if e.Kind != "mcp.read" {
				continue
			}
			var data struct {
				Route   string `json:"route"`
				Path    string `json:"path"`
				Tool    string `json:"mcp_tool"`
				Repeats int    `json:"repeats"`
				Other   int    `json:"other_reads"`
			}
			json.Unmarshal(e.Data, &data)
			out = append(out, read{data.Route, data.Path, data.Tool, data.Repeats, data.Other})
		}
		return out
	}
	first := reads()
	if len(first) != 8 {
		t.Errorf("%d mcp.read entries during the window, want 8 (the bound of distinct reads): %+v", len(first), first)
	}
	tools := map[string]bool{}
	for _, r := range first {
		tools[r.Tool] = true
	}
	for _, tl := range []string{"session_get", "session_events", "session_artifacts", "session_files"} {
		if !tools[tl] {
			t.Errorf("tool %s has no mcp.read entry: %+v", tl, first)
		}
	}
	// The window closes: the counts are written.
	api.CloseReadWindows(d.api)
	all := reads()
	total := 0
	for _, r := range all {
		total++
		total += r.Repeats + r.Other
		if r.Repeats > 0 {
			total-- // a count entry stands for its repeats, not one more read
		}
		if r.Other > 0 {
			total--
		}
	}
	if len(all) > 2*8+1 || total != n {
		t.Errorf("after the window: %d entries standing for %d reads, want at most 17 for %d: %+v", len(all), total, n, all)
	}
}

// TestToolReadWindowsBounded: with room for 2 open windows, a read of a
// third session closes the oldest window early, so its counts are
// written at once rather than held (the folder's memory stays bounded).
func TestToolReadWindowsBounded(t *testing.T) {
	defer api.SetReadFold(time.Hour, 8, 2)()
	d := fakeDaemon(t)
	ctx := t.Context()
	var ids []string
	for range 3 {
		s, err := d.c.CreateSession(ctx, apiv1.CreateRequest{Agent: "tool"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID)
	}
	read := func(id string) {
		t.Helper()
		if _, err := d.c.GetSession(client.WithTool(ctx, "session_get"), id); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 {
		read(ids[0])
	}
	read(ids[1])
	repeats := func() int {
		es, err := d.c.Events(ctx, ids[0])
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range es {
			var data struct {
				Repeats int `json:"repeats"`
			}
			if e.Kind == "mcp.read" && json.Unmarshal(e.Data, &data) == nil {
				n += data.Repeats
			}
		}
		return n
	}
	time.Sleep(200 * time.Millisecond)
	if n := repeats(); n != 0 {
		t.Fatalf("the first window's repeats written while it is open: %d", n)
	}
	read(ids[2]) // a third window: the first, the oldest, gives way
	deadline := time.Now().Add(5 * time.Second)
	for repeats() != 4 {
		if time.Now().After(deadline) {
			t.Fatalf("the oldest window's 4 repeats: %d written", repeats())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestToolReadWindowTimer: a window closes by itself when its time is
// up, writing the count of its repeats.
func TestToolReadWindowTimer(t *testing.T) {
	defer api.SetReadFold(3*time.Second, 8, 4096)()
	d := fakeDaemon(t)
	ctx := t.Context()
	s, err := d.c.CreateSession(ctx, apiv1.CreateRequest{Agent: "tool"})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := d.c.GetSession(client.WithTool(ctx, "session_get"), s.ID); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		es, err := d.c.Events(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range es {
			var data struct {
				Repeats int `json:"repeats"`
			}
			if e.Kind == "mcp.read" && json.Unmarshal(e.Data, &data) == nil {
				n += data.Repeats
			}
		}
		if n >= 1 {
			break // 2 repeats, or fewer if a read came after the window closed
		}
		if time.Now().After(deadline) {
			t.Fatal("no count written after the window's time")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
