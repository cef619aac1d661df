// Package client is the host's Go client for the guest agent
// (guest/agent). It speaks HTTP over whatever byte stream reaches the
// sandbox: the caller gives a dial function (a unix socket for procbox,
// vsock or virtio-serial for VMs) and every request goes through it.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"

	"paddock.dev/paddock/errdefs"
	"paddock.dev/paddock/guest/api"
)

// DialFunc opens a new byte stream to the agent.
type DialFunc func(ctx context.Context) (net.Conn, error)

// baseURL is what requests are addressed to; the host part is ignored by
// the dial function.
const baseURL = "http://guest"

// Client calls one guest agent. It is safe for concurrent use.
type Client struct {
	hc   *http.Client
	dial DialFunc
}

// New returns a client that reaches the agent through dial.
func New(dial DialFunc) *Client {
	tr := &http.Transport{
		DialContext:         func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &Client{hc: &http.Client{Transport: tr}, dial: dial}
}

// NewUnix returns a client for an agent listening on a unix socket.
func NewUnix(socket string) *Client {
	var d net.Dialer
	return New(func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, "unix", socket) })
}

// Close releases idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// Error is a non-2xx answer from the agent. It is of the errdefs kind its
// code (or, for a code it does not know, its status) names, so
// errors.Is(err, errdefs.ErrNotFound) works on it.
type Error struct {
	Status  int    // HTTP status
	Code    string // api.Error.Code: invalid_argument, not_found, conflict, ...
	Message string // api.Error.Error: what went wrong and what to fix
}

func (e *Error) Error() string {
	return fmt.Sprintf("guest agent: %d %s: %s", e.Status, e.Code, e.Message)
}

// Unwrap is the errdefs kind of the answer.
func (e *Error) Unwrap() error { return errdefs.FromCode(e.Status, e.Code) }

// IsStatus reports whether err is an agent answer with the given status.
func IsStatus(err error, status int) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == status
}

// do sends one request and decodes a JSON answer into out (when non-nil).
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body io.Reader, contentType string, out any) error {
	u := baseURL + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("guest agent %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var ae api.Error
		if json.Unmarshal(data, &ae) != nil || ae.Error == "" {
			ae.Error = strings.TrimSpace(string(data))
		}
		return &Error{Status: resp.StatusCode, Code: ae.Code, Message: ae.Error}
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("guest agent %s %s: decode answer: %w", method, path, err)
	}
	return nil
}

func (c *Client) doJSON(ctx context.Context, method, path string, q url.Values, in, out any) error {
	var body io.Reader
	ct := ""
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body, ct = bytes.NewReader(data), "application/json"
	}
	return c.do(ctx, method, path, q, body, ct, out)
}

// Health answers whether the agent is up, with its protocol version.
func (c *Client) Health(ctx context.Context) (*api.Health, error) {
	var out api.Health
	return &out, c.doJSON(ctx, http.MethodGet, "/v1/health", nil, nil, &out)
}

// Capabilities says what the agent can do.
func (c *Client) Capabilities(ctx context.Context) (*api.Capabilities, error) {
	var out api.Capabilities
	return &out, c.doJSON(ctx, http.MethodGet, "/v1/capabilities", nil, nil, &out)
}

// Exec runs a command to completion.
func (c *Client) Exec(ctx context.Context, req api.ExecRequest) (*api.ExecResult, error) {
	var out api.ExecResult
	return &out, c.doJSON(ctx, http.MethodPost, "/v1/exec", nil, req, &out)
}

// StartJob starts a background job.
func (c *Client) StartJob(ctx context.Context, req api.JobRequest) (*api.Job, error) {
	var out api.Job
	return &out, c.doJSON(ctx, http.MethodPost, "/v1/jobs", nil, req, &out)
}

// Jobs lists the jobs the agent remembers, oldest first.
func (c *Client) Jobs(ctx context.Context) ([]api.Job, error) {
	var out []api.Job
	return out, c.doJSON(ctx, http.MethodGet, "/v1/jobs", nil, nil, &out)
}

// ReadOptions say where to read a job's output from and how long to wait.
type ReadOptions struct {
	Offset       int64         // stdout offset (NextOffset of the last read)
	StderrOffset int64         // stderr offset (StderrNextOffset of the last read)
	Wait         time.Duration // long poll, at most api.MaxWaitMillis
	Limit        int64         // bytes per stream; 0 for the agent's default
}

