package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"
	"paddock.dev/paddock/errdefs"
)

// fakeAgent serves h and returns a client whose dial function reaches it,
// whatever address the transport asks for.
func fakeAgent(t *testing.T, h http.HandlerFunc) *Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	var d net.Dialer
	return New(func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) })
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   *Error
		kind   error // the errdefs kind the error is of
	}{
		{"api error", 409, `{"error":"offset 5 does not match","code":"conflict"}`, &Error{Status: 409, Code: "conflict", Message: "offset 5 does not match"}, errdefs.ErrConflict},
		{"finer code", 403, `{"error":"forbidden: /usr is a system directory","code":"system_path"}`, &Error{Status: 403, Code: "system_path", Message: "forbidden: /usr is a system directory"}, errdefs.ErrForbidden},
		{"code over status", 400, `{"error":"no such file","code":"not_found"}`, &Error{Status: 400, Code: "not_found", Message: "no such file"}, errdefs.ErrNotFound},
		{"an older agent's code", 400, `{"error":"bad request: no argv","code":"bad_request"}`, &Error{Status: 400, Code: "bad_request", Message: "bad request: no argv"}, errdefs.ErrInvalidArgument},
		{"plain text", 502, "bad gateway\n", &Error{Status: 502, Message: "bad gateway"}, errdefs.ErrBadGateway},
		{"empty", 500, "", &Error{Status: 500}, errdefs.ErrInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fakeAgent(t, func(w http.ResponseWriter, r *http.Request) {
				if r.Host != "guest" {
					t.Errorf("host %q, want guest", r.Host)
				}
				w.WriteHeader(tt.status)
				fmt.Fprint(w, tt.body)
			})
			_, err := c.Health(context.Background())
			var got *Error
			if !errors.As(err, &got) {
				t.Fatalf("error %v is not a *client.Error", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if !IsStatus(fmt.Errorf("wrapped: %w", err), tt.status) || IsStatus(err, 200) {
				t.Errorf("IsStatus does not match %d", tt.status)
			}
			for _, k := range errdefs.Kinds() {
				if errors.Is(err, k.Err) != (k.Err == tt.kind) {
					t.Errorf("errors.Is(err, %v) = %v, want it only for %v", k.Err, errors.Is(err, k.Err), tt.kind)
				}
			}
		})
	}
}

func TestQueryEncoding(t *testing.T) {
	var got string
	c := fakeAgent(t, func(w http.ResponseWriter, r *http.Request) {
		got = r.Method + " " + r.URL.Path + "?" + r.URL.RawQuery
		fmt.Fprint(w, `{}`)
	})
	ctx := context.Background()
	if _, err := c.ReadRange(ctx, "/a b/c&d", 5, 10, true); err != nil {
		t.Fatal(err)
	}
	if want := "GET /v1/files/range?checksum=true&length=10&offset=5&path=%2Fa+b%2Fc%26d"; got != want {
		t.Errorf("request %q, want %q", got, want)
	}
	if err := c.DeleteFile(ctx, "/x/y", true); err != nil {
		t.Fatal(err)
	}
	if want := "DELETE /v1/files?path=%2Fx%2Fy&recursive=true"; got != want {
		t.Errorf("request %q, want %q", got, want)
	}
}

func TestExitCode(t *testing.T) {
	tests := []struct {
		err    error
		code   int
		wantOK bool
	}{
		{websocket.CloseError{Code: websocket.StatusNormalClosure, Reason: "exit=3"}, 3, true},
		{fmt.Errorf("read: %w", websocket.CloseError{Code: websocket.StatusNormalClosure, Reason: "exit=0"}), 0, true},
		{websocket.CloseError{Code: websocket.StatusGoingAway, Reason: "exit=3"}, 0, false},
		{websocket.CloseError{Code: websocket.StatusNormalClosure, Reason: "bye"}, 0, false},
		{errors.New("eof"), 0, false},
	}
	for _, tt := range tests {
		code, ok := ExitCode(tt.err)
		if code != tt.code || ok != tt.wantOK {
			t.Errorf("ExitCode(%v) = %d, %v; want %d, %v", tt.err, code, ok, tt.code, tt.wantOK)
		}
	}
}
