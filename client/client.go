// Package client is the Go SDK for Paddock's session and sandbox APIs.
// The CLI uses it, and so will the MCP server: one client, not three.
package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"paddock.dev/paddock/api"
	"paddock.dev/paddock/errdefs"
)

// Client talks to one Paddock daemon.
type Client struct {
	base  string
	token string
	hc    *http.Client
}

// New returns a client for the daemon at baseURL (e.g.
// https://127.0.0.1:7788) authenticating with token.
func New(baseURL, token string, opts ...Option) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), token: token, hc: &http.Client{Timeout: 2 * time.Hour}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Option configures a Client.
type Option func(*Client)

// WithRootCAs makes the client trust roots for HTTPS instead of the
// system's: a daemon's gateway on this machine has a certificate from
// Caddy's internal CA (see TrustPEM).
func WithRootCAs(roots *x509.CertPool) Option {
	return func(c *Client) {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		c.hc.Transport = tr
	}
}

// WithTransport makes the client send its requests through rt (the
// daemon's MCP server uses it to reach the daemon's own API in process).
func WithTransport(rt http.RoundTripper) Option {
	return func(c *Client) { c.hc.Transport = rt }
}

// TrustPEM returns the system's roots plus the CA certificates in pemFile
// (a daemon's internal CA root, PADDOCK_CA), for WithRootCAs.
func TrustPEM(pemFile string) (*x509.CertPool, error) {
	raw, err := os.ReadFile(pemFile)
	if err != nil {
		return nil, err
	}
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	if !roots.AppendCertsFromPEM(raw) {
		return nil, fmt.Errorf("%s holds no PEM certificate", pemFile)
	}
	return roots, nil
}

// Error is a non-2xx answer. It is of the errdefs kind its code names
// (or, from a server or proxy that sent no known code, its status's), so
// errors.Is(err, errdefs.ErrConflict) works on it; Code is the finer
// reason to branch on (docs/errors.md lists them).
type Error struct {
	Status  int
	Code    string // the body's "code": a kind's (conflict) or a finer one (disk_exhausted)
	Message string
	// Body is the answer as it came (at most 64 KiB): some errors carry
	// more than the message (a command held for approval, 428).
	Body []byte
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s", e.Status, e.Message) }

// Unwrap is the answer as an errdefs error, which is of its kind.
func (e *Error) Unwrap() error { return errdefs.FromHTTP(e.Status, e.Code, e.Message) }

// decodeError reads an error answer: its message and code, or the text
// itself when it is not an error body (a proxy's own page).
func decodeError(status int, data []byte) *Error {
	var body struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}
	json.Unmarshal(data, &body)
	if body.Error == "" {
		body.Error = strings.TrimSpace(string(data))
	}
	return &Error{Status: status, Code: body.Code, Message: body.Error, Body: data[:min(len(data), 64<<10)]}
}

func (c *Client) do(ctx context.Context, method, path string, header map[string]string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	setTool(req)
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return decodeError(resp.StatusCode, data)
	}
	if out != nil && len(data) > 0 {
		return json.Unmarshal(data, out)
	}
	return nil
}

// ToolHeader is the request header that names the tool a request is made
// for (an MCP server's tool). The daemon records it in the ledger entries
// the request causes, so an audit can tell which tool did what.
const ToolHeader = "Mcp-Tool"

// MaxToolName bounds a tool name sent in ToolHeader; the daemon refuses a
// longer one.
const MaxToolName = 64

type toolKey struct{}

// WithTool returns ctx with a tool name every request made with it sends
// in ToolHeader.
func WithTool(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, toolKey{}, name)
}

func setTool(req *http.Request) {
	if name, _ := req.Context().Value(toolKey{}).(string); name != "" {
		req.Header.Set(ToolHeader, name)
	}
}

func ifMatch(rev int64) map[string]string {
	if rev < 0 {
		return nil
	}
	return map[string]string{"If-Match": strconv.FormatInt(rev, 10)}
}

func sp(id string) string { return "/v1/agents/sessions/" + url.PathEscape(id) }

