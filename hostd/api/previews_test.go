package api_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"paddock.dev/paddock/hostd/previews"
	"paddock.dev/paddock/hostd/sandboxes"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/tokens"
	"paddock.dev/paddock/hostd/workspace"
	"paddock.dev/paddock/internal/testutil"
)

// previewDomain is the host form's domain in these tests:
// <token>.preview.paddock.test.
const previewDomain = "paddock.test"

// previewDaemon is a test daemon with a second server in front of it that
// also serves the host form (previews.Service.Wrap). The daemon's own server
// serves the path form.
func previewDaemon(t *testing.T) (*testDaemon, *httptest.Server) {
	t.Helper()
	d := newTestDaemon(t)
	pv := httptest.NewServer(d.pv.Wrap(d.api, previewDomain))
	t.Cleanup(pv.Close)
	return d, pv
}

// startEcho writes internal/testutil/echoserver into the session's
// sandbox and starts it as a job on 127.0.0.1:port, logging every
// request it gets to /tmp/echo-<port>.log.
func startEcho(t *testing.T, d *testDaemon, sid string, port int) {
	t.Helper()
	ctx := context.Background()
	bin, err := os.ReadFile(testutil.EchoServerBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.c.Call(ctx, "PUT", sid, "/files/content", nil, workspace.FileWrite{Path: "/tmp/echoserver",
		ContentBase64: base64.StdEncoding.EncodeToString(bin), Mode: "0755"}, nil); err != nil {
		t.Fatalf("write the echo server into the sandbox: %v", err)
	}
	var job session.Job
	cmd := fmt.Sprintf("/tmp/echoserver -addr 127.0.0.1:%d -log /tmp/echo-%d.log", port, port)
	if err := d.c.Call(ctx, "POST", sid, "/jobs", nil, session.JobStart{Command: cmd}, &job); err != nil {
		t.Fatalf("start the echo server: %v", err)
	}
}

// get sends one request (no redirects followed) and returns the answer
// with its body read.
func get(t *testing.T, method, url string, header http.Header, body io.Reader) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		if k == "Host" {
			req.Host = vs[0]
			continue
		}
		req.Header[k] = vs
	}
	hc := &http.Client{Timeout: 60 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read the body: %v", method, url, err)
	}
	return resp, b
}

