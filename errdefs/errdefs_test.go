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

// Every finer code answers with its kind's status, and a client that
// reads it back (with the status, or alone as in a Server-Sent Event)
// gets an error of that kind.
func TestFinerCodesBothWays(t *testing.T) {
	status := map[error]int{}
	for _, k := range Kinds() {
		status[k.Err] = k.Status
		if _, ok := FinerCodes()[k.Code]; ok {
			t.Errorf("%q is both a kind code and a finer code", k.Code)
		}
	}
	for code, kind := range FinerCodes() {
		err := fmt.Errorf("wrapped: %w", WithCode(code, fmt.Errorf("%w: why", kind)))
		if HTTPStatus(err) != status[kind] || Code(err) != code {
			t.Errorf("%s: got %d %q, want %d", code, HTTPStatus(err), Code(err), status[kind])
		}
		for _, st := range []int{status[kind], 0} {
			back := FromHTTP(st, code, "msg")
			if !errors.Is(back, kind) {
				t.Errorf("FromHTTP(%d, %q) is not %v", st, code, kind)
			}
		}
	}
}

// New gives a package a sentinel of its own that is still of its kind.
func TestNew(t *testing.T) {
	a, b := New(ErrNotFound, "no such row"), New(ErrNotFound, "no such machine")
	err := fmt.Errorf("get: %w", a)
	if !errors.Is(err, a) || errors.Is(err, b) || !errors.Is(err, ErrNotFound) {
		t.Fatal("New's sentinels are not told apart, or not of their kind")
	}
	if err.Error() != "get: no such row" || HTTPStatus(err) != http.StatusNotFound || Code(err) != CodeNotFound {
		t.Fatalf("got %q %d %q", err, HTTPStatus(err), Code(err))
	}
}