// CreateSession creates a session.
func (c *Client) CreateSession(ctx context.Context, req api.CreateRequest) (*api.Session, error) {
	var out api.Session
	return &out, c.do(ctx, http.MethodPost, "/v1/agents/sessions", nil, req, &out)
}

// ListSessions lists sessions, oldest first, without deleted ones.
func (c *Client) ListSessions(ctx context.Context) ([]*api.Session, error) {
	return c.listSessions(ctx, false)
}

// ListAllSessions lists sessions, oldest first, deleted ones included.
func (c *Client) ListAllSessions(ctx context.Context) ([]*api.Session, error) {
	return c.listSessions(ctx, true)
}

func (c *Client) listSessions(ctx context.Context, all bool) ([]*api.Session, error) {
	var out struct {
		Sessions []*api.Session `json:"sessions"`
	}
	p := "/v1/agents/sessions"
	if all {
		p += "?include_deleted=true"
	}
	return out.Sessions, c.do(ctx, http.MethodGet, p, nil, nil, &out)
}

// GetSession returns one session.
func (c *Client) GetSession(ctx context.Context, id string) (*api.Session, error) {
	var out api.Session
	return &out, c.do(ctx, http.MethodGet, sp(id), nil, nil, &out)
}

// DeleteSession deletes a session (idempotent).
func (c *Client) DeleteSession(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, sp(id), nil, nil, nil)
}

// Exec runs a shell line in the session's sandbox.
func (c *Client) Exec(ctx context.Context, id string, req api.ExecRequest) (*api.ExecResult, error) {
	var out api.ExecResult
	return &out, c.do(ctx, http.MethodPost, sp(id)+"/exec", nil, req, &out)
}

// Checkpoint takes a checkpoint (rev < 0: any revision).
func (c *Client) Checkpoint(ctx context.Context, id string, rev int64, req api.CheckpointRequest) (*api.Checkpoint, error) {
	var out api.Checkpoint
	return &out, c.do(ctx, http.MethodPost, sp(id)+"/checkpoint", ifMatch(rev), req, &out)
}

// Restore restores a checkpoint of this session.
func (c *Client) Restore(ctx context.Context, id string, rev int64, tag string) (*api.Session, error) {
	var out api.Session
	return &out, c.do(ctx, http.MethodPost, sp(id)+"/restore", ifMatch(rev), api.RestoreRequest{Tag: tag}, &out)
}

// Fork starts count children from the session's current state.
func (c *Client) Fork(ctx context.Context, id string, rev int64, count int) ([]*api.Session, error) {
	out, err := c.ForkWith(ctx, id, rev, api.ForkRequest{Count: count})
	if err != nil {
		return nil, err
	}
	return out.Children, nil
}

