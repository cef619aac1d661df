package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"paddock.dev/paddock/errdefs"
)

// TestErrorKinds: an error answer becomes a *Error with the status, the
// code and the message, of the code's errdefs kind (or, without a known
// code, the status's), on the JSON calls and on the raw upload alike.
func TestErrorKinds(t *testing.T) {
	var status int
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
		w.Write([]byte(body))
	}))
	defer srv.Close()
	c := New(srv.URL, "pdk_test")
	for _, tc := range []struct {
		status  int
		body    string
		kind    error
		code    string
		message string
	}{
		{409, `{"error":"tag taken","code":"conflict"}`, errdefs.ErrConflict, "conflict", "tag taken"},
		{409, `{"error":"no room","code":"disk_exhausted"}`, errdefs.ErrConflict, "disk_exhausted", "no room"},
		{403, `{"error":"rm is denied","code":"policy_refused","rule":"process.deny"}`, errdefs.ErrForbidden, "policy_refused", "rm is denied"},
		{400, `{"error":"odd","code":"not_found"}`, errdefs.ErrNotFound, "not_found", "odd"},
		{404, `{"error":"no such session"}`, errdefs.ErrNotFound, "", "no such session"},
		{502, "<html>proxy down</html>", errdefs.ErrBadGateway, "", "<html>proxy down</html>"},
	} {
		status, body = tc.status, tc.body
		for name, call := range map[string]func() error{
			"GetSession": func() error { _, err := c.GetSession(context.Background(), "ses-1"); return err },
			"UploadChunk": func() error {
				_, err := c.UploadChunk(context.Background(), "ses-1", "up-1", 0, []byte("x"))
				return err
			},
		} {
			err := call()
			var e *Error
			if !errors.As(err, &e) || e.Status != tc.status || e.Code != tc.code || e.Message != tc.message {
				t.Errorf("%s, %d %s: %#v", name, tc.status, tc.body, err)
				continue
			}
			for _, k := range errdefs.Kinds() {
				if errors.Is(err, k.Err) != (k.Err == tc.kind) {
					t.Errorf("%s, %d %s: errors.Is(err, %v) = %v", name, tc.status, tc.body, k.Err, !(k.Err == tc.kind))
				}
			}
		}
	}
}
