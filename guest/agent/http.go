package agent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"paddock.dev/paddock/guest/api"
)

// Body limits per route. JSON carries bytes as base64 (4/3 larger).
const (
	smallBody     = 64 << 10
	execBody      = api.MaxExecStdinBytes/3*4 + 4*api.MaxArgvBytes + smallBody
	fileWriteBody = api.MaxFileWriteBytes/3*4 + smallBody
	stdinBody     = api.MaxStdinWriteBytes/3*4 + smallBody
	noBody        = 0
)

// bodyReadTimeout bounds how long one request body may take to arrive.
const bodyReadTimeout = 2 * time.Minute

// handlerFunc is a route: it writes its own success answer and returns
// errors for writeError.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	route := func(pattern string, bodyLimit int64, h handlerFunc) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			if err := readBody(w, r, bodyLimit); err != nil {
				s.writeError(w, r, err)
				return
			}
			if err := h(w, r); err != nil {
				s.writeError(w, r, err)
				return
			}
			s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "duration", time.Since(start))
		})
	}
	route("GET /v1/health", noBody, s.handleHealth)
	route("GET /v1/capabilities", noBody, s.handleCapabilities)
	route("POST /v1/exec", execBody, s.handleExec)
	route("POST /v1/jobs", execBody, s.handleStartJob)
	route("GET /v1/jobs", noBody, s.handleListJobs)
	route("GET /v1/jobs/{id}", noBody, s.handleReadJob)
	route("POST /v1/jobs/{id}/stdin", stdinBody, s.handleJobStdin)
	route("DELETE /v1/jobs/{id}", noBody, s.handleSignalJob)
	route("GET /v1/files", noBody, s.handleList)
	route("GET /v1/files/content", noBody, s.handleReadFile)
	route("PUT /v1/files/content", fileWriteBody, s.handleWriteFile)
	route("DELETE /v1/files", noBody, s.handleDelete)
	route("GET /v1/files/range", noBody, s.handleRange)
	route("POST /v1/workspace", smallBody, s.handleWorkspace)
	route("PUT /v1/uploads/{id}", api.MaxPartBytes, s.handleUploadPart)
	route("GET /v1/uploads/{id}", noBody, s.handleUploadStatus)
	route("POST /v1/uploads/{id}/complete", smallBody, s.handleUploadComplete)
	route("DELETE /v1/uploads/{id}", noBody, s.handleUploadAbort)
	route("GET /v1/probe", noBody, s.handleProbe)
	route("POST /v1/manifest", smallBody, s.handleManifest)
	route("GET /v1/pty", noBody, s.handlePTY)
	route("GET /v1/forward", noBody, s.handleForward)
	route("/", noBody, func(w http.ResponseWriter, r *http.Request) error {
		return fmt.Errorf("%w: no route %s %s", ErrNotFound, r.Method, r.URL.Path)
	})
	return mux
}

// readBody reads the whole request body (at most limit bytes) within
// bodyReadTimeout and hands it to the handler from memory, so a slow or
// oversized body is refused here, in one place, before any work starts.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) error {
	if limit <= 0 {
		r.Body = http.MaxBytesReader(w, r.Body, 0)
		return nil
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(bodyReadTimeout)) // not every conn has deadlines
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	_ = rc.SetReadDeadline(time.Time{})
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return fmt.Errorf("%w: request body is larger than %d bytes", ErrTooLarge, tooBig.Limit)
	case err != nil:
		return fmt.Errorf("%w: read request body: %v", ErrBadRequest, err)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return nil
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) error {
	host, _ := os.Hostname()
	h := api.Health{Version: api.Version, PID: os.Getpid(), Hostname: host}
	if n, ok := readOOMKills(procVMStat); ok {
		h.OOMKills = &n
	}
	writeJSON(w, http.StatusOK, h)
	return nil
}

// procVMStat holds the kernel's memory counters, oom_kill among them.
const procVMStat = "/proc/vmstat"

// readOOMKills reads the oom_kill line of a vmstat file. ok is false when
// the file cannot be read or has no such line (an old kernel).
func readOOMKills(path string) (n int64, ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	// /proc/vmstat is a few kilobytes; read no more than 64 KiB of it.
	sc := bufio.NewScanner(io.LimitReader(f, 64<<10))
	for sc.Scan() {
		name, val, found := strings.Cut(sc.Text(), " ")
		if !found || name != "oom_kill" {
			continue
		}
		v, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
		if err != nil || v < 0 {
			return 0, false
		}
		return v, true
	}
	return 0, false
}

func (s *Server) handleCapabilities(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, api.Capabilities{
		JobsV2:      true,
		PTY:         true,
		Confinement: api.ConfineSupport{LandlockABI: landlockABI(), Seccomp: seccompAvailable()},
	})
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// decodeJSON reads one JSON value from the (already limited) body.
func decodeJSON(r *http.Request, v any) error {
	err := json.NewDecoder(r.Body).Decode(v)
	var tooBig *http.MaxBytesError
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &tooBig):
		return fmt.Errorf("%w: request body is larger than %d bytes", ErrTooLarge, tooBig.Limit)
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%w: request body is empty; send a JSON object", ErrBadRequest)
	case errors.As(err, &syntax), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: request body is not valid JSON: %v", ErrBadRequest, err)
	case errors.As(err, &typ):
		return fmt.Errorf("%w: field %q has the wrong type: want %s", ErrBadRequest, typ.Field, typ.Type)
	}
	return fmt.Errorf("%w: read request body: %v", ErrBadRequest, err)
}

// queryInt reads an integer query parameter within [lo, hi], def when absent.
func queryInt(r *http.Request, name string, def, lo, hi int64) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%w: query %s=%q must be an integer from %d to %d", ErrBadRequest, name, v, lo, hi)
	}
	return n, nil
}

// queryBool reads a boolean query parameter, false when absent.
func queryBool(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%w: query %s=%q must be true or false", ErrBadRequest, name, v)
	}
	return b, nil
}
