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

// A write, delete or upload complete may not change three kinds of place
// (on top of the guest user's permissions, guestuser.go):
//
//   - the system directories: api.SystemDirs and the agent's own spool
//     and upload directories, always, whoever owns them;
//   - the Deny directories the host sends (a read-only workspace, see
//     api.MaxDeny);
//   - the Exec programs the host sends (the session's execute allow-list,
//     see api.MaxExecList): each program, every symbolic link on the way
//     to it, every directory holding it.
//
// Two checks hold them. Before anything changes, the call's path, as given
// and with its links followed, is compared with each protected place, as
// given and with its links followed: that one gives the clear message.
// Then what holds against a link swapped in between: the directory the
// call writes in is opened once, every change is made relative to that
// handle, and before it the handle's ancestry is walked with ".." and
// compared by (device, inode) with the protected directories, and the
// handle and the name with the directory and name of each program's
// places. Nothing is looked up by path again.

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
	return checkPathList("deny", "directory", deny, api.MaxDeny)
}

// checkExec validates the Exec list the host sent.
func checkExec(exec []string) error {
	return checkPathList("exec", "program", exec, api.MaxExecList)
}

func checkPathList(field, what string, list []string, max int) error {
	if len(list) > max {
		return fmt.Errorf("%w: %s holds %d entries, more than %d", ErrBadRequest, field, len(list), max)
	}
	for _, d := range list {
		if d == "" || len(d) > maxPathLen || !strings.HasPrefix(d, "/") || path.Clean(d) != d || strings.ContainsAny(d, "\x00\n\r") {
			return fmt.Errorf("%w: %s %s %q must be a clean absolute path such as /workspace", ErrBadRequest, field, what, d)
		}
	}
	return nil
}

// relOf is the form of a clean absolute path that os.Root takes.
func relOf(p string) string {
	if rel := strings.TrimPrefix(p, "/"); rel != "" {
		return rel
	}
	return "."
}

// withinRel reports whether p is dir or lies under it (both in relOf form).
func withinRel(p, dir string) bool {
	return dir == "." || p == dir || strings.HasPrefix(p, dir+"/")
}

// protectedDir is a directory no call may change anything under.
type protectedDir struct {
	path   string   // as given
	forms  []string // relative to the root: as given, then with links followed
	id     fileID   // identity, when exists
	exists bool
	system bool // one of the system directories (else a Deny directory)
}

// resolved is the form with links followed.
func (d protectedDir) resolved() string { return d.forms[len(d.forms)-1] }

// progPlace is one place whose name decides what a program of the execute
// allow-list is: the program's path as given, and each link on the way to
// the file, with the links in its parents followed.
type progPlace struct {
	prog  string // the program as the host named it
	rel   string // the place, relative to the root
	dir   fileID // identity of the place's directory, when dirOK
	dirOK bool
}

// guard holds the protected places of one call by path and by identity.
type guard struct {
	root   *os.Root
	rootID fileID
	dirs   []protectedDir
	places []progPlace
}

// newGuard resolves the system directories, deny and exec in root (links
// followed the way resolveInRoot does) and records their identities. A
// Deny directory that does not exist is skipped: it denies nothing. A
// system directory or a program that does not exist is still refused by
// path.
func (s *Server) newGuard(root *os.Root, deny, exec []string) (*guard, error) {
	fi, err := root.Stat(".")
	if err != nil {
		return nil, rootErr("/", err)
	}
	id, ok := infoID(fi)
	if !ok {
		return nil, fmt.Errorf("stat of the root has no inode number")
	}
	g := &guard{root: root, rootID: id}
	for _, d := range s.systemDirs {
		if err := g.addDir(d, true); err != nil {
			return nil, err
		}
	}
	for _, d := range deny {
		if err := g.addDir(d, false); err != nil {
			return nil, err
		}
	}
	for _, p := range exec {
		g.addProgram(p)
	}
	return g, nil
}