// waitServing polls url until it answers 200 (the server in the sandbox
// is up); until then the preview answers 502.
func waitServing(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, body := get(t, "GET", url, nil, nil)
		if resp.StatusCode == 200 {
			return
		}
		if resp.StatusCode != http.StatusBadGateway || time.Now().After(deadline) {
			t.Fatalf("%s: %d %q, want 502 until the server is up, then 200", url, resp.StatusCode, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func checkPreviewHeaders(t *testing.T, what string, h http.Header) {
	t.Helper()
	if !slices.Contains(h.Values("Content-Security-Policy"), previews.PreviewCSP) {
		t.Errorf("%s: Content-Security-Policy %q, want %q among them", what, h.Values("Content-Security-Policy"), previews.PreviewCSP)
	}
	if strings.Contains(strings.Join(h.Values("Content-Security-Policy"), ","), "allow-same-origin") {
		t.Errorf("%s: the sandbox allows the same origin", what)
	}
	if got := h.Values("Referrer-Policy"); len(got) != 1 || got[0] != "no-referrer" {
		t.Errorf("%s: Referrer-Policy %q, want no-referrer", what, got)
	}
	if got := h.Values("Cache-Control"); len(got) != 1 || got[0] != "no-store" {
		t.Errorf("%s: Cache-Control %q, want no-store", what, got)
	}
	if got := h.Values("Set-Cookie"); len(got) != 0 {
		t.Errorf("%s: Set-Cookie %q reached the viewer", what, got)
	}
}

var previewTokenRE = regexp.MustCompile(`^pvw-[a-z2-7]{52}$`)

// TestPreviewThroughSandbox runs a real HTTP server in a real sandbox and
// reaches it through a preview URL: a page, a sub-path with its query, a
// POST body, an 8 MiB response, redirects kept under the preview, the
// security headers on every answer and the guest's dangerous ones gone,
// the viewer's credentials and identity headers never reaching the guest
// (the server logs what it got), a WebSocket echo (text and binary), the
// DevTools documents rewritten and followed to a CDP-like WebSocket, and
// the host form. The token is in no list, ledger entry or database file.
func TestPreviewThroughSandbox(t *testing.T) {
	d, pv := previewDaemon(t)
	ctx := context.Background()
	s, err := d.c.CreateSession(ctx, session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	startEcho(t, d, s.ID, 8000)
	p, err := d.c.CreatePreview(ctx, s.ID, previews.PreviewRequest{Port: 8000})
	if err != nil {
		t.Fatal(err)
	}
	if !previewTokenRE.MatchString(p.Token) || p.URL != "/preview/"+p.Token+"/" || p.Port != 8000 || !strings.HasPrefix(p.ID, "pv-") {
		t.Fatalf("created %+v", p)
	}
	if !p.ExpiresAt.Equal(s.ExpiresAt) {
		// The default is an hour, capped at the session's 10 minutes.
		t.Errorf("expires at %v, want the session's expiry %v (the default TTL capped)", p.ExpiresAt, s.ExpiresAt)
	}
	base := d.c.PreviewURL(p) // http://127.0.0.1:port/preview/<token>/
	waitServing(t, base)
	host := strings.TrimPrefix(d.url, "http://")

	t.Run("page", func(t *testing.T) {
		resp, body := get(t, "GET", base, nil, nil)
		if resp.StatusCode != 200 || !strings.Contains(string(body), "hello from the sandbox") {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
		checkPreviewHeaders(t, "page", resp.Header)
	})
	t.Run("sub-path and query", func(t *testing.T) {
		resp, body := get(t, "GET", base+"sub/path/a%20b?q=1&r=x%2Fy", nil, nil)
		if resp.StatusCode != 200 || string(body) != "sub:/sub/path/a b?q=1&r=x%2Fy" {
			t.Errorf("%d %q", resp.StatusCode, body)
		}
		checkPreviewHeaders(t, "sub-path", resp.Header)
	})
	t.Run("no trailing slash", func(t *testing.T) {
		resp, _ := get(t, "GET", strings.TrimSuffix(base, "/")+"?x=1", nil, nil)
		if resp.StatusCode != http.StatusPermanentRedirect || resp.Header.Get("Location") != "/preview/"+p.Token+"/?x=1" {
			t.Errorf("%d Location %q", resp.StatusCode, resp.Header.Get("Location"))
		}
	})
	t.Run("guest headers stripped", func(t *testing.T) {
		resp, body := get(t, "GET", base+"hostile", nil, nil)
		if resp.StatusCode != 200 || string(body) != "hostile" {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
		checkPreviewHeaders(t, "hostile", resp.Header)
		for _, h := range []string{"Clear-Site-Data", "Strict-Transport-Security", "Nel", "Report-To"} {
			if v := resp.Header.Values(h); len(v) > 0 {
				t.Errorf("%s %q reached the viewer", h, v)
			}
		}
		// The guest's own CSP stays beside ours (both are enforced); its
		// referrer and cache policies give way.
		if !slices.Contains(resp.Header.Values("Content-Security-Policy"), "default-src 'self'") || resp.Header.Get("X-Guest") != "kept" {
			t.Errorf("the guest's other headers: %v", resp.Header)
		}
	})
	t.Run("viewer credentials never reach the guest", func(t *testing.T) {
		h := http.Header{
			"Cookie":              {"session=daemon-cookie-7a1"},
			"Authorization":       {"Bearer " + token},
			"Proxy-Authorization": {"Basic cHJveHk6c2VjcmV0"},
			"Paddock-Identity":    {"admin-identity-3f2"},
			"X-Paddock-Tenant":    {"tenant-identity-9c4"},
			"X-Forwarded-For":     {"203.0.113.9"},
			"X-Forwarded-User":    {"alice"},
			"Forwarded":           {"for=203.0.113.9"},
			"X-Real-Ip":           {"203.0.113.9"},
			"Origin":              {"http://" + host},
			"X-App":               {"kept"},
			"Content-Type":        {"text/plain"},
		}
		resp, body := get(t, "POST", base+"echo/x?y=1", h, strings.NewReader("the body"))
		var seen struct {
			Method, Path, Query, Host, Body string
			Headers                         map[string][]string
		}
		if resp.StatusCode != 200 || json.Unmarshal(body, &seen) != nil {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
		if seen.Method != "POST" || seen.Path != "/echo/x" || seen.Query != "y=1" || seen.Body != "the body" || seen.Host != "localhost:8000" {
			t.Errorf("the guest saw %+v", seen)
		}
		for _, k := range []string{"Cookie", "Authorization", "Proxy-Authorization", "Paddock-Identity", "X-Paddock-Tenant",
			"X-Forwarded-For", "X-Forwarded-User", "X-Forwarded-Host", "X-Forwarded-Proto", "Forwarded", "X-Real-Ip"} {
			if v, ok := seen.Headers[k]; ok {
				t.Errorf("the guest got %s: %q", k, v)
			}
		}
		if got := seen.Headers["X-App"]; len(got) != 1 || got[0] != "kept" {
			t.Errorf("X-App %q, want kept", got)
		}
		if got := seen.Headers["Origin"]; len(got) != 1 || got[0] != "http://localhost:8000" {
			t.Errorf("Origin %q: the preview's own origin should reach the guest as its own", got)
		}
		// What the server wrote down of every request it got so far.
		f, err := d.ws.ReadFile(ctx, "", s.ID, "/tmp/echo-8000.log")
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := base64.StdEncoding.DecodeString(f.ContentBase64)
		for _, secret := range []string{"daemon-cookie-7a1", token, "cHJveHk6c2VjcmV0", "admin-identity-3f2", "tenant-identity-9c4", p.Token} {
			if bytes.Contains(raw, []byte(secret)) {
				t.Errorf("the server in the sandbox got %q", secret)
			}
		}
		if !bytes.Contains(raw, []byte("the body")) {
			t.Errorf("the server's log has no request body: the check above proves nothing:\n%s", raw)
		}
	})
	t.Run("redirects stay under the preview", func(t *testing.T) {
		resp, _ := get(t, "GET", base+"redirect", nil, nil)
		if got := resp.Header.Get("Location"); resp.StatusCode != 302 || got != "/preview/"+p.Token+"/sub/after" {
			t.Errorf("%d Location %q", resp.StatusCode, got)
		}
		resp, _ = get(t, "GET", base+"redirect-abs", nil, nil)
		if got := resp.Header.Get("Location"); got != "http://"+host+"/preview/"+p.Token+"/sub/abs" {
			t.Errorf("absolute Location %q", got)
		}
	})
	t.Run("large body", func(t *testing.T) {
		const n = 8 << 20
		resp, body := get(t, "GET", base+"big?n="+fmt.Sprint(n), nil, nil)
		want := bytes.Repeat([]byte("0123456789abcdef"), n/16)
		if resp.StatusCode != 200 || !bytes.Equal(body, want) {
			t.Errorf("%d, %d bytes, want %d of the pattern", resp.StatusCode, len(body), n)
		}
	})
	t.Run("websocket", func(t *testing.T) {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		conn, resp, err := websocket.Dial(wctx, "ws://"+host+"/preview/"+p.Token+"/ws", &websocket.DialOptions{
			HTTPHeader: http.Header{"Cookie": {"session=daemon-cookie-7a1"}, "Authorization": {"Bearer " + token}}})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.CloseNow()
		checkPreviewHeaders(t, "the upgrade", resp.Header)
		_, hello, err := conn.Read(wctx)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(hello, []byte("daemon-cookie-7a1")) || bytes.Contains(hello, []byte(token)) || !bytes.Contains(hello, []byte(`"path":"/ws"`)) {
			t.Errorf("the guest's handshake: %s", hello)
		}
		for _, m := range []struct {
			typ  websocket.MessageType
			data []byte
		}{{websocket.MessageText, []byte("ping")}, {websocket.MessageBinary, []byte{0, 1, 2, 255}}, {websocket.MessageText, bytes.Repeat([]byte("x"), 20000)}} {
			if err := conn.Write(wctx, m.typ, m.data); err != nil {
				t.Fatal(err)
			}
			typ, got, err := conn.Read(wctx)
			if err != nil || typ != m.typ || !bytes.Equal(got, m.data) {
				t.Errorf("echo of %d bytes: %v %d bytes %v", len(m.data), typ, len(got), err)
			}
		}
		conn.Close(websocket.StatusNormalClosure, "")
	})
	t.Run("devtools", func(t *testing.T) {
		var list []map[string]string
		resp, body := get(t, "GET", base+"json/list", nil, nil)
		if resp.StatusCode != 200 || json.Unmarshal(body, &list) != nil || len(list) != 1 {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
		wsURL := "ws://" + host + "/preview/" + p.Token + "/devtools/page/ABC"
		if list[0]["webSocketDebuggerUrl"] != wsURL {
			t.Errorf("webSocketDebuggerUrl %q, want %q", list[0]["webSocketDebuggerUrl"], wsURL)
		}
		if want := "/preview/" + p.Token + "/devtools/inspector.html?ws=" + host + "/preview/" + p.Token + "/devtools/page/ABC"; list[0]["devtoolsFrontendUrl"] != want {
			t.Errorf("devtoolsFrontendUrl %q, want %q", list[0]["devtoolsFrontendUrl"], want)
		}
		if list[0]["id"] != "ABC" || list[0]["type"] != "page" {
			t.Errorf("other fields changed: %v", list[0])
		}
		if got := resp.Header.Get("Content-Length"); got != fmt.Sprint(len(body)) {
			t.Errorf("Content-Length %s for %d bytes", got, len(body))
		}
		// /json is the same list; /json/version names the browser.
		if _, body := get(t, "GET", base+"json", nil, nil); !bytes.Contains(body, []byte(wsURL)) {
			t.Errorf("/json: %s", body)
		}
		var version map[string]string
		if _, body := get(t, "GET", base+"json/version", nil, nil); json.Unmarshal(body, &version) != nil ||
			version["webSocketDebuggerUrl"] != "ws://"+host+"/preview/"+p.Token+"/devtools/browser/XYZ" || version["Browser"] != "FakeChrome/1.0" {
			t.Errorf("/json/version: %s", body)
		}
		// Behind TLS at a gateway: wss, the gateway's host.
		_, body = get(t, "GET", base+"json/list", http.Header{"X-Forwarded-Proto": {"https"}, "X-Forwarded-Host": {"gw.example"}}, nil)
		if !bytes.Contains(body, []byte(`"webSocketDebuggerUrl":"wss://gw.example/preview/`+p.Token+`/devtools/page/ABC"`)) ||
			!bytes.Contains(body, []byte(`inspector.html?wss=gw.example/preview/`+p.Token+`/devtools/page/ABC`)) {
			t.Errorf("behind https: %s", body)
		}
		// A CDP client follows webSocketDebuggerUrl.
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		conn, _, err := websocket.Dial(wctx, list[0]["webSocketDebuggerUrl"], nil)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.CloseNow()
		if err := conn.Write(wctx, websocket.MessageText, []byte(`{"id":1,"method":"Browser.getVersion"}`)); err != nil {
			t.Fatal(err)
		}
		_, answer, err := conn.Read(wctx)
		if err != nil || !bytes.Contains(answer, []byte(`"id":1`)) || !bytes.Contains(answer, []byte(`"path":"/devtools/page/ABC"`)) {
			t.Errorf("CDP answer %s %v", answer, err)
		}
	})
	t.Run("host form", func(t *testing.T) {
		vhost := p.Token + ".preview." + previewDomain
		resp, body := get(t, "GET", pv.URL+"/sub/x?z=2", http.Header{"Host": {vhost}}, nil)
		if resp.StatusCode != 200 || string(body) != "sub:/sub/x?z=2" {
			t.Errorf("%d %q", resp.StatusCode, body)
		}
		checkPreviewHeaders(t, "host form", resp.Header)
		// A browser lower-cases the host; the token is lower-case already.
		resp, body = get(t, "GET", pv.URL+"/", http.Header{"Host": {strings.ToUpper(vhost) + ":443"}}, nil)
		if resp.StatusCode != 200 || !strings.Contains(string(body), "hello from the sandbox") {
			t.Errorf("upper-case host: %d %q", resp.StatusCode, body)
		}
		resp, _ = get(t, "GET", pv.URL+"/redirect", http.Header{"Host": {vhost}}, nil)
		if got := resp.Header.Get("Location"); got != "/sub/after" {
			t.Errorf("host form redirect %q", got)
		}
		_, body = get(t, "GET", pv.URL+"/json/list", http.Header{"Host": {vhost}}, nil)
		if !bytes.Contains(body, []byte(`"webSocketDebuggerUrl":"ws://`+vhost+`/devtools/page/ABC"`)) {
			t.Errorf("host form devtools: %s", body)
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		conn, _, err := websocket.Dial(wctx, strings.Replace(pv.URL, "http", "ws", 1)+"/ws", &websocket.DialOptions{Host: vhost})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.CloseNow()
		conn.Read(wctx) // the handshake report
		conn.Write(wctx, websocket.MessageText, []byte("host"))
		if _, got, err := conn.Read(wctx); err != nil || string(got) != "host" {
			t.Errorf("host form websocket: %q %v", got, err)
		}
		// The API is still served on other hosts of the same server.
		if resp, _ := get(t, "GET", pv.URL+"/healthz", nil, nil); resp.StatusCode != 200 {
			t.Errorf("healthz through Wrap: %d", resp.StatusCode)
		}
	})
	t.Run("limits", func(t *testing.T) {
		resp, body := get(t, "GET", base+"echo", http.Header{"X-Big": {strings.Repeat("h", previews.MaxPreviewHeaderBytes)}}, nil)
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("headers over the limit: %d %q", resp.StatusCode, body)
		}
		raw := func(req string) string {
			conn, err := net.Dial("tcp", host)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(20 * time.Second))
			io.WriteString(conn, req)
			line, _ := bufio.NewReader(conn).ReadString('\n')
			return line
		}
		if got := raw(fmt.Sprintf("POST /preview/%s/echo HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n", p.Token, host, previews.MaxPreviewBodyBytes+1)); !strings.HasPrefix(got, "HTTP/1.1 413") {
			t.Errorf("a body over the limit: %q", got)
		}
		if got := raw(fmt.Sprintf("CONNECT /preview/%s/ HTTP/1.1\r\nHost: %s\r\n\r\n", p.Token, host)); !strings.HasPrefix(got, "HTTP/1.1 405") {
			t.Errorf("CONNECT: %q", got)
		}
	})
	t.Run("list shows no token", func(t *testing.T) {
		ps, err := d.c.Previews(ctx, s.ID)
		if err != nil || len(ps) != 1 || ps[0].ID != p.ID || ps[0].Port != 8000 || ps[0].Token != "" || ps[0].URL != "" || !ps[0].ExpiresAt.Equal(p.ExpiresAt) {
			t.Errorf("list: %+v %v", ps, err)
		}
	})
	t.Run("token in no ledger or database", func(t *testing.T) {
		es, err := d.c.Events(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		var all strings.Builder
		for _, e := range es {
			var data bytes.Buffer
			json.Compact(&data, e.Data)
			all.WriteString(e.Kind + " " + data.String() + "\n")
		}
		if !strings.Contains(all.String(), "preview.create") || !strings.Contains(all.String(), `"port":8000`) || !strings.Contains(all.String(), p.ID) {
			t.Errorf("the ledger has no preview.create with the id and port:\n%s", all.String())
		}
		// session.create, file.write, job.start, preview.create: none of
		// the dozens of requests through the preview.
		if strings.Contains(all.String(), p.Token) || len(es) != 4 {
			t.Errorf("the ledger holds the token, or the traffic:\n%s", all.String())
		}
		files, _ := filepath.Glob(filepath.Join(d.state, "paddock.db*"))
		blob := mustRead(t, files...)
		if bytes.Contains(blob, []byte(p.Token)) || bytes.Contains(blob, []byte(strings.TrimPrefix(p.Token, "pvw-"))) {
			t.Error("the database holds the token")
		}
		sum := sha256.Sum256([]byte(p.Token))
		if !bytes.Contains(blob, []byte(hex.EncodeToString(sum[:]))) || !bytes.Contains(blob, []byte("preview.create")) {
			t.Error("the database has no preview hash or preview.create: the byte check above would prove nothing")
		}
	})
	t.Run("nothing listening", func(t *testing.T) {
		p2, err := d.c.CreatePreview(ctx, s.ID, previews.PreviewRequest{Port: 8001})
		if err != nil {
			t.Fatal(err)
		}
		resp, body := get(t, "GET", d.c.PreviewURL(p2), nil, nil)
		if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "nothing is listening on port 8001") {
			t.Errorf("%d %q", resp.StatusCode, body)
		}
		checkPreviewHeaders(t, "502", resp.Header)
	})
}

// previewAnswer is a preview answer's status, headers (but Date) and
// body, for comparing refusals byte for byte.
func previewAnswer(resp *http.Response, body []byte) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d\n", resp.StatusCode)
	keys := make([]string, 0, len(resp.Header))
	for k := range resp.Header {
		if k != "Date" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %q\n", k, resp.Header[k])
	}
	b.Write(body)
	return b.String()
}

// TestPreviewRefusalsLookAlike: a made-up token, malformed ones, an
// expired one, a deleted (revoked) one, one whose session was deleted and
// one whose session expired all answer exactly the same 404 (status,
// headers but Date, body), in the path and the host form, for any method;
// the same tokens answered 200 while they were live. The TTL is capped at
// the session's expiry.
func TestPreviewRefusalsLookAlike(t *testing.T) {
	d, pv := previewDaemon(t)
	ctx := context.Background()
	s, err := d.c.CreateSession(ctx, session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	startEcho(t, d, s.ID, 8000)
	doomed, err := d.c.CreateSession(ctx, session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	startEcho(t, d, doomed.ID, 8000)
	mk := func(sid string, ttl int) *previews.Preview {
		t.Helper()
		p, err := d.c.CreatePreview(ctx, sid, previews.PreviewRequest{Port: 8000, TTLSeconds: ttl})
		if err != nil {
			t.Fatal(err)
		}
		waitServing(t, d.c.PreviewURL(p))
		return p
	}
	revoked, sessionGone := mk(s.ID, 0), mk(doomed.ID, 0)
	short, err := d.c.CreateSession(ctx, session.CreateRequest{TTLSeconds: 8})
	if err != nil {
		t.Fatal(err)
	}
	startEcho(t, d, short.ID, 8000)
	sessionExpired := mk(short.ID, 3600)
	if !sessionExpired.ExpiresAt.Equal(short.ExpiresAt) {
		t.Errorf("a preview of 3600 s on a session of 8 s expires at %v, want the session's %v", sessionExpired.ExpiresAt, short.ExpiresAt)
	}
	expired := mk(s.ID, 2)
	if err := d.c.DeletePreview(ctx, s.ID, revoked.ID); err != nil {
		t.Fatal(err)
	}
	if err := d.c.DeleteSession(ctx, doomed.ID); err != nil {
		t.Fatal(err)
	}
	last := short.ExpiresAt
	if expired.ExpiresAt.After(last) {
		last = expired.ExpiresAt
	}
	time.Sleep(time.Until(last.Add(200 * time.Millisecond)))
	madeUp := previews.PreviewTokenPrefix + strings.Repeat("a", 52)
	cases := map[string]string{
		"made up":         madeUp,
		"revoked":         revoked.Token,
		"expired":         expired.Token,
		"session deleted": sessionGone.Token,
		"session expired": sessionExpired.Token,
		"upper case":      strings.ToUpper(revoked.Token),
		"too short":       "pvw-abc",
		"no prefix":       strings.TrimPrefix(madeUp, "pvw-"),
		"a session token": "pdk_tok-0123456789abcdef_" + strings.Repeat("0", 64),
	}
	var want, wantName string
	for name, tok := range cases {
		for _, req := range []struct {
			method, url string
			header      http.Header
			body        io.Reader
		}{
			{"GET", d.url + "/preview/" + tok + "/", nil, nil},
			{"GET", d.url + "/preview/" + tok + "/sub/page?x=1", nil, nil},
			{"POST", d.url + "/preview/" + tok + "/echo", http.Header{"Content-Type": {"text/plain"}}, strings.NewReader("body")},
			{"GET", d.url + "/preview/" + tok, nil, nil},
			{"GET", pv.URL + "/sub/page", http.Header{"Host": {tok + ".preview." + previewDomain}}, nil},
		} {
			resp, body := get(t, req.method, req.url, req.header, req.body)
			got := previewAnswer(resp, body)
			if want == "" {
				want, wantName = got, name
				if resp.StatusCode != 404 {
					t.Errorf("%s %s: %d, want 404", req.method, req.url, resp.StatusCode)
				}
				checkPreviewHeaders(t, "404", resp.Header)
				continue
			}
			if got != want {
				t.Errorf("%s (%s %s) answers\n%s\nbut %s answers\n%s", name, req.method, req.url, got, wantName, want)
			}
		}
	}
	// The first token's session is untouched: a live preview still works.
	if resp, _ := get(t, "GET", d.c.PreviewURL(mk(s.ID, 0)), nil, nil); resp.StatusCode != 200 {
		t.Errorf("a new preview of the same session: %d", resp.StatusCode)
	}
}

// TestPreviewLimits: port and TTL checks, the reserved egress ports, at
// most 16 live previews (a deleted one frees its place), only running
// sessions, sandboxes refused, and the route access: a session token needs
// preview to make or delete one and read to list them.
func TestPreviewLimits(t *testing.T) {
	d := newTestDaemon(t)
	ctx := context.Background()
	s, err := d.c.CreateSession(ctx, session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		req  previews.PreviewRequest
		want int
	}{
		{previews.PreviewRequest{Port: 0}, 400},
		{previews.PreviewRequest{Port: 65536}, 400},
		{previews.PreviewRequest{Port: -1}, 400},
		{previews.PreviewRequest{Port: 3128}, 400},
		{previews.PreviewRequest{Port: 53}, 400},
		{previews.PreviewRequest{Port: 3129}, 400},
		{previews.PreviewRequest{Port: 8000, TTLSeconds: -1}, 400},
		{previews.PreviewRequest{Port: 8000, TTLSeconds: previews.MaxPreviewTTLSeconds + 1}, 400},
	} {
		if _, err := d.c.CreatePreview(ctx, s.ID, tc.req); status(err) != tc.want {
			t.Errorf("%+v: %v, want %d", tc.req, err, tc.want)
		}
	}
	if code := call(t, d.url, "POST", "/v1/agents/sessions/"+s.ID+"/preview", map[string]any{"port": 8000, "token": "x"}, nil); code != 400 {
		t.Errorf("unknown field: %d", code)
	}
	var ids []string
	for i := range previews.MaxPreviewsPerSession {
		p, err := d.c.CreatePreview(ctx, s.ID, previews.PreviewRequest{Port: 8000 + i, TTLSeconds: previews.MaxPreviewTTLSeconds})
		if err != nil {
			t.Fatalf("preview %d: %v", i+1, err)
		}
		if !p.ExpiresAt.Equal(s.ExpiresAt) {
			t.Errorf("a TTL of a day on a session of 10 minutes expires at %v, want %v", p.ExpiresAt, s.ExpiresAt)
		}
		ids = append(ids, p.ID)
	}
	if _, err := d.c.CreatePreview(ctx, s.ID, previews.PreviewRequest{Port: 9000}); status(err) != 409 || !strings.Contains(err.Error(), "16 live previews") {
		t.Errorf("preview 17: %v, want 409", err)
	}
	if ps, err := d.c.Previews(ctx, s.ID); err != nil || len(ps) != previews.MaxPreviewsPerSession {
		t.Errorf("list: %d %v", len(ps), err)
	}
	if err := d.c.DeletePreview(ctx, s.ID, ids[0]); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{ids[0], "pv-0000000000000000", "nope"} {
		if err := d.c.DeletePreview(ctx, s.ID, bad); status(err) != 404 {
			t.Errorf("delete %s: %v, want 404", bad, err)
		}
	}
	if _, err := d.c.CreatePreview(ctx, s.ID, previews.PreviewRequest{Port: 9000}); err != nil {
		t.Errorf("after a delete: %v", err)
	}

	// Session tokens: preview makes and deletes, read lists.
	mint := func(ops ...string) string {
		tk, err := d.c.MintToken(ctx, s.ID, tokens.TokenRequest{Ops: ops})
		if err != nil {
			t.Fatal(err)
		}
		return tk.Token
	}
	asToken := func(tok, method, path string, body any) int {
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, d.url+"/v1/agents/sessions/"+s.ID+path, rd)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		rb, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 400 {
			t.Logf("%s %s: %d %s", method, path, resp.StatusCode, rb)
		}
		return resp.StatusCode
	}
	pvTok, readTok := mint("preview"), mint("read")
	if code := asToken(pvTok, "DELETE", "/preview/"+ids[1], nil); code != 204 {
		t.Errorf("delete with preview: %d", code)
	}
	if code := asToken(pvTok, "POST", "/preview", map[string]any{"port": 9001}); code != 201 {
		t.Errorf("create with preview: %d", code)
	}
	if code := asToken(pvTok, "GET", "/previews", nil); code != 403 {
		t.Errorf("list with preview only: %d, want 403", code)
	}
	if code := asToken(readTok, "GET", "/previews", nil); code != 200 {
		t.Errorf("list with read: %d", code)
	}
	for _, c := range []struct{ method, path string }{{"POST", "/preview"}, {"DELETE", "/preview/" + ids[2]}} {
		if code := asToken(readTok, c.method, c.path, map[string]any{"port": 9002}); code != 403 {
			t.Errorf("%s %s with read: %d, want 403", c.method, c.path, code)
		}
	}

	// Not a running session: deleted (409), a sandbox's id (404).
	sb, err := d.c.CreateSandbox(ctx, sandboxes.SandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.CreatePreview(ctx, sb.ID, previews.PreviewRequest{Port: 8000}); status(err) != 404 {
		t.Errorf("a sandbox: %v, want 404", err)
	}
	if err := d.c.DeleteSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.CreatePreview(ctx, s.ID, previews.PreviewRequest{Port: 8000}); status(err) != 409 {
		t.Errorf("a deleted session: %v, want 409", err)
	}
	if ps, err := d.c.Previews(ctx, s.ID); err != nil || len(ps) != 0 {
		t.Errorf("previews of a deleted session: %+v %v", ps, err)
	}
	es, _ := d.c.Events(ctx, s.ID)
	var deletes int
	for _, e := range es {
		if e.Kind == "preview.delete" && strings.Contains(string(e.Data), "session deleted") {
			deletes++
		}
	}
	if deletes != previews.MaxPreviewsPerSession {
		t.Errorf("%d preview.delete entries for the session's delete, want %d", deletes, previews.MaxPreviewsPerSession)
	}
}

// TestPreviewEndsConnections: an open WebSocket through a preview is
// closed when the preview is deleted, and when it expires.
func TestPreviewEndsConnections(t *testing.T) {
	d, _ := previewDaemon(t)
	ctx := context.Background()
	s, err := d.c.CreateSession(ctx, session.CreateRequest{TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	startEcho(t, d, s.ID, 8000)
	host := strings.TrimPrefix(d.url, "http://")
	open := func(ttl int) (*previews.Preview, *websocket.Conn) {
		t.Helper()
		p, err := d.c.CreatePreview(ctx, s.ID, previews.PreviewRequest{Port: 8000, TTLSeconds: ttl})
		if err != nil {
			t.Fatal(err)
		}
		waitServing(t, d.c.PreviewURL(p))
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		conn, _, err := websocket.Dial(wctx, "ws://"+host+"/preview/"+p.Token+"/ws", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.CloseNow() })
		if _, _, err := conn.Read(wctx); err != nil {
			t.Fatal(err)
		}
		return p, conn
	}
	ended := func(what string, conn *websocket.Conn, within time.Duration) {
		t.Helper()
		rctx, cancel := context.WithTimeout(ctx, within)
		defer cancel()
		start := time.Now()
		if _, _, err := conn.Read(rctx); err == nil || rctx.Err() != nil {
			t.Errorf("%s: the WebSocket is still open after %v (%v)", what, time.Since(start), err)
		}
	}
	p, conn := open(0)
	if err := d.c.DeletePreview(ctx, s.ID, p.ID); err != nil {
		t.Fatal(err)
	}
	ended("deleted", conn, 5*time.Second)
	p, conn = open(4)
	conn.Write(ctx, websocket.MessageText, []byte("still here"))
	if _, got, err := conn.Read(ctx); err != nil || string(got) != "still here" {
		t.Fatalf("before expiry: %q %v", got, err)
	}
	ended("expired", conn, time.Until(p.ExpiresAt)+5*time.Second)
	if time.Now().Before(p.ExpiresAt) {
		t.Errorf("closed before the preview expired at %v", p.ExpiresAt)
	}
}
