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
// of anything else. Like every files route it acts as the guest user.
func (s *Server) handleList(w http.ResponseWriter, r *http.Request) error {
	clean, rel, err := checkPath(r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	var out api.Listing
	err = s.asGuest("list", clean, func() error {
		l, err := s.list(clean, rel)
		if err == nil {
			out = *l
		}
		return err
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) list(clean, rel string) (*api.Listing, error) {
	root, rel, err := s.openResolved(clean, rel, false)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	lfi, err := root.Lstat(rel)
	if err != nil {
		return nil, rootErr(clean, err)
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
		return &api.Listing{Kind: "file", Path: clean, Entries: []api.FileInfo{self}, Self: &self}, nil
	}
	dir, err := root.Open(rel)
	if err != nil {
		return nil, rootErr(clean, err)
	}
	defer dir.Close()
	names, err := dir.Readdirnames(api.MaxListEntries + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, rootErr(clean, err)
	}
	out := &api.Listing{Kind: "dir", Path: clean, Entries: []api.FileInfo{}, Self: &self}
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
	return out, nil
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
	var out api.FileContent
	err = s.asGuest("read", clean, func() error {
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
		out = api.FileContent{Path: clean, Content: data, Mode: modeString(fi)}
		return nil
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// handleWriteFile answers PUT /v1/files/content: the content goes to a
// temporary file beside the target, renamed over it when complete. It
// acts as the guest user (guestuser.go) and never changes the places the
// guard protects (deny.go).
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
	if err := checkExec(req.Exec); err != nil {
		return err
	}
	var out api.FileInfo
	err = s.asGuest("write", clean, func() error {
		dir, name, err := s.writeTarget(clean, rel, req.Deny, req.Exec, req.Parents == nil || *req.Parents)
		if err != nil {
			return err
		}
		defer dir.Close()
		f, tmp, err := createTemp(dir, name)
		if err != nil {
			return rootErr(clean, err)
		}
		if _, err := f.Write(req.Content); err != nil {
			f.Close()
			_ = dir.Remove(tmp)
			return rootErr(clean, err)
		}
		if err := s.commitTemp(dir, f, tmp, name, mode); err != nil {
			return rootErr(clean, err)
		}
		fi, err := dir.Lstat(name)
		if err != nil {
			return rootErr(clean, err)
		}
		out = fileInfo(dir, clean, name, fi)
		return nil
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// writeTarget opens the directory a write or upload of clean goes through
// (openTarget) and checks the target is not a directory. It returns the
// handle, which the caller closes, and the target's name in it.
func (s *Server) writeTarget(clean, rel string, deny, exec []string, parents bool) (*os.Root, string, error) {
	if rel == "." {
		return nil, "", fmt.Errorf("%w: / is a directory; give a file path", ErrBadRequest)
	}
	root, resolved, err := s.openResolved(clean, rel, false)
	if err != nil {
		return nil, "", err
	}
	defer root.Close()
	dir, name, err := s.openTarget(root, clean, rel, resolved, deny, exec, parents, false)
	if err != nil {
		return nil, "", err
	}
	if fi, err := dir.Lstat(name); err == nil && fi.IsDir() {
		dir.Close()
		return nil, "", fmt.Errorf("%w: %s is a directory; delete it first or pick another path", ErrConflict, clean)
	}
	return dir, name, nil
}

// handleDelete answers DELETE /v1/files?path=&recursive=&deny=&exec=, as
// the guest user and never in the places the guard protects.
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
	deny, exec := r.URL.Query()["deny"], r.URL.Query()["exec"]
	if err := checkDeny(deny); err != nil {
		return err
	}
	if err := checkExec(exec); err != nil {
		return err
	}
	err = s.asGuest("delete", clean, func() error {
		// Parents may be links; what they lead to gets the same refusals.
		root, resolved, err := s.openResolved(clean, rel, false)
		if err != nil {
			return err
		}
		defer root.Close()
		if resolved == "." || !strings.Contains(resolved, "/") {
			return fmt.Errorf("%w: %s leads to / or a top-level directory (/%s) through a symbolic link; refusing to delete it", ErrBadRequest, clean, resolved)
		}
		dir, name, err := s.openTarget(root, clean, rel, resolved, deny, exec, false, recursive)
		if err != nil {
			return err
		}
		defer dir.Close()
		fi, err := dir.Lstat(name)
		if err != nil {
			return rootErr(clean, err)
		}
		if fi.IsDir() && recursive {
			err = dir.RemoveAll(name)
		} else {
			err = dir.Remove(name)
			if fi.IsDir() && (errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST)) {
				return fmt.Errorf("%w: directory %s is not empty; pass recursive=true to delete it with its contents", ErrConflict, clean)
			}
		}
		return rootErr(clean, err)
	})
	if err != nil {
		return err
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
	var out api.FileRange
	err = s.asGuest("read", clean, func() error {
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
		out = api.FileRange{Path: clean, Offset: offset, Data: buf[:n], Size: size, EOF: offset+int64(n) >= size}
		if checksum {
			h := sha256.New()
			if _, err := io.Copy(h, io.NewSectionReader(f, 0, 1<<62)); err != nil {
				return rootErr(clean, err)
			}
			out.SHA256 = hex.EncodeToString(h.Sum(nil))
		}
		return nil
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// handleWorkspace answers POST /v1/workspace (api.WorkspaceSetup), the
// host's own call at create, before any command of the sandbox ran: the
// workspace may lie in a directory only root can write (/srv/app), so it
// is made as root, each directory made handed to the guest user. A
// directory that exists is left as it is, and nothing under the system
// directories is made.
func (s *Server) handleWorkspace(w http.ResponseWriter, r *http.Request) error {
	var req api.WorkspaceSetup
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	clean, rel, err := checkPath(req.Path)
	if err != nil {
		return err
	}
	if rel == "." {
		return fmt.Errorf("%w: the workspace cannot be /", ErrBadRequest)
	}
	root, resolved, err := s.openResolved(clean, rel, true)
	if err != nil {
		return err
	}
	defer root.Close()
	g, err := s.newGuard(root, nil, nil)
	if err != nil {
		return err
	}
	if err := g.checkPaths(clean, rel, resolved); err != nil {
		return err
	}
	dir, name, err := s.openParentGuarded(root, g, clean, resolved, true)
	if err != nil {
		return err
	}
	defer dir.Close()
	switch err := dir.Mkdir(name, 0o755); {
	case err == nil && s.chown:
		if err := dir.Lchown(name, s.uid, s.gid); err != nil {
			return rootErr(clean, err)
		}
	case err == nil, errors.Is(err, fs.ErrExist):
	default:
		return rootErr(clean, err)
	}
	fi, err := dir.Lstat(name)
	if err != nil {
		return rootErr(clean, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s exists and is not a directory", ErrConflict, clean)
	}
	ws, err := dir.OpenRoot(name)
	if err != nil {
		return rootErr(clean, err)
	}
	err = g.checkDir(ws, clean)
	ws.Close()
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, fileInfo(dir, clean, name, fi))
	return nil
}
