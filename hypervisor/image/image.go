// Package image builds and stores the root filesystems sandboxes start from.
//
// An image is <dir>/<name>/image.json naming the current build, whose root
// filesystem is <dir>/<name>/builds/<build>/rootfs. A build is never
// changed after it is made: rebuilding makes a new build and switches
// image.json to it, so sandboxes and snapshots standing on the old build
// keep it. Backends record who uses a build (Use/Release) and old builds go
// once unused. Two builders exist:
//
//   - "mini": host binaries (a shell, coreutils and a few tools) with the
//     shared libraries they need, copied into a fresh tree. Builds in about a
//     second; the tests use it.
//   - "debian": a Debian root filesystem made by debootstrap from Debian's
//     package mirror, with git, curl, python3, ca-certificates, coreutils and
//     procps. Takes minutes; cached in the state dir.
//
// Both images carry a guest user "agent" (uid and gid 1000, home
// /home/agent) and an empty /workspace owned by it.
package image

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"paddock.dev/paddock/errdefs"
	"path/filepath"
	"regexp"
	"sort"
	"syscall"
	"time"
)

// ErrNotFound: no image of that name has been built.
var ErrNotFound = errdefs.New(errdefs.ErrNotFound, "image not found")

// ErrInvalidName: an image name outside [a-z0-9][a-z0-9._-]{0,63}.
var ErrInvalidName = errdefs.New(errdefs.ErrInvalidArgument, "invalid image name")

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// GuestUID and GuestGID are the guest user's ids in every image.
const (
	GuestUID  = 1000
	GuestGID  = 1000
	GuestName = "agent"
	GuestHome = "/home/agent"
)

// FormatVersion changes whenever finishTree adds something every image
// must have; images of an older format should be rebuilt.
const FormatVersion = 3

// Meta is image.json.
type Meta struct {
	Name      string    `json:"name"`
	Format    int       `json:"format"`
	Build     string    `json:"build"` // the current build's id
	Builder   string    `json:"builder"`
	CreatedAt time.Time `json:"created_at"`
	Bytes     int64     `json:"bytes"`
	Files     int       `json:"files"`
	Note      string    `json:"note,omitempty"`
}

// Store is a directory of images.
type Store struct {
	Dir string
}

// ValidName reports whether name can be an image name.
func ValidName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%w %q: use lowercase letters, digits, '.', '_' and '-', at most 64", ErrInvalidName, name)
	}
	return nil
}

// Rootfs returns the root filesystem directory of an image's current
// build.
func (s Store) Rootfs(name string) (string, error) {
	m, err := s.Get(name)
	if errors.Is(err, ErrNotFound) {
		return "", fmt.Errorf("%w: %q (build it with `paddock image build %s`)", ErrNotFound, name, name)
	}
	if err != nil {
		return "", err
	}
	if m.Build == "" { // format 2 and older: one rootfs in place
		return filepath.Join(s.Dir, name, "rootfs"), nil
	}
	return filepath.Join(s.Dir, name, "builds", m.Build, "rootfs"), nil
}

// Use records that user (a machine or snapshot id, a file name) stands on
// the build holding rootfs, so it is not removed under them.
func (s Store) Use(rootfs, user string) error {
	if !usersRE.MatchString(user) {
		return fmt.Errorf("invalid image user %q", user)
	}
	name := filepath.Base(filepath.Dir(filepath.Dir(filepath.Dir(rootfs))))
	var err error
	s.lock(name, func() { err = use(rootfs, user) })
	return err
}

// UseCurrent marks the current build of name in use by user and returns
// its rootfs, under the image's lock so a rebuild cannot remove it in
// between.
func (s Store) UseCurrent(name, user string) (string, error) {
	if !usersRE.MatchString(user) {
		return "", fmt.Errorf("invalid image user %q", user)
	}
	if err := ValidName(name); err != nil {
		return "", err
	}
	var rootfs string
	var err error
	s.lock(name, func() {
		if rootfs, err = s.Rootfs(name); err == nil {
			err = use(rootfs, user)
		}
	})
	return rootfs, err
}