// ForkWith forks with the whole request (count, identity, a checkpoint
// to start from) and returns the whole answer: the children, whether
// they started from memory, the parent's jobs they do not carry and each
// child's identity.
func (c *Client) ForkWith(ctx context.Context, id string, rev int64, req api.ForkRequest) (*api.ForkResult, error) {
	var out api.ForkResult
	if err := c.do(ctx, http.MethodPost, sp(id)+"/fork", ifMatch(rev), req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Artifacts returns the workspace changes since the baseline.
func (c *Client) Artifacts(ctx context.Context, id string) (*api.Artifacts, error) {
	var out api.Artifacts
	return &out, c.do(ctx, http.MethodGet, sp(id)+"/artifacts", nil, nil, &out)
}

// Events returns the session's ledger: its oldest 10000 entries at most
// (EventsPage reads the newest, or pages on).
func (c *Client) Events(ctx context.Context, id string) ([]api.LedgerEntry, error) {
	var out struct {
		Ledger []api.LedgerEntry `json:"ledger"`
	}
	return out.Ledger, c.do(ctx, http.MethodGet, sp(id)+"/events", nil, nil, &out)
}

// EventsSince returns the session's ledger entries and VM events newer
// than since (the zero time: all of them).
func (c *Client) EventsSince(ctx context.Context, id string, since time.Time) (*api.Events, error) {
	p := sp(id) + "/events"
	if !since.IsZero() {
		p += "?since=" + url.QueryEscape(since.UTC().Format(time.RFC3339Nano))
	}
	var out api.Events
	if err := c.do(ctx, http.MethodGet, p, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// EventsQuery picks a page of a session's events (Client.EventsPage).
// Tail asks for the newest Tail ledger entries and VM events and goes
// with nothing else. Otherwise the ledger entries after Since (a time)
// or after After (a seq; not both) come oldest first, at most Limit of
// them (0: the daemon's most, 10000); the answer's LedgerMore says more
// follow (ask again with After set to the last seq).
type EventsQuery struct {
	Since time.Time
	After int64
	Limit int
	Tail  int
}

// EventsPage returns a page of the session's ledger entries and VM events
// (see EventsQuery).
func (c *Client) EventsPage(ctx context.Context, id string, q EventsQuery) (*api.Events, error) {
	v := url.Values{}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339Nano))
	}
	if q.After > 0 {
		v.Set("after", strconv.FormatInt(q.After, 10))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Tail > 0 {
		v.Set("tail", strconv.Itoa(q.Tail))
	}
	p := sp(id) + "/events"
	if len(v) > 0 {
		p += "?" + v.Encode()
	}
	var out api.Events
	if err := c.do(ctx, http.MethodGet, p, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Call does one JSON request against a session route (path relative to
// /v1/agents/sessions/{id}, query already encoded) and decodes the answer
// into out. The typed methods above cover the common verbs; Call reaches
// the rest (files, jobs, uploads, git, probe).
func (c *Client) Call(ctx context.Context, method, id, path string, query url.Values, in, out any) error {
	p := sp(id) + path
	if len(query) > 0 {
		p += "?" + query.Encode()
	}
	return c.do(ctx, method, p, nil, in, out)
}

// UploadChunk sends raw bytes of an upload at offset.
func (c *Client) UploadChunk(ctx context.Context, id, upload string, offset int64, data []byte) (*api.Upload, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, c.base+sp(id)+"/uploads/"+url.PathEscape(upload)+"?offset="+strconv.FormatInt(offset, 10), bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/octet-stream")
	setTool(req)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return nil, decodeError(resp.StatusCode, body)
	}
	var u api.Upload
	return &u, json.Unmarshal(body, &u)
}

// openStream sends a request for Server-Sent Events (a JSON body when
// body is not nil) and returns the answer once it is 200; any other
// status is the API's error.
func (c *Client) openStream(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	hr, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	hr.Header.Set("Accept", "text/event-stream")
	setTool(hr)
	resp, err := c.hc.Do(hr)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		return nil, decodeError(resp.StatusCode, data)
	}
	return resp, nil
}

// ExecStream runs a command through exec/stream, copying output and
// stderr to the writers as they arrive, and returns the exit code (128+n
// for a signal, as a shell reports it).
func (c *Client) ExecStream(ctx context.Context, id string, req api.ExecRequest, stdout, stderr io.Writer) (int, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return 0, err
	}
	resp, err := c.openStream(ctx, http.MethodPost, sp(id)+"/exec/stream", b)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 32<<20)
	var event string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = line[7:]
		case strings.HasPrefix(line, "data: "):
			var d struct {
				OutputBase64 string `json:"output_base64"`
				Stderr       string `json:"stderr"`
				ExitCode     *int   `json:"exit_code"`
				Signal       string `json:"signal"`
				Error        string `json:"error"`
				Code         string `json:"code"`
			}
			if err := json.Unmarshal([]byte(line[6:]), &d); err != nil {
				return 0, fmt.Errorf("exec stream: bad event: %w", err)
			}
			switch event {
			case "output":
				out, _ := base64.StdEncoding.DecodeString(d.OutputBase64)
				stdout.Write(out)
			case "stderr":
				io.WriteString(stderr, d.Stderr)
			case "exit":
				if d.ExitCode != nil && *d.ExitCode >= 0 {
					return *d.ExitCode, nil
				}
				return 128 + 9, nil
			case "error":
				// An error event has no status: its code names the kind.
				return 0, fmt.Errorf("exec stream: %w", errdefs.FromHTTP(0, d.Code, d.Error))
			}
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("exec stream: ended before the command's exit")
}
