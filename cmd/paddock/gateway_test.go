package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"paddock.dev/paddock/client"
	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hostd/previews"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/tokens"
	"paddock.dev/paddock/hostd/workspace"
	"paddock.dev/paddock/internal/testutil"
)

// gatewayCall is one HTTPS request to the daemon's gateway, trusting only
// its internal CA. It follows no redirect.
func gatewayCall(t *testing.T, state, method, url, token string, body io.Reader, hdr http.Header) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	hc := daemonHTTPClient(state)
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// TestCLIGateway is the front door end to end: `paddock serve` with its
// embedded Caddy on loopback, its internal CA trusted by the client and
// nothing else. The API answers each kind of token (admin, a tenant from
// a tenants file, a session token minted over the gateway) and refuses
// wrong or missing ones with 401 in hostd's shape; a client's identity
// header is replaced by the gateway's (hostd logs it); Caddy's admin
// endpoint is nowhere; a 10 MiB body is refused with 413 while a file
// write of 6 MiB passes; the access log holds no token, preview token or
// ticket. Then previews of a real server in a real sandbox (a page, a
// sub-path, a WebSocket echo, the host form, made-up, expired and revoked
// tokens alike), and a terminal (typing, resizing, stty size, the exit
// code, and a ticket instead of a token).
func TestCLIGateway(t *testing.T) {
	bin, state, addr, env := daemonSetup(t)
	tenants := filepath.Join(t.TempDir(), "tenants.json")
	out, se, code := runCLI(t, bin, env, nil, "tenant", "add", "acme", "--tenants", tenants)
	if code != 0 {
		t.Fatalf("tenant add: %d %s", code, se)
	}
	tenantToken := strings.TrimSpace(out)
	srv := startServe(t, bin, state, addr, env, "--stop-sandboxes", "--tenants", tenants)
	defer stopServe(t, srv)
	const admin = "pdk_cli_test_token_0123456789"
	base := "https://" + addr
	ctx := context.Background()
	sdk := daemonSDK(t, state, addr, admin)

	// The socket hostd serves on is root's alone.
	if fi, err := os.Stat(filepath.Join(state, "hostd.sock")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("hostd.sock: %v %v, want a 0600 socket", fi, err)
	}

	s, err := sdk.CreateSession(ctx, session.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var minted tokens.SessionToken
	if err := sdk.Call(ctx, "POST", s.ID, "/tokens", nil, tokens.TokenRequest{Ops: []string{"read"}}, &minted); err != nil {
		t.Fatal(err)
	}

	t.Run("tokens", func(t *testing.T) {
		for _, c := range []struct {
			name, token, kind, actor string
		}{
			{"admin", admin, auth.KindAdmin, "admin"},
			{"tenant", tenantToken, auth.KindTenant, "tenant:acme"},
			{"session", minted.Token, auth.KindSession, "session-token:" + minted.ID},
		} {
			forged := http.Header{"Paddock-Identity": {"admin"}, "X-Forwarded-User": {"root"}}
			resp, body := gatewayCall(t, state, "GET", base+"/v1/whoami", c.token, nil, forged)
			var who auth.WhoAmI
			if json.Unmarshal(body, &who); resp.StatusCode != 200 || who.Kind != c.kind {
				t.Errorf("%s: whoami %d %s", c.name, resp.StatusCode, body)
			}
			// hostd logged the identity the gateway verified, never the
			// one the client claimed.
			want := "gateway_identity=" + c.actor + " method=GET path=/v1/whoami actor=" + c.actor
			for deadline := time.Now().Add(3 * time.Second); !strings.Contains(serveLogs(srv), want) && time.Now().Before(deadline); {
				time.Sleep(20 * time.Millisecond) // hostd logs a request once it has answered
			}
			if !strings.Contains(serveLogs(srv), want) {
				t.Errorf("%s: hostd's log has no request line with the gateway's identity %s", c.name, c.actor)
			}
		}
		if strings.Contains(serveLogs(srv), "identity of a caller is not the token's") {
			t.Error("hostd saw a gateway identity that was not the token's")
		}
		// The session token reaches its session, and only what it was minted for.
		if resp, body := gatewayCall(t, state, "GET", base+"/v1/agents/sessions/"+s.ID, minted.Token, nil, nil); resp.StatusCode != 200 {
			t.Errorf("GET the session with its token: %d %s", resp.StatusCode, body)
		}
		if resp, body := gatewayCall(t, state, "POST", base+"/v1/agents/sessions/"+s.ID+"/exec", minted.Token, strings.NewReader(`{"command":"true"}`), nil); resp.StatusCode != http.StatusForbidden {
			t.Errorf("exec with a read token: %d %s", resp.StatusCode, body)
		}
	})

	t.Run("refused", func(t *testing.T) {
		for _, tok := range []string{"", "pdk_not_a_token_of_this_daemon", "pdk_tok-0123456789abcdef_" + strings.Repeat("0", 64)} {
			resp, body := gatewayCall(t, state, "GET", base+"/v1/agents/sessions", tok, nil, nil)
			var e struct{ Error string }
			if json.Unmarshal(body, &e); resp.StatusCode != 401 || e.Error == "" {
				t.Errorf("token %q: %d %s", tok, resp.StatusCode, body)
			}
		}
		// A revoked session token too (at the edge once its cached
		// identity is gone, before that at hostd: both 401).
		var other tokens.SessionToken
		if err := sdk.Call(ctx, "POST", s.ID, "/tokens", nil, tokens.TokenRequest{Ops: []string{"read"}}, &other); err != nil {
			t.Fatal(err)
		}
		if resp, _ := gatewayCall(t, state, "GET", base+"/v1/whoami", other.Token, nil, nil); resp.StatusCode != 200 {
			t.Fatalf("a fresh token: %d", resp.StatusCode)
		}
		if err := sdk.Call(ctx, "DELETE", s.ID, "/tokens/"+other.ID, nil, nil, nil); err != nil {
			t.Fatal(err)
		}
		for _, wait := range []time.Duration{0, 1100 * time.Millisecond} {
			time.Sleep(wait)
			if resp, body := gatewayCall(t, state, "GET", base+"/v1/whoami", other.Token, nil, nil); resp.StatusCode != 401 {
				t.Errorf("a revoked token after %v: %d %s", wait, resp.StatusCode, body)
			}
		}
	})

	t.Run("admin endpoint", func(t *testing.T) {
		if c, err := net.DialTimeout("tcp", "127.0.0.1:2019", time.Second); err == nil {
			c.Close()
			t.Error("something listens on Caddy's admin port 2019")
		}
		for _, p := range []string{"/config/", "/load", "/stop"} {
			if resp, body := gatewayCall(t, state, "GET", base+p, admin, nil, nil); resp.StatusCode != 404 {
				t.Errorf("GET %s as admin: %d %s", p, resp.StatusCode, body)
			}
		}
	})

	t.Run("limits", func(t *testing.T) {
		resp, body := gatewayCall(t, state, "POST", base+"/v1/agents/sessions", admin, bytes.NewReader(make([]byte, 10<<20)), http.Header{"Content-Type": {"application/json"}})
		if resp.StatusCode != 413 || !strings.Contains(string(body), "gateway: 413") {
			t.Errorf("10 MiB body: %d %s", resp.StatusCode, body)
		}
		// A 6 MiB file write (8 MiB as base64) passes the gateway.
		data := bytes.Repeat([]byte("0123456789abcdef"), 6<<20/16)
		if err := sdk.Call(ctx, "PUT", s.ID, "/files/content", nil, workspace.FileWrite{Path: "/workspace/big", ContentBase64: base64.StdEncoding.EncodeToString(data)}, nil); err != nil {
			t.Errorf("a 6 MiB file write through the gateway: %v", err)
		}
	})

	t.Run("previews", func(t *testing.T) {
		echo, err := os.ReadFile(testutil.EchoServerBinary(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := sdk.Call(ctx, "PUT", s.ID, "/files/content", nil, workspace.FileWrite{Path: "/tmp/echoserver", ContentBase64: base64.StdEncoding.EncodeToString(echo), Mode: "0755"}, nil); err != nil {
			t.Fatalf("write the echo server into the sandbox: %v", err)
		}
		if err := sdk.Call(ctx, "POST", s.ID, "/jobs", nil, session.JobStart{Command: "/tmp/echoserver -addr 127.0.0.1:8000"}, nil); err != nil {
			t.Fatal(err)
		}
		out, se, code := runCLI(t, bin, env, nil, "session", "preview", s.ID, "8000")
		url := strings.TrimSpace(out)
		if code != 0 || !regexp.MustCompile(`^https://`+regexp.QuoteMeta(addr)+`/preview/pvw-[a-z2-7]{52}/$`).MatchString(url) {
			t.Fatalf("session preview: %d %q %q", code, out, se)
		}
		token := strings.TrimSuffix(strings.TrimPrefix(url, base+"/preview/"), "/")
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if resp, _ := gatewayCall(t, state, "GET", url, "", nil, nil); resp.StatusCode == 200 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the preview never answered 200")
			}
		}
		creds := http.Header{"Cookie": {"paddock=secret"}, "Paddock-Identity": {"admin"}, "Authorization": {"Bearer " + admin}}
		resp, body := gatewayCall(t, state, "GET", url, "", nil, creds)
		if resp.StatusCode != 200 || !strings.Contains(string(body), "<") {
			t.Errorf("the page: %d %q", resp.StatusCode, body)
		}
		checkGatewayPreviewHeaders(t, "the page", resp.Header)
		resp, body = gatewayCall(t, state, "GET", url+"echo/sub/path?x=1", "", nil, creds)
		var seen struct {
			Path, Query string
			Headers     http.Header
		}
		if json.Unmarshal(body, &seen); resp.StatusCode != 200 || seen.Path != "/echo/sub/path" || seen.Query != "x=1" {
			t.Errorf("a sub-path: %d %s", resp.StatusCode, body)
		}
		for _, h := range []string{"Cookie", "Authorization", "Paddock-Identity"} {
			if seen.Headers.Get(h) != "" {
				t.Errorf("%s reached the guest's server", h)
			}
		}
		checkGatewayPreviewHeaders(t, "a sub-path", resp.Header)

		// A WebSocket echo through the preview (wss through Caddy).
		wsURL := "wss://" + addr + "/preview/" + token + "/ws"
		conn, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPClient: daemonHTTPClient(state)})
		if err != nil {
			t.Fatalf("WebSocket through the preview: %v", err)
		}
		conn.Read(ctx) // the handshake's headers
		if err := conn.Write(ctx, websocket.MessageText, []byte("ping through caddy")); err != nil {
			t.Fatal(err)
		}
		if _, msg, err := conn.Read(ctx); err != nil || string(msg) != "ping through caddy" {
			t.Errorf("WebSocket echo: %q %v", msg, err)
		}
		conn.Close(websocket.StatusNormalClosure, "")

		// The host form, dialled at the gateway's address.
		host := token + ".preview.localhost"
		_, port, _ := net.SplitHostPort(addr)
		roots := x509.NewCertPool()
		pem, _ := os.ReadFile(gatewayRoot(state))
		roots.AppendCertsFromPEM(pem)
		hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: host},
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "tcp", addr)
			}}}
		hr, err := hc.Get("https://" + host + ":" + port + "/echo/at-root")
		if err != nil {
			t.Fatal(err)
		}
		hb, _ := io.ReadAll(hr.Body)
		hr.Body.Close()
		if json.Unmarshal(hb, &seen); hr.StatusCode != 200 || seen.Path != "/echo/at-root" {
			t.Errorf("the host form: %d %s", hr.StatusCode, hb)
		}

		// Made-up, expired and revoked tokens: the same 404.
		var short previews.Preview
		if err := sdk.Call(ctx, "POST", s.ID, "/preview", nil, previews.PreviewRequest{Port: 8000, TTLSeconds: 1}, &short); err != nil {
			t.Fatal(err)
		}
		var revoked previews.Preview
		if err := sdk.Call(ctx, "POST", s.ID, "/preview", nil, previews.PreviewRequest{Port: 8000, TTLSeconds: 600}, &revoked); err != nil {
			t.Fatal(err)
		}
		if err := sdk.Call(ctx, "DELETE", s.ID, "/preview/"+revoked.ID, nil, nil, nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1100 * time.Millisecond)
		var bodies []string
		for _, p := range []string{"/preview/pvw-" + strings.Repeat("a", 52) + "/", short.URL, revoked.URL} {
			resp, body := gatewayCall(t, state, "GET", base+p, "", nil, nil)
			if resp.StatusCode != 404 {
				t.Errorf("%.30s…: %d %q", p, resp.StatusCode, body)
			}
			checkGatewayPreviewHeaders(t, "a 404", resp.Header)
			bodies = append(bodies, string(body))
		}
		if bodies[0] != bodies[1] || bodies[1] != bodies[2] {
			t.Errorf("made-up, expired and revoked tokens answer differently: %q", bodies)
		}
	})

	t.Run("terminal", func(t *testing.T) {
		tctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		conn, err := sdk.DialPTY(tctx, s.ID, client.PTYOptions{Cols: 100, Rows: 30})
		if err != nil {
			t.Fatalf("a terminal through the gateway: %v", err)
		}
		var screen bytes.Buffer
		readUntil := func(want string) {
			t.Helper()
			for !strings.Contains(screen.String(), want) {
				_, msg, err := conn.Read(tctx)
				if err != nil {
					t.Fatalf("waiting for %q: %v\n%s", want, err, screen.String())
				}
				screen.Write(msg)
			}
		}
		type line = []byte
		conn.Write(tctx, websocket.MessageBinary, line("stty size; echo mark-$((40+2))\n"))
		readUntil("mark-42")
		if !strings.Contains(screen.String(), "30 100") {
			t.Errorf("stty size at open: %q", screen.String())
		}
		if err := client.ResizePTY(tctx, conn, 120, 40); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		conn.Write(tctx, websocket.MessageBinary, line("stty size; echo mark-$((50+3))\n"))
		readUntil("mark-53")
		if !strings.Contains(screen.String(), "40 120") {
			t.Errorf("stty size after the resize: %q", screen.String())
		}
		conn.Write(tctx, websocket.MessageBinary, line("exit 7\n"))
		var end error
		for end == nil {
			_, _, end = conn.Read(tctx)
		}
		if code, ok := client.PTYExitCode(end); !ok || code != 7 {
			t.Errorf("terminal's end: %v, want exit=7", end)
		}

		// A browser's way: a ticket instead of a bearer token.
		tk, err := sdk.PTYTicket(tctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		ticketURL := "wss://" + addr + "/v1/agents/sessions/" + s.ID + "/pty?command=" + "echo+by-ticket%3B+exit+3&ticket=" + tk.Ticket
		tc, _, err := websocket.Dial(tctx, ticketURL, &websocket.DialOptions{HTTPClient: daemonHTTPClient(state)})
		if err != nil {
			t.Fatalf("a terminal by ticket through the gateway: %v", err)
		}
		end = nil
		for end == nil {
			_, _, end = tc.Read(tctx)
		}
		if code, ok := client.PTYExitCode(end); !ok || code != 3 {
			t.Errorf("ticket terminal's end: %v, want exit=3", end)
		}
		// Spent: the same ticket again is refused by hostd.
		if _, resp, err := websocket.Dial(tctx, ticketURL, &websocket.DialOptions{HTTPClient: daemonHTTPClient(state)}); err == nil || resp == nil || resp.StatusCode != 401 {
			t.Errorf("a spent ticket: %v %v", resp, err)
		}
		if strings.Contains(serveLogs(srv), tk.Ticket) {
			t.Error("the ticket is in the daemon's logs")
		}
	})

	// Nothing secret in the daemon's output (hostd's log and the
	// gateway's access log both go to its stderr).
	logs := serveLogs(srv)
	for name, secret := range map[string]string{"admin token": admin, "tenant token": tenantToken, "session token": minted.Token} {
		if strings.Contains(logs, secret) {
			t.Errorf("the %s is in the daemon's logs", name)
		}
	}
	if m := regexp.MustCompile(`pvw-[a-z2-7]{52}`).FindString(logs); m != "" && m != "pvw-"+strings.Repeat("a", 52) {
		t.Errorf("a preview token is in the daemon's logs: %s", m)
	}
	if !strings.Contains(logs, `"uri":"/preview/REDACTED/`) || !strings.Contains(logs, `"Authorization":["REDACTED"]`) {
		t.Error("the access log lacks the redacted request lines")
	}
}

