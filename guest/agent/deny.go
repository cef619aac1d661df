package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"paddock.dev/paddock/guest/api"
)

// A write, delete or upload complete may carry Deny directories (see
// api.MaxDeny). The host checks them first, but what holds is this: the
// directory the call writes in is opened once, every change is made
// relative to that handle, and before it the handle's ancestry is walked
// with ".." and compared by (device, inode) with the Deny directories. A
// link swapped on the way after the check cannot lead the write anywhere
// else, because nothing is looked up by path again.

// fileID is the identity of a file: its device and inode numbers.
type fileID struct{ dev, ino uint64 }

func statID(st *unix.Stat_t) fileID { return fileID{dev: uint64(st.Dev), ino: st.Ino} }

// infoID returns the identity of fi, which came from a stat on Linux.
func infoID(fi fs.FileInfo) (fileID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{dev: uint64(st.Dev), ino: st.Ino}, true
}

// checkDeny validates the Deny list the host sent.
func checkDeny(deny []string) error {
	if len(deny) > api.MaxDeny {
		return fmt.Errorf("%w: deny holds %d directories, more than %d", ErrBadRequest, len(deny), api.MaxDeny)
	}
	for _, d := range deny {
		if d == "" || len(d) > maxPathLen || !strings.HasPrefix(d, "/") || path.Clean(d) != d || strings.ContainsAny(d, "\x00\n\r") {
			return fmt.Errorf("%w: deny directory %q must be a clean absolute path such as /workspace", ErrBadRequest, d)
		}
	}
	return nil
}

// denyGuard holds the Deny directories of one call by identity.
type denyGuard struct {
	root   *os.Root
	rootID fileID
	paths  []string // the Deny directories that exist, as given
	ids    []fileID // their identities, index for index
}

// newDenyGuard resolves each Deny directory in root (links followed the
// way resolveInRoot does) and records its identity. One that does not
// exist is skipped: it denies nothing.
func newDenyGuard(root *os.Root, deny []string) (*denyGuard, error) {
	fi, err := root.Stat(".")
	if err != nil {
		return nil, rootErr("/", err)
	}
	id, ok := infoID(fi)
	if !ok {
		return nil, fmt.Errorf("stat of the root has no inode number")
	}
	g := &denyGuard{root: root, rootID: id}
	for _, d := range deny {
		rel := strings.TrimPrefix(d, "/")
		if rel == "" {
			rel = "."
		}
		resolved, err := resolveInRoot(root, rel, true)
		if err == nil {
			fi, err = root.Stat(resolved)
		}
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("deny directory %s: %w", d, rootErr(d, err))
		}
		if id, ok := infoID(fi); ok {
			g.paths, g.ids = append(g.paths, d), append(g.ids, id)
		}
	}
	return g, nil
}

// denied returns the Deny directory with identity id, if any.
func (g *denyGuard) denied(id fileID) (string, bool) {
	for i, d := range g.ids {
		if d == id {
			return g.paths[i], true
		}
	}
	return "", false
}

// maxDepth bounds the walk up from a directory to the root.
const maxDepth = maxPathLen / 2

// checkDir refuses (ErrForbidden) when dir, or any directory above it up
// to the root, is a Deny directory, and when dir is not under the root at
// all. clean names the request's path in errors.
func (g *denyGuard) checkDir(dir *os.Root, clean string) error {
	f, err := dir.Open(".")
	if err != nil {
		return rootErr(path.Dir(clean), err)
	}
	defer f.Close()
	cur := int(f.Fd())
	closeCur := func() {}
	defer func() { closeCur() }()
	var st unix.Stat_t
	for range maxDepth {
		if err := unix.Fstat(cur, &st); err != nil {
			return fmt.Errorf("check the directories above %s: %w", clean, err)
		}
		id := statID(&st)
		if d, ok := g.denied(id); ok {
			return fmt.Errorf("%w: %s is under %s, which this call may not change", ErrForbidden, clean, d)
		}
		if id == g.rootID {
			return nil
		}
		up, err := unix.Openat(cur, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("%w: the directory of %s is no longer reachable from the root (%v)", ErrForbidden, clean, err)
		}
		var upSt unix.Stat_t
		if err := unix.Fstat(up, &upSt); err != nil {
			unix.Close(up)
			return fmt.Errorf("check the directories above %s: %w", clean, err)
		}
		if statID(&upSt) == id {
			unix.Close(up)
			return fmt.Errorf("%w: the directory of %s is outside the root", ErrForbidden, clean)
		}
		closeCur()
		cur = up
		closeCur = func() { unix.Close(up) }
	}
	return fmt.Errorf("%w: the directory of %s is more than %d levels deep", ErrForbidden, clean, maxDepth)
}

