package agent

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"slices"
	"syscall"

	"paddock.dev/paddock/guest/api"
)

// handleManifest answers POST /v1/manifest: every entry under a directory
// with its type, size, mode, sha256 (regular files) and link target.
// Symbolic links are listed, never followed.
func (s *Server) handleManifest(w http.ResponseWriter, r *http.Request) error {
	var req api.ManifestRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	clean, rel, err := checkPath(req.Path)
	if err != nil {
		return err
	}
	maxFiles := req.MaxFiles
	if maxFiles == 0 {
		maxFiles = api.MaxManifestFiles
	}
	if maxFiles < 0 || maxFiles > api.MaxManifestFiles {
		return fmt.Errorf("%w: max_files %d must be from 1 to %d", ErrBadRequest, req.MaxFiles, api.MaxManifestFiles)
	}
	hash := req.Hash == nil || *req.Hash
	root, rel, err := s.openResolved(clean, rel, true)
	if err != nil {
		return err
	}
	defer root.Close()
	fi, err := root.Lstat(rel)
	if err != nil {
		return rootErr(clean, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory", ErrBadRequest, clean)
	}
	// A root for the tree itself: nothing below can lead above it.
	tree, err := root.OpenRoot(rel)
	if err != nil {
		return rootErr(clean, err)
	}
	defer tree.Close()
	m, err := buildManifest(r, tree, maxFiles, hash)
	if err != nil {
		return err
	}
	m.Path = clean
	writeJSON(w, http.StatusOK, m)
	return nil
}

func buildManifest(r *http.Request, tree *os.Root, maxFiles int, hash bool) (*api.Manifest, error) {
	m := &api.Manifest{Entries: []api.ManifestEntry{}}
	err := fs.WalkDir(tree.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == "." {
				return err
			}
			return nil // vanished or unreadable: skip it
		}
		if p == "." {
			return nil
		}
		if err := r.Context().Err(); err != nil {
			return err
		}
		if len(m.Entries) >= maxFiles {
			m.Truncated = true
			return fs.SkipAll
		}
		fi, err := tree.Lstat(p)
		if err != nil {
			return nil
		}
		e := api.ManifestEntry{Path: p, Type: fileType(fi.Mode()), Size: fi.Size(), Mode: modeString(fi)}
		switch e.Type {
		case api.TypeSymlink:
			e.Target, _ = tree.Readlink(p)
		case api.TypeFile:
			if hash {
				e.SHA256 = hashFile(tree, p, fi)
			}
		}
		m.Entries = append(m.Entries, e)
		return nil
	})
	if err != nil && !errors.Is(err, fs.SkipAll) {
		return nil, fmt.Errorf("walk: %w", err)
	}
	slices.SortFunc(m.Entries, func(a, b api.ManifestEntry) int { return cmp.Compare(a.Path, b.Path) })
	return m, nil
}

// hashFile returns the sha256 of p, or "" when p is no longer the regular
// file that was listed (replaced while walking).
func hashFile(tree *os.Root, p string, listed fs.FileInfo) string {
	f, err := tree.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || !os.SameFile(fi, listed) {
		return ""
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}
