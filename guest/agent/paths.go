package agent

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"

	"paddock.dev/paddock/guest/api"
)

const maxPathLen = 4096

// checkPath validates a path given by the host and returns it cleaned
// ("/a//b/" becomes "/a/b") with its form relative to the root ("a/b",
// "." for "/"), which is what os.Root methods take.
func checkPath(p string) (clean, rel string, err error) {
	switch {
	case p == "":
		return "", "", fmt.Errorf("%w: path is empty; give an absolute path such as /workspace/file", ErrBadRequest)
	case len(p) > maxPathLen:
		return "", "", fmt.Errorf("%w: path is %d bytes long, more than %d", ErrBadRequest, len(p), maxPathLen)
	case strings.ContainsRune(p, 0):
		return "", "", fmt.Errorf("%w: path contains a NUL byte", ErrBadRequest)
	case strings.ContainsAny(p, "\n\r"):
		return "", "", fmt.Errorf("%w: path contains a newline", ErrBadRequest)
	case !strings.HasPrefix(p, "/"):
		return "", "", fmt.Errorf("%w: path %q is relative; give an absolute path", ErrBadRequest, p)
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return "", "", fmt.Errorf("%w: path %q has a .. component; give it without", ErrBadRequest, p)
		}
	}
	clean = path.Clean(p)
	rel = strings.TrimPrefix(clean, "/")
	if rel == "" {
		rel = "."
	}
	return clean, rel, nil
}

// parseMode reads an octal permission string such as "0644" or "755".
func parseMode(v string, def fs.FileMode) (fs.FileMode, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseUint(v, 8, 32)
	if err != nil || n > 0o7777 {
		return 0, fmt.Errorf("%w: mode %q must be octal permission bits such as 0644", ErrBadRequest, v)
	}
	m := fs.FileMode(n & 0o777)
	if n&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if n&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if n&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m, nil
}

// modeString renders the unix permission bits of fi as four octal digits.
func modeString(fi fs.FileInfo) string {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf("%04o", st.Mode&0o7777)
	}
	return fmt.Sprintf("%04o", fi.Mode().Perm())
}

func fileType(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return api.TypeFile
	case m.IsDir():
		return api.TypeDir
	case m&fs.ModeSymlink != 0:
		return api.TypeSymlink
	}
	return api.TypeOther
}

// maxSymlinks bounds the links followed while resolving one path (the
// kernel's own limit is 40).
const maxSymlinks = 40

// resolveInRoot rewrites rel so that no symbolic link in it (in its last
// component only when followLast) points outside the root: links are
// expanded with the root as "/", the way openat2(RESOLVE_IN_ROOT) does, so
// an absolute link such as /etc/alternatives/x -> /usr/bin/x works inside
// a sandbox. The result is then opened through os.Root, which still refuses
// any link that escapes, so a link swapped in after resolving cannot lead
// out. Components that do not exist are kept as they are (they may be
// about to be created).
func resolveInRoot(root *os.Root, rel string, followLast bool) (string, error) {
	todo := strings.Split(rel, "/")
	var done []string
	links := 0
	for len(todo) > 0 {
		part := todo[0]
		todo = todo[1:]
		switch part {
		case "", ".":
			continue
		case "..":
			if len(done) > 0 {
				done = done[:len(done)-1]
			}
			continue
		}
		if len(todo) == 0 && !followLast {
			done = append(done, part)
			break
		}
		cur := path.Join(append(append([]string{}, done...), part)...)
		fi, err := root.Lstat(cur)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			done = append(done, part)
			continue
		}
		if links++; links > maxSymlinks {
			return "", &fs.PathError{Op: "resolve", Path: "/" + rel, Err: syscall.ELOOP}
		}
		target, err := root.Readlink(cur)
		if err != nil {
			return "", err
		}
		if strings.HasPrefix(target, "/") {
			done = done[:0]
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	if len(done) == 0 {
		return ".", nil
	}
	return strings.Join(done, "/"), nil
}

// openResolved opens the root for one request and resolves rel in it (see
// resolveInRoot); errors name the path as the caller gave it.
func (s *Server) openResolved(clean, rel string, followLast bool) (*os.Root, string, error) {
	root, err := s.openRoot()
	if err != nil {
		return nil, "", err
	}
	resolved, err := resolveInRoot(root, rel, followLast)
	if err != nil {
		root.Close()
		return nil, "", rootErr(clean, err)
	}
	if err := agentProcErr(clean, rel, resolved); err != nil {
		root.Close()
		return nil, "", err
	}
	return root, resolved, nil
}

// agentProcErr refuses the agent's own /proc entries. The files routes
// run in a thread of the agent's process, lowered to the guest user, and
// a process may always look at itself: /proc/self/fd, environ, maps and
// root would show the agent's descriptors (state paths of the host),
// memory and environment to the sandbox. So /proc/self, /proc/thread-self
// and /proc/<agent pid> (and /proc/<tid> of each agent thread) are
// refused, as given and with links followed (resolved); other processes'
// entries are the guest user's to read as the kernel allows.
func agentProcErr(clean string, rels ...string) error {
	pid := os.Getpid()
	for _, rel := range rels {
		parts := strings.SplitN(rel, "/", 3)
		if len(parts) < 2 || parts[0] != "proc" {
			continue
		}
		p := parts[1]
		mine := p == "self" || p == "thread-self" || p == strconv.Itoa(pid)
		if !mine {
			if n, err := strconv.Atoi(p); err == nil && n > 0 {
				_, err := os.Lstat(fmt.Sprintf("/proc/%d/task/%d", pid, n))
				mine = err == nil
			}
		}
		if mine {
			return withCode(api.CodeAgentProcess, fmt.Errorf("%w: %s is the guest agent's own process (/proc/self, /proc/thread-self, /proc/%d and its threads), which the files routes do not open; look at a command's process, or run ls or cat as a command",
				ErrForbidden, clean, pid))
		}
	}
	return nil
}

// openRoot opens Config.Root for one request.
func (s *Server) openRoot() (*os.Root, error) {
	root, err := os.OpenRoot(s.cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("open root %s: %w", s.cfg.Root, err)
	}
	return root, nil
}

// createTemp creates an empty private file beside rel, to be renamed over
// it once complete.
func createTemp(root *os.Root, rel string) (*os.File, string, error) {
	dir, base := path.Split(rel)
	if len(base) > 200 {
		base = base[:200]
	}
	for range 10 {
		name := path.Join(dir, "."+base+".paddock-"+randomHex(6))
		f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, name, err
	}
	return nil, "", fmt.Errorf("create a temporary file beside %s: too many collisions", rel)
}

// commitTemp sets the mode and owner of the temporary file and renames it
// over rel. It removes the temporary file on failure. (Written as the
// guest user, the file is its own already; the chown gives it the guest's
// group where a set-group-ID directory gave it another.)
func (s *Server) commitTemp(root *os.Root, f *os.File, tmp, rel string, mode fs.FileMode) error {
	err := f.Chmod(mode)
	if err == nil && s.chown {
		err = f.Chown(s.uid, s.gid)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, rel)
	}
	if err != nil {
		_ = root.Remove(tmp)
	}
	return err
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