func (g *guard) addDir(d string, system bool) error {
	rel := relOf(d)
	pd := protectedDir{path: d, forms: []string{rel}, system: system}
	resolved, err := resolveInRoot(g.root, rel, true)
	if err == nil {
		if resolved != rel {
			pd.forms = append(pd.forms, resolved)
		}
		var fi fs.FileInfo
		if fi, err = g.root.Stat(resolved); err == nil {
			pd.id, pd.exists = infoID(fi)
		}
	}
	switch {
	case system:
		// Refused by path even when missing or out of sight.
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("deny directory %s: %w", d, rootErr(d, err))
	}
	g.dirs = append(g.dirs, pd)
	return nil
}

// addProgram records the places of program p: p as given, then each link
// on the way to the file it names (at most maxSymlinks).
func (g *guard) addProgram(p string) {
	seen := map[string]bool{}
	add := func(rel string) {
		if seen[rel] {
			return
		}
		seen[rel] = true
		pl := progPlace{prog: p, rel: rel}
		if fi, err := g.root.Stat(path.Dir(rel)); err == nil {
			pl.dir, pl.dirOK = infoID(fi)
		}
		g.places = append(g.places, pl)
	}
	cur := relOf(p)
	add(cur)
	for range maxSymlinks {
		res, err := resolveInRoot(g.root, cur, false)
		if err != nil {
			return
		}
		add(res)
		fi, err := g.root.Lstat(res)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return
		}
		target, err := g.root.Readlink(res)
		if err != nil {
			return
		}
		if strings.HasPrefix(target, "/") {
			cur = target
		} else {
			cur = path.Dir(res) + "/" + target
		}
	}
}

// dirErr is the refusal for a path that is, lies under or holds d.
func (g *guard) dirErr(clean string, d protectedDir, how string) error {
	if !d.system {
		return fmt.Errorf("%w: %s %s %s, which this call may not change", ErrForbidden, clean, how, d.path)
	}
	return withCode(api.CodeSystemPath, fmt.Errorf("%w: %s %s %s, one of the image's system directories (%s), which the files routes never change; write in the workspace, /tmp, /var/tmp or the guest's home",
		ErrForbidden, clean, how, d.path, strings.Join(api.SystemDirs, " ")))
}

// progErr is the refusal for a path that would change program pl.prog.
func progErr(clean string, pl progPlace) error {
	return withCode(api.CodeExecProgram, fmt.Errorf("%w: %s would change %s, a program the session's execute allow-list (process.enforce \"exec\") lets start (the file, a link on the way to it, or a directory holding it); the files routes never create, replace or remove those",
		ErrForbidden, clean, pl.prog))
}

// checkPaths compares the call's path, as given (rel) and with its links
// followed (resolved), with every protected place: refused when it is one,
// lies under a protected directory, or holds either. Protected
// directories are compared as given first, so /usr/bin/git is named as
// under /usr, not under /bin (which leads to /usr/bin on merged-/usr
// images).
func (g *guard) checkPaths(clean, rel, resolved string) error {
	how := func(f, what string) string {
		if f == rel {
			return what
		}
		if what == "holds" {
			return "leads through links to what holds"
		}
		return "leads through links under"
	}
	for pass := range 2 {
		for _, f := range []string{rel, resolved} {
			for _, d := range g.dirs {
				forms := d.forms[:1]
				if pass == 1 {
					forms = d.forms[1:]
				}
				for _, df := range forms {
					if withinRel(f, df) {
						return g.dirErr(clean, d, how(f, "is under"))
					}
					if withinRel(df, f) {
						return g.dirErr(clean, d, how(f, "holds"))
					}
				}
			}
		}
	}
	for _, f := range []string{rel, resolved} {
		for _, pl := range g.places {
			if withinRel(pl.rel, f) {
				return progErr(clean, pl)
			}
		}
	}
	return nil
}