func checkGatewayPreviewHeaders(t *testing.T, what string, h http.Header) {
	t.Helper()
	if !strings.Contains(strings.Join(h.Values("Content-Security-Policy"), ","), previews.PreviewCSP) || h.Get("Referrer-Policy") != "no-referrer" ||
		h.Get("Cache-Control") != "no-store" || h.Get("Set-Cookie") != "" {
		t.Errorf("%s: preview headers %v", what, h)
	}
}

// TestCLIGatewaySplit runs the split deployment: hostd with its socket
// alone (serve --gateway=false with an empty --listen and --socket-group), and `paddock
// gateway` as an unprivileged user (nobody:nogroup) in front of it. The
// API answers over the unprivileged gateway's HTTPS, and the socket is
// 0660 root:nogroup in a 0750 directory.
func TestCLIGatewaySplit(t *testing.T) {
	bin, state, addr, env := daemonSetup(t)
	grp, err := user.LookupGroup("nogroup")
	if err != nil {
		t.Skipf("no nogroup group: %v", err)
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no nobody user: %v", err)
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(grp.Gid)
	top, err := os.MkdirTemp("", "pgsplit")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(top)
	os.Chmod(top, 0o755)
	cli, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	pub := filepath.Join(top, "paddock") // a copy nobody can run
	if err := os.WriteFile(pub, cli, 0o755); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(top, "run", "hostd.sock")
	gwState := filepath.Join(top, "gw")
	os.Mkdir(gwState, 0o700)
	os.Chown(gwState, uid, gid)

	hostd := exec.Command(bin, "--state-dir", state, "serve", "--gateway=false", "--listen", "", "--socket", socket, "--socket-group", "nogroup", "--stop-sandboxes")
	hostd.Env, hostd.Stderr, hostd.WaitDelay = env, &lockedBuilder{}, 5*time.Second
	if err := hostd.Start(); err != nil {
		t.Fatal(err)
	}
	defer stopServe(t, hostd)
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(socket); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no hostd socket:\n%s", serveLogs(hostd))
		}
	}
	for p, want := range map[string]os.FileMode{socket: 0o660 | os.ModeSocket, filepath.Dir(socket): 0o750 | os.ModeDir} {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode() != want || fi.Sys().(*syscall.Stat_t).Gid != uint32(gid) {
			t.Errorf("%s: %v %v, want %v root:nogroup", p, fi.Mode(), err, want)
		}
	}

	gw := exec.Command(pub, "--state-dir", gwState, "gateway", "--hostd-socket", socket, "--listen", addr, "--access-log", "discard")
	gw.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + gwState}
	gw.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	gw.Stderr, gw.WaitDelay = &lockedBuilder{}, 5*time.Second
	if err := gw.Start(); err != nil {
		t.Fatal(err)
	}
	defer stopServe(t, gw)
	root := filepath.Join(gwState, "gateway", "pki", "authorities", "local", "root.crt")
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if strings.Contains(serveLogs(gw), "paddock: gateway on") {
			break
		}
		if time.Now().After(deadline) || gw.ProcessState != nil {
			t.Fatalf("the gateway did not start:\n%s", serveLogs(gw))
		}
	}
	if fi, err := os.Stat(root); err != nil || fi.Sys().(*syscall.Stat_t).Uid != uint32(uid) {
		t.Fatalf("the gateway's CA root is not nobody's: %v", err)
	}
	out, se, code := runCLI(t, bin, append(slices.Clone(env), "PADDOCK_CA="+root), nil, "session", "whoami")
	if code != 0 || strings.TrimSpace(out) != "admin" {
		t.Errorf("whoami through the unprivileged gateway: %d %q %q\n%s", code, out, se, serveLogs(gw))
	}
}