// ReadJob returns a job's state and output from the given offsets.
func (c *Client) ReadJob(ctx context.Context, id string, o ReadOptions) (*api.JobRead, error) {
	q := url.Values{}
	q.Set("offset", strconv.FormatInt(o.Offset, 10))
	q.Set("stderr_offset", strconv.FormatInt(o.StderrOffset, 10))
	if o.Wait > 0 {
		q.Set("wait_ms", strconv.FormatInt(o.Wait.Milliseconds(), 10))
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.FormatInt(o.Limit, 10))
	}
	var out api.JobRead
	return &out, c.doJSON(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id), q, nil, &out)
}

// WriteStdin writes to a job's stdin; in.Close sends end-of-file.
func (c *Client) WriteStdin(ctx context.Context, id string, in api.JobStdin) (*api.Job, error) {
	var out api.Job
	return &out, c.doJSON(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/stdin", nil, in, &out)
}

// SignalJob signals a job's whole process group ("TERM" when sig is empty).
func (c *Client) SignalJob(ctx context.Context, id, sig string) (*api.Job, error) {
	q := url.Values{}
	if sig != "" {
		q.Set("signal", sig)
	}
	var out api.Job
	return &out, c.doJSON(ctx, http.MethodDelete, "/v1/jobs/"+url.PathEscape(id), q, nil, &out)
}

// List lists a directory, or stats anything else (Kind "file").
func (c *Client) List(ctx context.Context, path string) (*api.Listing, error) {
	var out api.Listing
	return &out, c.doJSON(ctx, http.MethodGet, "/v1/files", url.Values{"path": {path}}, nil, &out)
}

// Stat describes path itself (a final symbolic link is not followed).
func (c *Client) Stat(ctx context.Context, path string) (*api.FileInfo, error) {
	l, err := c.List(ctx, path)
	if err != nil {
		return nil, err
	}
	if l.Self == nil {
		return nil, fmt.Errorf("guest agent: listing of %s has no stat of the path", path)
	}
	return l.Self, nil
}

// ReadFile returns a whole file of at most api.MaxFileReadBytes.
func (c *Client) ReadFile(ctx context.Context, path string) (*api.FileContent, error) {
	var out api.FileContent
	return &out, c.doJSON(ctx, http.MethodGet, "/v1/files/content", url.Values{"path": {path}}, nil, &out)
}

// WriteFile writes a whole file atomically, creating parents by default.
func (c *Client) WriteFile(ctx context.Context, in api.FileContent) (*api.FileInfo, error) {
	var out api.FileInfo
	return &out, c.doJSON(ctx, http.MethodPut, "/v1/files/content", nil, in, &out)
}

// DeleteFile removes a file, or a directory (with its contents when
// recursive).
func (c *Client) DeleteFile(ctx context.Context, path string, recursive bool) error {
	return c.DeleteFileDenying(ctx, path, recursive, nil)
}

// DeleteFileDenying is DeleteFile refusing (403) to remove anything under
// the deny directories or holding one (see api.MaxDeny).
func (c *Client) DeleteFileDenying(ctx context.Context, path string, recursive bool, deny []string) error {
	return c.DeleteFileGuarded(ctx, path, recursive, deny, nil)
}

// DeleteFileGuarded is DeleteFileDenying also refusing (403) to remove
// one of the exec programs, a link on the way to one or a directory
// holding one (see api.MaxExecList).
func (c *Client) DeleteFileGuarded(ctx context.Context, path string, recursive bool, deny, exec []string) error {
	q := url.Values{"path": {path}, "recursive": {strconv.FormatBool(recursive)}}
	if len(deny) > 0 {
		q["deny"] = deny
	}
	if len(exec) > 0 {
		q["exec"] = exec
	}
	return c.doJSON(ctx, http.MethodDelete, "/v1/files", q, nil, nil)
}

// SetupWorkspace makes the workspace directory and its missing parents
// as root, handed to the guest user (api.WorkspaceSetup). It is the
// host's own call at create, never a tenant's.
func (c *Client) SetupWorkspace(ctx context.Context, path string) (*api.FileInfo, error) {
	var out api.FileInfo
	return &out, c.doJSON(ctx, http.MethodPost, "/v1/workspace", nil, api.WorkspaceSetup{Path: path}, &out)
}

// ReadRange reads up to length bytes (at most api.MaxRangeBytes) from
// offset; checksum asks for the sha256 of the whole file.
func (c *Client) ReadRange(ctx context.Context, path string, offset, length int64, checksum bool) (*api.FileRange, error) {
	q := url.Values{"path": {path}, "offset": {strconv.FormatInt(offset, 10)}, "checksum": {strconv.FormatBool(checksum)}}
	if length > 0 {
		q.Set("length", strconv.FormatInt(length, 10))
	}
	var out api.FileRange
	return &out, c.doJSON(ctx, http.MethodGet, "/v1/files/range", q, nil, &out)
}

// UploadPart sends the chunk that starts at offset (which must be the
// bytes received so far).
func (c *Client) UploadPart(ctx context.Context, id string, offset int64, data []byte) (*api.UploadPart, error) {
	q := url.Values{"offset": {strconv.FormatInt(offset, 10)}}
	var out api.UploadPart
	err := c.do(ctx, http.MethodPut, "/v1/uploads/"+url.PathEscape(id), q, bytes.NewReader(data), "application/octet-stream", &out)
	return &out, err
}

// UploadStatus says how many bytes of an upload the agent holds.
func (c *Client) UploadStatus(ctx context.Context, id string) (*api.UploadPart, error) {
	var out api.UploadPart
	return &out, c.doJSON(ctx, http.MethodGet, "/v1/uploads/"+url.PathEscape(id), nil, nil, &out)
}

// CompleteUpload assembles, verifies and renames an upload into place.
func (c *Client) CompleteUpload(ctx context.Context, id string, in api.UploadComplete) (*api.UploadResult, error) {
	var out api.UploadResult
	return &out, c.doJSON(ctx, http.MethodPost, "/v1/uploads/"+url.PathEscape(id)+"/complete", nil, in, &out)
}

// AbortUpload drops an upload and its parts.
func (c *Client) AbortUpload(ctx context.Context, id string) error {
	return c.doJSON(ctx, http.MethodDelete, "/v1/uploads/"+url.PathEscape(id), nil, nil, nil)
}

// Probe reports the image's tools and what they make possible.
func (c *Client) Probe(ctx context.Context) (*api.Probe, error) {
	var out api.Probe
	return &out, c.doJSON(ctx, http.MethodGet, "/v1/probe", nil, nil, &out)
}

// Manifest lists a directory tree with checksums.
func (c *Client) Manifest(ctx context.Context, req api.ManifestRequest) (*api.Manifest, error) {
	var out api.Manifest
	return &out, c.doJSON(ctx, http.MethodPost, "/v1/manifest", nil, req, &out)
}

// PTY opens a terminal: a shell, or command run by /bin/sh -c. Binary
// messages are raw terminal bytes both ways; use Resize to resize and
// ExitCode on the final read error to learn the exit status.
func (c *Client) PTY(ctx context.Context, cols, rows uint16, command string) (*websocket.Conn, error) {
	q := url.Values{"cols": {strconv.Itoa(int(cols))}, "rows": {strconv.Itoa(int(rows))}}
	if command != "" {
		q.Set("command", command)
	}
	conn, resp, err := websocket.Dial(ctx, "ws://guest/v1/pty?"+q.Encode(), &websocket.DialOptions{HTTPClient: c.hc})
	if err != nil {
		if resp != nil && resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusSwitchingProtocols {
			e := &Error{Status: resp.StatusCode}
			if resp.Body != nil {
				var ae api.Error
				data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
				if json.Unmarshal(data, &ae) == nil {
					e.Code, e.Message = ae.Code, ae.Error
				}
			}
			return nil, e
		}
		return nil, fmt.Errorf("guest agent pty: %w", err)
	}
	conn.SetReadLimit(1 << 20)
	return conn, nil
}

// Resize sends a terminal resize on a PTY connection.
func Resize(ctx context.Context, conn *websocket.Conn, cols, rows uint16) error {
	var rz api.PTYResize
	rz.Resize.Cols, rz.Resize.Rows = cols, rows
	data, err := json.Marshal(rz)
	if err != nil {
		return err
	}
	return conn.Write(ctx, websocket.MessageText, data)
}

// ExitCode reads the exit status from the error that ended a PTY
// connection (a normal close with reason "exit=<code>").
func ExitCode(err error) (int, bool) {
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusNormalClosure {
		return 0, false
	}
	v, ok := strings.CutPrefix(ce.Reason, "exit=")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	return n, err == nil
}
