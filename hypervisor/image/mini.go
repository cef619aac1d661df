package image

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// miniTools are copied from the host when present. A shell and coreutils
// are required; the rest are taken when the host has them.
var miniTools = []string{
	"sh", "bash", "dash", "env", "ls", "cat", "echo", "mkdir", "rm", "rmdir", "cp", "mv", "ln",
	"head", "tail", "wc", "sort", "uniq", "sleep", "true", "false", "id", "stat", "chmod", "chown",
	"touch", "dd", "tr", "cut", "grep", "sed", "find", "xargs", "sha256sum", "md5sum", "uname",
	"hostname", "stty", "tty", "timeout", "kill", "seq", "yes", "printf", "test", "[", "mktemp",
	"readlink", "realpath", "basename", "dirname", "date", "du", "df", "tee", "nproc", "expr",
	"ps", "pwd", "whoami", "cmp", "diff", "tar", "gzip", "od", "truncate", "fallocate", "sync",
	"setsid", "nohup", "which", "awk", "mawk", "base64", "split", "comm", "paste", "fold",
}

// libDirs are where the dynamic loader looks on Debian, for this machine's
// architecture.
var libDirs = func() []string {
	triplet := map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu", "riscv64": "riscv64-linux-gnu", "ppc64le": "powerpc64le-linux-gnu", "s390x": "s390x-linux-gnu", "386": "i386-linux-gnu"}[runtime.GOARCH]
	return []string{"/lib/" + triplet, "/usr/lib/" + triplet, "/lib64", "/usr/lib64", "/lib", "/usr/lib"}
}()

// BuildMini builds the "mini" image from the host's own binaries.
func (s Store) BuildMini(ctx context.Context, name string, progress Progress) (Meta, error) {
	if err := ValidName(name); err != nil {
		return Meta{}, err
	}
	if progress == nil {
		progress = func(string, int, int) {}
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return Meta{}, err
	}
	tmp, err := os.MkdirTemp(s.Dir, "."+name+".build-")
	if err != nil {
		return Meta{}, err
	}
	defer os.RemoveAll(tmp)
	root := filepath.Join(tmp, "rootfs")
	for _, d := range []string{"usr/bin", "usr/lib", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return Meta{}, err
		}
	}
	// Debian's merged /usr: /bin, /sbin and /lib are links into /usr.
	for _, l := range [][2]string{{"usr/bin", "bin"}, {"usr/bin", "sbin"}, {"usr/lib", "lib"}, {"usr/lib64", "lib64"}} {
		os.MkdirAll(filepath.Join(root, l[0]), 0o755)
		if err := os.Symlink(l[0], filepath.Join(root, l[1])); err != nil {
			return Meta{}, err
		}
	}
	c := &copier{root: root, done: map[string]bool{}}
	var found int
	for i, t := range miniTools {
		if err := ctx.Err(); err != nil {
			return Meta{}, err
		}
		progress("copying tools", i, len(miniTools))
		p, err := exec.LookPath(t)
		if err != nil {
			continue
		}
		if err := c.binary(p, filepath.Join("/usr/bin", t)); err != nil {
			return Meta{}, fmt.Errorf("copy %s: %w", p, err)
		}
		found++
	}
	progress("copying tools", len(miniTools), len(miniTools))
	if _, err := os.Stat(filepath.Join(root, "usr/bin/sh")); err != nil {
		return Meta{}, errors.New("the host has no /bin/sh to put in the mini image")
	}
	for _, f := range []string{"/etc/nsswitch.conf", "/etc/ld.so.conf"} {
		if b, err := os.ReadFile(f); err == nil {
			os.WriteFile(filepath.Join(root, f), b, 0o644)
		}
	}
	if err := finishTree(root); err != nil {
		return Meta{}, err
	}
	progress("done", 1, 1)
	return s.commit(name, "mini", tmp, fmt.Sprintf("%d host tools", found))
}

type copier struct {
	root string
	done map[string]bool
}

// binary copies the executable at src to dst inside the root, then every
// shared library it needs (and their needs), and the program interpreter.
func (c *copier) binary(src, dst string) error {
	if err := c.file(src, dst); err != nil {
		return err
	}
	return c.deps(src)
}

func (c *copier) deps(src string) error {
	f, err := elf.Open(src)
	if err != nil {
		return nil // a script: nothing to resolve
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b, err := io.ReadAll(p.Open())
			if err != nil {
				return err
			}
			interp := strings.TrimRight(string(b), "\x00")
			if err := c.lib(interp); err != nil {
				return err
			}
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return err
	}
	for _, l := range libs {
		var found string
		for _, d := range libDirs {
			if _, err := os.Stat(filepath.Join(d, l)); err == nil {
				found = filepath.Join(d, l)
				break
			}
		}
		if found == "" {
			return fmt.Errorf("library %s of %s not found", l, src)
		}
		if err := c.lib(found); err != nil {
			return err
		}
	}
	return nil
}

// lib copies a library to the same path inside the root (resolving links)
// and then its own dependencies.
func (c *copier) lib(path string) error {
	if c.done[path] {
		return nil
	}
	c.done[path] = true
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return err
	}
	// /lib64 and /lib are links in the image; write through /usr.
	dst := path
	for _, p := range []string{"/lib64/", "/lib/"} {
		if strings.HasPrefix(dst, p) {
			dst = "/usr" + dst
		}
	}
	if err := c.file(real, dst); err != nil {
		return err
	}
	return c.deps(real)
}

func (c *copier) file(src, dst string) error {
	real, err := filepath.EvalSymlinks(src)
	if err != nil {
		return err
	}
	fi, err := os.Stat(real)
	if err != nil {
		return err
	}
	target := filepath.Join(c.root, dst)
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	if _, err := os.Lstat(target); err == nil {
		return nil
	}
	in, err := os.Open(real)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
