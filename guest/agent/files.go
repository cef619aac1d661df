package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"

	"paddock.dev/paddock/guest/api"
)

// fileInfo describes rel (already lstat'ed as fi) for a listing.
func fileInfo(root *os.Root, clean, rel string, fi fs.FileInfo) api.FileInfo {
	info := api.FileInfo{
		Name:  path.Base(clean),
		Path:  clean,
		Type:  fileType(fi.Mode()),
		Size:  fi.Size(),
		Mode:  modeString(fi),
		MTime: fi.ModTime().UTC(),
	}
	if info.Type == api.TypeSymlink {
		info.Target, _ = root.Readlink(rel)
	}
	return info
}

// handleList answers GET /v1/files?path=: a directory listing, or the stat
// of anything else.
func (s *Server) handleList(w http.ResponseWriter, r *http.Request) error {
	clean, rel, err := checkPath(r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	root, rel, err := s.openResolved(clean, rel, false)
	if err != nil {
		return err
	}
	defer root.Close()
	lfi, err := root.Lstat(rel)
	if err != nil {
		return rootErr(clean, err)
	}
	self := fileInfo(root, clean, rel, lfi)
	isDir := lfi.IsDir()
	if lfi.Mode()&fs.ModeSymlink != 0 {
		if frel, err := resolveInRoot(root, rel, true); err == nil {
			if fi, err := root.Stat(frel); err == nil && fi.IsDir() {
				isDir, rel = true, frel
			}
		}
	}
	if !isDir {
		writeJSON(w, http.StatusOK, api.Listing{Kind: "file", Path: clean, Entries: []api.FileInfo{self}, Self: &self})
		return nil
	}
	dir, err := root.Open(rel)
	if err != nil {
		return rootErr(clean, err)
	}
	defer dir.Close()
	names, err := dir.Readdirnames(api.MaxListEntries + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return rootErr(clean, err)
	}
	out := api.Listing{Kind: "dir", Path: clean, Entries: []api.FileInfo{}, Self: &self}
	if len(names) > api.MaxListEntries {
		names, out.Truncated = names[:api.MaxListEntries], true
	}
	slices.Sort(names)
	for _, name := range names {
		childRel, childClean := path.Join(rel, name), path.Join(clean, name)
		fi, err := root.Lstat(childRel)
		if err != nil {
			continue // removed since the directory was read
		}
		out.Entries = append(out.Entries, fileInfo(root, childClean, childRel, fi))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// openRegular opens rel for reading and checks it is a regular file.
// O_NONBLOCK keeps a FIFO swapped in at the last moment from blocking the
// open; it has no effect on regular files.
func openRegular(root *os.Root, clean, rel string) (*os.File, fs.FileInfo, error) {
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, rootErr(clean, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, rootErr(clean, err)
	}
	if fi.IsDir() {
		f.Close()
		return nil, nil, fmt.Errorf("%w: %s is a directory; list it with GET /v1/files", ErrBadRequest, clean)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%w: %s is not a regular file", ErrBadRequest, clean)
	}
	return f, fi, nil
}

// handleReadFile answers GET /v1/files/content?path=.
func (s *Server) handleReadFile(w http.ResponseWriter, r *http.Request) error {
	clean, rel, err := checkPath(r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	root, rel, err := s.openResolved(clean, rel, true)
	if err != nil {
		return err
	}
	defer root.Close()
	f, fi, err := openRegular(root, clean, rel)
	if err != nil {
		return err
	}
	defer f.Close()
	tooBig := fmt.Errorf("%w: %s is %d bytes, more than the %d one read returns; use GET /v1/files/range",
		ErrTooLarge, clean, fi.Size(), api.MaxFileReadBytes)
	if fi.Size() > api.MaxFileReadBytes {
		return tooBig
	}
	data, err := io.ReadAll(io.LimitReader(f, api.MaxFileReadBytes+1))
	if err != nil {
		return rootErr(clean, err)
	}
	if len(data) > api.MaxFileReadBytes {
		return tooBig
	}
	writeJSON(w, http.StatusOK, api.FileContent{Path: clean, Content: data, Mode: modeString(fi)})
	return nil
}

// handleWriteFile answers PUT /v1/files/content: the content goes to a
// temporary file beside the target, renamed over it when complete.
func (s *Server) handleWriteFile(w http.ResponseWriter, r *http.Request) error {
	var req api.FileContent
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	clean, rel, err := checkPath(req.Path)
	if err != nil {
		return err
	}
	mode, err := parseMode(req.Mode, 0o644)
	if err != nil {
		return err
	}
	if len(req.Content) > api.MaxFileWriteBytes {
		return fmt.Errorf("%w: content is %d bytes, more than %d; use /v1/uploads", ErrTooLarge, len(req.Content), api.MaxFileWriteBytes)
	}
	if err := checkDeny(req.Deny); err != nil {
		return err
	}
	root, rel, err := s.openResolved(clean, rel, false)
	if err != nil {
		return err
	}
	defer root.Close()
	dir, rel, err := s.writeDir(root, clean, rel, req.Parents == nil || *req.Parents, req.Deny)
	if err != nil {
		return err
	}
	if dir != root {
		defer dir.Close()
	}
	f, tmp, err := createTemp(dir, rel)
	if err != nil {
		return rootErr(clean, err)
	}
	if _, err := f.Write(req.Content); err != nil {
		f.Close()
		_ = dir.Remove(tmp)
		return rootErr(clean, err)
	}
	if err := s.commitTemp(dir, f, tmp, rel, mode); err != nil {
		return rootErr(clean, err)
	}
	fi, err := dir.Lstat(rel)
	if err != nil {
		return rootErr(clean, err)
	}
	writeJSON(w, http.StatusOK, fileInfo(dir, clean, rel, fi))
	return nil
}

// writeDir prepares the write of rel (resolved in root) and returns the
// directory handle and name to write it through. Without deny that is
// root and rel, after prepareParent. With deny it is the target's own
// directory, opened once and checked against the Deny directories (see
// deny.go), and the target's last component.
func (s *Server) writeDir(root *os.Root, clean, rel string, parents bool, deny []string) (*os.Root, string, error) {
	if len(deny) == 0 {
		return root, rel, s.prepareParent(root, clean, rel, parents)
	}
	g, err := newDenyGuard(root, deny)
	if err != nil {
		return nil, "", err
	}
	dir, name, err := s.openParentGuarded(root, g, clean, rel, parents)
	if err != nil {
		return nil, "", err
	}
	if err := g.checkTarget(dir, name, clean, false); err != nil {
		dir.Close()
		return nil, "", err
	}
	if fi, err := dir.Lstat(name); err == nil && fi.IsDir() {
		dir.Close()
		return nil, "", fmt.Errorf("%w: %s is a directory; delete it first or pick another path", ErrConflict, clean)
	}
	return dir, name, nil
}

// handleDelete answers DELETE /v1/files?path=&recursive=.
func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request) error {
	clean, rel, err := checkPath(r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	recursive, err := queryBool(r, "recursive")
	if err != nil {
		return err
	}
	if rel == "." {
		return fmt.Errorf("%w: refusing to delete /", ErrBadRequest)
	}
	if !strings.Contains(rel, "/") {
		return fmt.Errorf("%w: refusing to delete the top-level directory %s; delete what is inside it", ErrBadRequest, clean)
	}
	deny := r.URL.Query()["deny"]
	if err := checkDeny(deny); err != nil {
		return err
	}
	// Parents may be links; what they lead to gets the same refusals.
	root, rel, err := s.openResolved(clean, rel, false)
	if err != nil {
		return err
	}
	defer root.Close()
	if rel == "." || !strings.Contains(rel, "/") {
		return fmt.Errorf("%w: %s leads to / or a top-level directory (/%s) through a symbolic link; refusing to delete it", ErrBadRequest, clean, rel)
	}
	dir := root
	if len(deny) > 0 {
		g, err := newDenyGuard(root, deny)
		if err != nil {
			return err
		}
		if dir, rel, err = s.openParentGuarded(root, g, clean, rel, false); err != nil {
			return err
		}
		defer dir.Close()
		if err := g.checkTarget(dir, rel, clean, recursive); err != nil {
			return err
		}
	}
	fi, err := dir.Lstat(rel)
	if err != nil {
		return rootErr(clean, err)
	}
	if fi.IsDir() && recursive {
		err = dir.RemoveAll(rel)
	} else {
		err = dir.Remove(rel)
		if fi.IsDir() && (errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST)) {
			return fmt.Errorf("%w: directory %s is not empty; pass recursive=true to delete it with its contents", ErrConflict, clean)
		}
	}
	if err != nil {
		return rootErr(clean, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// handleRange answers GET /v1/files/range?path=&offset=&length=&checksum=.
func (s *Server) handleRange(w http.ResponseWriter, r *http.Request) error {
	clean, rel, err := checkPath(r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	offset, err := queryInt(r, "offset", 0, 0, 1<<62)
	if err != nil {
		return err
	}
	length, err := queryInt(r, "length", api.MaxRangeBytes, 1, api.MaxRangeBytes)
	if err != nil {
		return err
	}
	checksum, err := queryBool(r, "checksum")
	if err != nil {
		return err
	}
	root, rel, err := s.openResolved(clean, rel, true)
	if err != nil {
		return err
	}
	defer root.Close()
	f, fi, err := openRegular(root, clean, rel)
	if err != nil {
		return err
	}
	defer f.Close()
	size := fi.Size()
	if offset > size {
		return fmt.Errorf("%w: offset %d is past the end of %s (%d bytes)", ErrBadRequest, offset, clean, size)
	}
	buf := make([]byte, min(length, size-offset))
	n, err := f.ReadAt(buf, offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return rootErr(clean, err)
	}
	out := api.FileRange{Path: clean, Offset: offset, Data: buf[:n], Size: size, EOF: offset+int64(n) >= size}
	if checksum {
		h := sha256.New()
		if _, err := io.Copy(h, io.NewSectionReader(f, 0, 1<<62)); err != nil {
			return rootErr(clean, err)
		}
		out.SHA256 = hex.EncodeToString(h.Sum(nil))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
