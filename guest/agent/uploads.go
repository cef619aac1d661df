package agent

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"paddock.dev/paddock/guest/api"
)

// An upload lives in UploadDir/<id>/ as part files named by their offset
// in 20 digits, until complete assembles them and leaves doneMarker.
const doneMarker = "done.json"

var uploadIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func uploadID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if !uploadIDPattern.MatchString(id) {
		return "", fmt.Errorf("%w: upload id %q must be 1 to 64 of A-Z a-z 0-9 _ -", ErrBadRequest, id)
	}
	return id, nil
}

func (s *Server) uploadDir(id string) string { return filepath.Join(s.cfg.UploadDir, id) }

// uploadPart is one stored chunk.
type uploadPart struct {
	offset, size int64
	path         string
}

// uploadParts returns the contiguous parts from offset 0 and the bytes
// they hold. Parts past a gap are ignored (they cannot be written by this
// agent, which only accepts the next offset).
func (s *Server) uploadParts(id string) ([]uploadPart, int64, error) {
	dir := s.uploadDir(id)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0, err
	}
	var parts []uploadPart
	for _, e := range entries {
		name := e.Name()
		if len(name) != 20 || strings.Trim(name, "0123456789") != "" {
			continue
		}
		off, err := strconv.ParseInt(name, 10, 64)
		if err != nil {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			return nil, 0, err
		}
		parts = append(parts, uploadPart{offset: off, size: fi.Size(), path: filepath.Join(dir, name)})
	}
	slices.SortFunc(parts, func(a, b uploadPart) int { return cmp.Compare(a.offset, b.offset) })
	var received int64
	for i, p := range parts {
		if p.offset != received {
			return parts[:i], received, nil
		}
		received += p.size
	}
	return parts, received, nil
}

// uploadDone returns the result a completed upload left behind, if any.
func (s *Server) uploadDone(id string) (*api.UploadResult, error) {
	data, err := os.ReadFile(filepath.Join(s.uploadDir(id), doneMarker))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var res api.UploadResult
	if err := json.Unmarshal(data, &res); err != nil {
		return nil, fmt.Errorf("read completion record of upload %s: %w", id, err)
	}
	return &res, nil
}

