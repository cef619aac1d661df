// Package image builds and stores the root filesystems sandboxes start from.
//
// An image is a directory <dir>/<name>/rootfs plus <dir>/<name>/image.json.
// Backends use the rootfs as the read-only bottom layer of a sandbox and never
// write to it. Two builders exist:
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
	"path/filepath"
	"regexp"
	"sort"
	"time"
)

// ErrNotFound: no image of that name has been built.
var ErrNotFound = errors.New("image not found")

// ErrInvalidName: an image name outside [a-z0-9][a-z0-9._-]{0,63}.
var ErrInvalidName = errors.New("invalid image name")

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
const FormatVersion = 2

// Meta is image.json.
type Meta struct {
	Name      string    `json:"name"`
	Format    int       `json:"format"`
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

// Rootfs returns the root filesystem directory of a built image.
func (s Store) Rootfs(name string) (string, error) {
	if err := ValidName(name); err != nil {
		return "", err
	}
	dir := filepath.Join(s.Dir, name, "rootfs")
	if _, err := os.Stat(filepath.Join(s.Dir, name, "image.json")); err != nil {
		return "", fmt.Errorf("%w: %q (build it with `paddock image build %s`)", ErrNotFound, name, name)
	}
	return dir, nil
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

// Remove deletes an image. Sandboxes running from it keep their mounts
// until they stop, but must not be restarted.
func (s Store) Remove(name string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	if _, err := s.Get(name); err != nil {
		return err
	}
	return os.RemoveAll(filepath.Join(s.Dir, name))
}

// Progress receives build progress: a phase name, and done/total counts
// (total 0 when unknown).
type Progress func(phase string, done, total int)

// commit moves a finished build from tmp into place and writes image.json.
func (s Store) commit(name, builder, tmp, note string) (Meta, error) {
	bytes, files := treeSize(filepath.Join(tmp, "rootfs"))
	m := Meta{Name: name, Format: FormatVersion, Builder: builder, CreatedAt: time.Now().UTC(), Bytes: bytes, Files: files, Note: note}
	b, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(filepath.Join(tmp, "image.json"), append(b, '\n'), 0o644); err != nil {
		return Meta{}, err
	}
	final := filepath.Join(s.Dir, name)
	old := final + ".old-" + fmt.Sprint(time.Now().UnixNano())
	if err := os.Rename(final, old); err != nil && !errors.Is(err, os.ErrNotExist) {
		return Meta{}, err
	}
	if err := os.Rename(tmp, final); err != nil {
		return Meta{}, err
	}
	os.RemoveAll(old)
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