// use writes the marker; the caller holds the image's lock.
func use(rootfs, user string) error {
	if _, err := os.Stat(rootfs); err != nil {
		return fmt.Errorf("%w: image build %s is gone (rebuilt or removed)", ErrNotFound, rootfs)
	}
	dir := filepath.Join(filepath.Dir(rootfs), "users")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, user), nil, 0o600)
}

// Release undoes Use, and removes the build if it is no longer current
// and nobody else uses it.
func (s Store) Release(rootfs, user string) error {
	if !usersRE.MatchString(user) {
		return fmt.Errorf("invalid image user %q", user)
	}
	err := os.Remove(filepath.Join(filepath.Dir(rootfs), "users", user))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	name := filepath.Base(filepath.Dir(filepath.Dir(filepath.Dir(rootfs))))
	if ValidName(name) == nil {
		s.prune(name)
	}
	return nil
}

// ReleaseAll drops user from every build of every image (a sweep of a
// machine whose owner died).
func (s Store) ReleaseAll(user string) {
	if !usersRE.MatchString(user) {
		return
	}
	matches, _ := filepath.Glob(filepath.Join(s.Dir, "*", "builds", "*", "users", user))
	for _, m := range matches {
		s.Release(filepath.Join(filepath.Dir(filepath.Dir(m)), "rootfs"), user)
	}
}

var usersRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// prune removes the builds of name that are not current and unused.
func (s Store) prune(name string) {
	s.lock(name, func() {
		current := ""
		if m, err := s.Get(name); err == nil {
			current = m.Build
		}
		builds, _ := os.ReadDir(filepath.Join(s.Dir, name, "builds"))
		for _, b := range builds {
			if b.Name() == current {
				continue
			}
			users, _ := os.ReadDir(filepath.Join(s.Dir, name, "builds", b.Name(), "users"))
			if len(users) == 0 {
				os.RemoveAll(filepath.Join(s.Dir, name, "builds", b.Name()))
			}
		}
		if current == "" {
			if rest, _ := os.ReadDir(filepath.Join(s.Dir, name, "builds")); len(rest) == 0 {
				os.RemoveAll(filepath.Join(s.Dir, name))
			}
		}
	})
}