// checkTarget refuses when name in dir (not following a final link) is a
// Deny directory, or, when holding is set, a directory above one (a
// recursive delete would reach it).
func (g *denyGuard) checkTarget(dir *os.Root, name, clean string, holding bool) error {
	fi, err := dir.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return rootErr(clean, err)
	}
	id, ok := infoID(fi)
	if !ok {
		return nil
	}
	if d, ok := g.denied(id); ok {
		return fmt.Errorf("%w: %s is %s, which this call may not change", ErrForbidden, clean, d)
	}
	if !holding || !fi.IsDir() {
		return nil
	}
	for i, d := range g.paths {
		above, err := g.above(g.ids[i], d, id)
		if err != nil {
			return err
		}
		if above {
			return fmt.Errorf("%w: %s holds %s, which this call may not change", ErrForbidden, clean, d)
		}
	}
	return nil
}

// above reports whether the directory with identity target is the Deny
// directory d (identity want) or lies above it.
func (g *denyGuard) above(want fileID, d string, target fileID) (bool, error) {
	rel := strings.TrimPrefix(d, "/")
	if rel == "" {
		rel = "."
	}
	resolved, err := resolveInRoot(g.root, rel, true)
	if err != nil {
		return false, rootErr(d, err)
	}
	f, err := g.root.Open(resolved)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, rootErr(d, err)
	}
	defer f.Close()
	cur := int(f.Fd())
	var st unix.Stat_t
	if err := unix.Fstat(cur, &st); err != nil || statID(&st) != want {
		// d changed since the guard was made: be safe.
		return true, nil
	}
	closeCur := func() {}
	defer func() { closeCur() }()
	for range maxDepth {
		id := statID(&st)
		if id == target {
			return true, nil
		}
		if id == g.rootID {
			return false, nil
		}
		up, err := unix.Openat(cur, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return true, nil
		}
		closeCur()
		cur = up
		closeCur = func() { unix.Close(up) }
		if err := unix.Fstat(cur, &st); err != nil || statID(&st) == id {
			return true, nil
		}
	}
	return true, nil
}

// openParentGuarded opens the directory holding rel (already resolved in
// root) as its own *os.Root, one component at a time, creating missing
// ones when parents is set, and checks it against g: every directory it
// creates a child in, and the one it returns, must not be under a Deny
// directory. It returns the handle and the name of the target in it; all
// changes to the target must go through that handle.
func (s *Server) openParentGuarded(root *os.Root, g *denyGuard, clean, rel string, parents bool) (*os.Root, string, error) {
	if rel == "." {
		return nil, "", fmt.Errorf("%w: / is a directory; give a file path", ErrBadRequest)
	}
	dirRel, name := path.Split(rel)
	cur, err := root.OpenRoot(".")
	if err != nil {
		return nil, "", rootErr("/", err)
	}
	done := "/"
	for _, part := range strings.Split(strings.TrimSuffix(dirRel, "/"), "/") {
		if part == "" {
			continue
		}
		next, err := cur.OpenRoot(part)
		if errors.Is(err, fs.ErrNotExist) && parents {
			if err := g.checkDir(cur, path.Join(done, part)); err != nil {
				cur.Close()
				return nil, "", err
			}
			err = cur.Mkdir(part, 0o755)
			if err == nil && s.chown {
				err = cur.Lchown(part, s.uid, s.gid)
			}
			if err == nil || errors.Is(err, fs.ErrExist) {
				next, err = cur.OpenRoot(part)
			}
		}
		cur.Close()
		done = path.Join(done, part)
		switch {
		case err == nil:
		case errors.Is(err, fs.ErrNotExist) && !parents:
			return nil, "", fmt.Errorf("%w: directory %s does not exist; create it or set parents", ErrNotFound, path.Dir(clean))
		case errors.Is(err, syscall.ENOTDIR):
			return nil, "", fmt.Errorf("%w: %s exists and is not a directory", ErrConflict, done)
		default:
			return nil, "", rootErr(done, err)
		}
		cur = next
	}
	if err := g.checkDir(cur, clean); err != nil {
		cur.Close()
		return nil, "", err
	}
	return cur, name, nil
}
