package errdefs

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
)

// Every kind maps to its status and code, and back: a client that reads
// the status and code off the wire gets an error that is the same kind.
func TestKindsBothWays(t *testing.T) {
	seenCode := map[string]bool{}
	seenStatus := map[int]bool{}
	for _, k := range Kinds() {
		if seenCode[k.Code] || seenStatus[k.Status] {
			t.Fatalf("code %q or status %d used twice", k.Code, k.Status)
		}
		seenCode[k.Code], seenStatus[k.Status] = true, true
		wrapped := fmt.Errorf("doing a thing: %w", k.Err)
		if got := HTTPStatus(wrapped); got != k.Status {
			t.Errorf("HTTPStatus(%v) = %d, want %d", k.Err, got, k.Status)
		}
		if got := Code(wrapped); got != k.Code {
			t.Errorf("Code(%v) = %q, want %q", k.Err, got, k.Code)
		}
		back := FromHTTP(k.Status, k.Code, "msg")
		if !errors.Is(back, k.Err) {
			t.Errorf("FromHTTP(%d, %q) is not %v", k.Status, k.Code, k.Err)
		}
		byStatus := FromHTTP(k.Status, "", "")
		if !errors.Is(byStatus, k.Err) {
			t.Errorf("FromHTTP(%d, \"\") is not %v", k.Status, k.Err)
		}
		for _, other := range Kinds() {
			if other.Err != k.Err && errors.Is(back, other.Err) {
				t.Errorf("FromHTTP(%d, %q) is also %v", k.Status, k.Code, other.Err)
			}
		}
	}
}

func TestFinerCode(t *testing.T) {
	err := fmt.Errorf("create: %w", WithCode("disk_exhausted", fmt.Errorf("%w: no room", ErrConflict)))
	if HTTPStatus(err) != http.StatusConflict || Code(err) != "disk_exhausted" {
		t.Fatalf("got %d %q", HTTPStatus(err), Code(err))
	}
	back := FromHTTP(http.StatusConflict, "disk_exhausted", "no room")
	if !errors.Is(back, ErrConflict) || back.Code != "disk_exhausted" {
		t.Fatalf("back: %#v", back)
	}
}

func TestNoKind(t *testing.T) {
	if HTTPStatus(nil) != http.StatusOK || Code(nil) != "" {
		t.Fatal("nil")
	}
	err := errors.New("boom")
	if HTTPStatus(err) != http.StatusInternalServerError || Code(err) != CodeInternal {
		t.Fatalf("got %d %q", HTTPStatus(err), Code(err))
	}
	if !errors.Is(FromHTTP(418, "", ""), ErrInvalidArgument) || !errors.Is(FromHTTP(599, "", ""), ErrInternal) {
		t.Fatal("unknown statuses")
	}
}