// lock runs fn holding the image's lock file.
func (s Store) lock(name string, fn func()) {
	os.MkdirAll(filepath.Join(s.Dir, name), 0o755)
	f, err := os.OpenFile(filepath.Join(s.Dir, name, ".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err == nil {
		defer f.Close()
		syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
	}
	fn()
}

// Get reads an image's metadata.
func (s Store) Get(name string) (Meta, error) {
	if err := ValidName(name); err != nil {
		return Meta{}, err
	}
	b, err := os.ReadFile(filepath.Join(s.Dir, name, "image.json"))
	if errors.Is(err, os.ErrNotExist) {
		return Meta{}, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if err != nil {
		return Meta{}, err
	}
	var m Meta
	if err := json.Unmarshal(b, &m); err != nil {
		return Meta{}, fmt.Errorf("image %q: corrupt image.json: %w", name, err)
	}
	return m, nil
}

// List returns every built image, by name.
func (s Store) List() ([]Meta, error) {
	ents, err := os.ReadDir(s.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Meta
	for _, e := range ents {
		if m, err := s.Get(e.Name()); err == nil {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Remove deletes an image. Builds that sandboxes or snapshots still use
// stay until they are released.
func (s Store) Remove(name string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	m, err := s.Get(name)
	if err != nil {
		return err
	}
	if m.Build == "" {
		return os.RemoveAll(filepath.Join(s.Dir, name))
	}
	if err := os.Remove(filepath.Join(s.Dir, name, "image.json")); err != nil {
		return err
	}
	s.prune(name)
	return nil
}

// Progress receives build progress: a phase name, and done/total counts
// (total 0 when unknown).
type Progress func(phase string, done, total int)

// commit moves a finished build from tmp into place, points image.json at
// it, and prunes unused older builds.
func (s Store) commit(name, builder, tmp, note string) (Meta, error) {
	bytes, files := treeSize(filepath.Join(tmp, "rootfs"))
	build := fmt.Sprintf("b%d", time.Now().UnixNano())
	m := Meta{Name: name, Format: FormatVersion, Build: build, Builder: builder, CreatedAt: time.Now().UTC(), Bytes: bytes, Files: files, Note: note}
	var err error
	s.lock(name, func() {
		buildDir := filepath.Join(s.Dir, name, "builds", build)
		if err = os.MkdirAll(buildDir, 0o755); err != nil {
			return
		}
		if err = os.Rename(filepath.Join(tmp, "rootfs"), filepath.Join(buildDir, "rootfs")); err != nil {
			return
		}
		// An older layout (format 2) kept one rootfs in place: it is
		// replaced, as it cannot be shared safely.
		os.RemoveAll(filepath.Join(s.Dir, name, "rootfs"))
		b, _ := json.MarshalIndent(m, "", "  ")
		tmpMeta := filepath.Join(s.Dir, name, "image.json.tmp")
		if err = os.WriteFile(tmpMeta, append(b, '\n'), 0o644); err != nil {
			return
		}
		err = os.Rename(tmpMeta, filepath.Join(s.Dir, name, "image.json"))
	})
	if err != nil {
		return Meta{}, err
	}
	s.prune(name)
	return m, nil
}

func treeSize(root string) (bytes int64, files int) {
	filepath.Walk(root, func(_ string, fi os.FileInfo, err error) error {
		if err == nil {
			files++
			if fi.Mode().IsRegular() {
				bytes += fi.Size()
			}
		}
		return nil
	})
	return
}

// finishTree adds what every image needs: the guest user, /workspace,
// mount points and a hostname file.
func finishTree(root string) error {
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{
		{"proc", 0o555}, {"sys", 0o555}, {"dev", 0o755}, {"run", 0o755},
		{"tmp", 0o1777}, {"var/tmp", 0o1777}, {"root", 0o700}, {"etc", 0o755},
		{"workspace", 0o755}, {"home/agent", 0o755},
	} {
		p := filepath.Join(root, d.path)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
		if err := os.Chmod(p, d.mode|os.ModeSticky&d.mode); err != nil {
			return err
		}
	}
	for _, d := range []string{"tmp", "var/tmp"} {
		if err := os.Chmod(filepath.Join(root, d), 0o777|os.ModeSticky); err != nil {
			return err
		}
	}
	for _, d := range []string{"workspace", "home/agent"} {
		if err := os.Chown(filepath.Join(root, d), GuestUID, GuestGID); err != nil {
			return err
		}
	}
	if err := ensureLine(filepath.Join(root, "etc/passwd"), "root:", "root:x:0:0:root:/root:/bin/sh"); err != nil {
		return err
	}
	if err := ensureLine(filepath.Join(root, "etc/passwd"), GuestName+":", fmt.Sprintf("%s:x:%d:%d:Paddock agent:%s:/bin/sh", GuestName, GuestUID, GuestGID, GuestHome)); err != nil {
		return err
	}
	if err := ensureLine(filepath.Join(root, "etc/group"), "root:", "root:x:0:"); err != nil {
		return err
	}
	if err := ensureLine(filepath.Join(root, "etc/group"), GuestName+":", fmt.Sprintf("%s:x:%d:", GuestName, GuestGID)); err != nil {
		return err
	}
	// Each machine gets its own machine-id, bind-mounted over this one at
	// boot (forks of one snapshot must not share it).
	if _, err := os.Stat(filepath.Join(root, "etc/machine-id")); errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(filepath.Join(root, "etc/machine-id"), []byte("uninitialized\n"), 0o444); err != nil {
			return err
		}
	}
	if _, err := os.Stat(filepath.Join(root, "etc/hosts")); errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(filepath.Join(root, "etc/hosts"), []byte("127.0.0.1 localhost\n::1 localhost\n"), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// ensureLine appends line to file unless a line starting with prefix exists.
func ensureLine(file, prefix, line string) error {
	b, err := os.ReadFile(file)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, l := range splitLines(string(b)) {
		if len(l) >= len(prefix) && l[:len(prefix)] == prefix {
			return nil
		}
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		b = append(b, '\n')
	}
	b = append(b, line+"\n"...)
	return os.WriteFile(file, b, 0o644)
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