// denied returns the protected directory with identity id, if any.
func (g *guard) denied(id fileID) (protectedDir, bool) {
	for _, d := range g.dirs {
		if d.exists && d.id == id {
			return d, true
		}
	}
	return protectedDir{}, false
}

// maxDepth bounds the walk up from a directory to the root.
const maxDepth = maxPathLen / 2

// checkDir refuses (ErrForbidden) when dir, or any directory above it up
// to the root, is a protected directory, and when dir is not under the
// root at all. clean names the request's path in errors.
func (g *guard) checkDir(dir *os.Root, clean string) error {
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
			return g.dirErr(clean, d, "is under")
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

// checkTarget refuses when name in dir is the place of a program, when it
// (not following a final link) is a protected directory, or, when
// holding is set, a directory above one or above a program (a recursive
// delete would reach it).
func (g *guard) checkTarget(dir *os.Root, name, clean string, holding bool) error {
	var dirSt unix.Stat_t
	if f, err := dir.Open("."); err != nil {
		return rootErr(path.Dir(clean), err)
	} else {
		err = unix.Fstat(int(f.Fd()), &dirSt)
		f.Close()
		if err != nil {
			return fmt.Errorf("check the directory of %s: %w", clean, err)
		}
	}
	for _, pl := range g.places {
		if pl.dirOK && pl.dir == statID(&dirSt) && path.Base(pl.rel) == name {
			return progErr(clean, pl)
		}
	}
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
		return g.dirErr(clean, d, "is")
	}
	if !holding || !fi.IsDir() {
		return nil
	}
	for _, d := range g.dirs {
		if !d.exists {
			continue
		}
		above, err := g.above(d.resolved(), d.id, id)
		if err != nil {
			return rootErr(d.path, err)
		}
		if above {
			return g.dirErr(clean, d, "holds")
		}
	}
	for _, pl := range g.places {
		if !pl.dirOK {
			continue
		}
		dirRel, err := resolveInRoot(g.root, path.Dir(pl.rel), true)
		if err != nil {
			return progErr(clean, pl) // it changed since the guard was made: be safe
		}
		above, err := g.above(dirRel, pl.dir, id)
		if err != nil || above {
			return progErr(clean, pl)
		}
	}
	return nil
}

// above reports whether the directory with identity target is the
// directory at rel (resolved; identity want) or lies above it. When rel
// no longer has identity want, it says true: the place changed since the
// guard was made, so be safe.
func (g *guard) above(rel string, want, target fileID) (bool, error) {
	f, err := g.root.Open(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	cur := int(f.Fd())
	var st unix.Stat_t
	if err := unix.Fstat(cur, &st); err != nil || statID(&st) != want {
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
// ones when parents is set (handed to the guest user), and checks it
// against g: every directory it creates a child in, and the one it
// returns, must not be under a protected directory. It returns the handle
// and the name of the target in it; all changes to the target must go
// through that handle.
func (s *Server) openParentGuarded(root *os.Root, g *guard, clean, rel string, parents bool) (*os.Root, string, error) {
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

// openTarget is what a write, delete or upload complete does first: the
// guard for deny and exec, the check of the path as given (rel) and
// resolved, the target's own directory opened through openParentGuarded
// and checked with checkTarget (holding: the call may remove a directory
// and what it holds). The caller closes the returned directory.
func (s *Server) openTarget(root *os.Root, clean, rel, resolved string, deny, exec []string, parents, holding bool) (*os.Root, string, error) {
	g, err := s.newGuard(root, deny, exec)
	if err != nil {
		return nil, "", err
	}
	if err := g.checkPaths(clean, rel, resolved); err != nil {
		return nil, "", err
	}
	dir, name, err := s.openParentGuarded(root, g, clean, resolved, parents)
	if err != nil {
		return nil, "", err
	}
	if err := g.checkTarget(dir, name, clean, holding); err != nil {
		dir.Close()
		return nil, "", err
	}
	return dir, name, nil
}
