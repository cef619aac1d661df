package main

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// TestCLISessionPreviews: `paddock session preview/previews/unpreview`
// against `paddock serve`: the URL is printed once, absolute against the
// daemon, and the daemon serves it through its gateway (502 while nothing
// listens on the port); --json has the whole answer; the list never shows a token;
// unpreview refuses a token or URL where the id goes, deletes by id, and
// the URL then answers 404; a bad port or --ttl is a usage error.
func TestCLISessionPreviews(t *testing.T) {
	c := serveCLI(t)
	pd := c.pd
	id := c.newSession()
	out, se, code := pd("session", "preview", id, "8000", "--ttl", "10m")
	url := strings.TrimSpace(out)
	if code != 0 || !regexp.MustCompile(`^https?://`+regexp.QuoteMeta(c.addr)+`/preview/pvw-[a-z2-7]{52}/$`).MatchString(url) ||
		!strings.Contains(se, "shown once") || !strings.Contains(se, "port 8000") {
		t.Fatalf("preview: %d %q %q", code, out, se)
	}
	base, _, _ := strings.Cut(url, "/preview/")
	token := strings.TrimSuffix(strings.TrimPrefix(url, base+"/preview/"), "/")
	hc := daemonHTTPClient(c.state)
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "nothing is listening on port 8000") {
		t.Errorf("GET the URL with nothing listening: %d %q", resp.StatusCode, body)
	}
	var p struct {
		ID, Token, URL string
		Port           int
	}
	out, se, code = pd("--json", "session", "preview", id, "3000")
	if err := json.Unmarshal([]byte(out), &p); err != nil || code != 0 || p.Port != 3000 || p.URL != "/preview/"+p.Token+"/" || !strings.HasPrefix(p.ID, "pv-") {
		t.Fatalf("preview --json: %d %q %q", code, out, se)
	}
	out, _, code = pd("session", "previews", id)
	if code != 0 || strings.Count(out, "pv-") != 2 || !strings.Contains(out, "8000") || strings.Contains(out, token) || strings.Contains(out, p.Token) {
		t.Errorf("previews: %d %q", code, out)
	}
	out, _, code = pd("--json", "session", "previews", id)
	if code != 0 || strings.Contains(out, "pvw-") || strings.Count(out, `"id"`) != 2 {
		t.Errorf("previews --json: %d %q", code, out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"session", "unpreview", id, token}, "not its token"},
		{[]string{"session", "unpreview", id, url}, "not its token"},
		{[]string{"session", "preview", id, "0"}, "PORT"},
		{[]string{"session", "preview", id, "http"}, "PORT"},
		{[]string{"session", "preview", id, "80", "--ttl", "1500ms"}, "--ttl"},
	} {
		if _, se, code := pd(tc.args...); code != exitUsage || !strings.Contains(se, tc.want) {
			t.Errorf("%v: %d %q, want a usage error naming %q", tc.args, code, se, tc.want)
		}
	}
	if _, se, code := pd("session", "preview", id, "3128"); code != exitUsage || !strings.Contains(se, "egress proxy") {
		t.Errorf("preview of the egress proxy's port: %d %q", code, se)
	}
	if _, se, code := pd("session", "unpreview", id, p.ID); code != 0 {
		t.Errorf("unpreview: %d %q", code, se)
	}
	if _, _, code := pd("session", "unpreview", id, p.ID); code != exitNotFound {
		t.Errorf("unpreview again: %d, want %d", code, exitNotFound)
	}
	resp, err = hc.Get(base + p.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET a deleted preview: %d, want 404", resp.StatusCode)
	}
}