// handleUploadPart answers PUT /v1/uploads/{id}?offset=N with a raw body.
func (s *Server) handleUploadPart(w http.ResponseWriter, r *http.Request) error {
	id, err := uploadID(r)
	if err != nil {
		return err
	}
	if r.URL.Query().Get("offset") == "" {
		return fmt.Errorf("%w: query offset is required (the bytes received so far, 0 to start)", ErrBadRequest)
	}
	offset, err := queryInt(r, "offset", 0, 0, api.MaxUploadBytes)
	if err != nil {
		return err
	}
	data, err := io.ReadAll(r.Body) // already in memory, at most MaxPartBytes
	if err != nil {
		return fmt.Errorf("%w: read part: %v", ErrBadRequest, err)
	}
	if len(data) == 0 {
		return fmt.Errorf("%w: the part is empty; send 1 to %d bytes", ErrBadRequest, api.MaxPartBytes)
	}

	s.uploads.Lock()
	defer s.uploads.Unlock()
	dir := s.uploadDir(id)
	if done, err := s.uploadDone(id); err != nil {
		return err
	} else if done != nil {
		return fmt.Errorf("%w: upload %s is already complete (%s)", ErrConflict, id, done.Path)
	}
	_, received, err := s.uploadParts(id)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if offset != received {
		return fmt.Errorf("%w: offset %d does not match the %d bytes received; continue at offset %d", ErrConflict, offset, received, received)
	}
	if received+int64(len(data)) > api.MaxUploadBytes {
		return fmt.Errorf("%w: an upload may hold at most %d bytes", ErrTooLarge, api.MaxUploadBytes)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp := filepath.Join(dir, "part.tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, fmt.Sprintf("%020d", offset))); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.UploadPart{ID: id, Received: received + int64(len(data))})
	return nil
}

// handleUploadStatus answers GET /v1/uploads/{id}.
func (s *Server) handleUploadStatus(w http.ResponseWriter, r *http.Request) error {
	id, err := uploadID(r)
	if err != nil {
		return err
	}
	s.uploads.Lock()
	defer s.uploads.Unlock()
	if done, err := s.uploadDone(id); err != nil {
		return err
	} else if done != nil {
		writeJSON(w, http.StatusOK, api.UploadPart{ID: id, Received: done.Size})
		return nil
	}
	_, received, err := s.uploadParts(id)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: no upload %s; start it with PUT /v1/uploads/%s?offset=0", ErrNotFound, id, id)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.UploadPart{ID: id, Received: received})
	return nil
}

// handleUploadComplete answers POST /v1/uploads/{id}/complete: the parts
// are joined in a temporary file beside the target, checked, and renamed
// over it, so nothing half-written is ever at the target. The target is
// written as the guest user and never in the places the guard protects,
// as PUT /v1/files/content is.
func (s *Server) handleUploadComplete(w http.ResponseWriter, r *http.Request) error {
	id, err := uploadID(r)
	if err != nil {
		return err
	}
	var req api.UploadComplete
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	clean, rel, err := checkPath(req.Path)
	if err != nil {
		return err
	}
	if req.Size < 0 || req.Size > api.MaxUploadBytes {
		return fmt.Errorf("%w: size %d must be from 0 to %d", ErrBadRequest, req.Size, api.MaxUploadBytes)
	}
	want := strings.ToLower(req.SHA256)
	if want != "" {
		if b, err := hex.DecodeString(want); err != nil || len(b) != sha256.Size {
			return fmt.Errorf("%w: sha256 %q must be 64 hexadecimal digits", ErrBadRequest, req.SHA256)
		}
	}
	mode, err := parseMode(req.Mode, 0o644)
	if err != nil {
		return err
	}
	if err := checkDeny(req.Deny); err != nil {
		return err
	}
	if err := checkExec(req.Exec); err != nil {
		return err
	}

	s.uploads.Lock()
	defer s.uploads.Unlock()
	if done, err := s.uploadDone(id); err != nil {
		return err
	} else if done != nil {
		if done.Path != clean || done.Size != req.Size || (want != "" && want != done.SHA256) {
			return fmt.Errorf("%w: upload %s was already completed as %s (%d bytes)", ErrConflict, id, done.Path, done.Size)
		}
		writeJSON(w, http.StatusOK, done)
		return nil
	}
	parts, received, err := s.uploadParts(id)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: no upload %s; send its parts first", ErrNotFound, id)
	}
	if err != nil {
		return err
	}
	if received != req.Size {
		return fmt.Errorf("%w: upload %s holds %d bytes but size is %d; send the rest from offset %d", ErrConflict, id, received, req.Size, received)
	}

	// The parts are the agent's (root-only); they are opened before the
	// target is written as the guest user.
	files, err := openParts(parts)
	if err != nil {
		return err
	}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	var n int64
	var got string
	err = s.asGuest("write", clean, func() error {
		target, name, err := s.writeTarget(clean, rel, req.Deny, req.Exec, req.Parents == nil || *req.Parents)
		if err != nil {
			return err
		}
		defer target.Close()
		f, tmp, err := createTemp(target, name)
		if err != nil {
			return rootErr(clean, err)
		}
		h := sha256.New()
		n, err = joinParts(io.MultiWriter(f, h), files)
		if err == nil && n != req.Size {
			err = fmt.Errorf("%w: parts of upload %s changed while joining (%d bytes, expected %d)", ErrConflict, id, n, req.Size)
		}
		got = hex.EncodeToString(h.Sum(nil))
		if err == nil && want != "" && got != want {
			err = fmt.Errorf("%w: sha256 of the %d bytes received is %s, not %s; nothing was written to %s", ErrConflict, n, got, want, clean)
		}
		if err != nil {
			f.Close()
			_ = target.Remove(tmp)
			return err
		}
		return rootErr(clean, s.commitTemp(target, f, tmp, name, mode))
	})
	if err != nil {
		return err
	}
	res := api.UploadResult{Path: clean, Size: n, SHA256: got, Verified: want != ""}
	marker, _ := json.Marshal(res)
	dir := s.uploadDir(id)
	if err := os.WriteFile(filepath.Join(dir, doneMarker+".tmp"), marker, 0o600); err == nil {
		_ = os.Rename(filepath.Join(dir, doneMarker+".tmp"), filepath.Join(dir, doneMarker))
	}
	for _, p := range parts {
		_ = os.Remove(p.path)
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// openParts opens every part for reading; on failure none stays open.
func openParts(parts []uploadPart) ([]*os.File, error) {
	files := make([]*os.File, 0, len(parts))
	for _, p := range parts {
		f, err := os.Open(p.path)
		if err != nil {
			for _, f := range files {
				f.Close()
			}
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

func joinParts(w io.Writer, files []*os.File) (int64, error) {
	var total int64
	for _, f := range files {
		n, err := io.Copy(w, f)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// handleUploadAbort answers DELETE /v1/uploads/{id}; deleting an unknown
// upload succeeds.
func (s *Server) handleUploadAbort(w http.ResponseWriter, r *http.Request) error {
	id, err := uploadID(r)
	if err != nil {
		return err
	}
	s.uploads.Lock()
	defer s.uploads.Unlock()
	if err := os.RemoveAll(s.uploadDir(id)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
