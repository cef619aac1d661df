package procbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// keptXattrs are the overlayfs attributes that give a layer its meaning
// (an opaque directory hides the layers below it). Others that overlayfs
// writes for its own bookkeeping (origin, impure) refer to the old mount
// and are dropped.
var keptXattrs = map[string]bool{
	"trusted.overlay.opaque":   true,
	"trusted.overlay.redirect": true,
}

// copyTree copies an overlayfs upper directory to dst, preserving what a
// layer needs: file contents, modes, owners, times, symlinks, hard links,
// whiteouts (0:0 character devices), device nodes, fifos and the overlay
// xattrs. It returns the bytes of regular file data copied.
func copyTree(ctx context.Context, src, dst string) (int64, error) {
	var total int64
	links := map[uint64]string{} // inode → first copied path, for hard links
	err := filepath.Walk(src, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		st, ok := fi.Sys().(*unixStat)
		if !ok {
			return fmt.Errorf("%s: no stat data", path)
		}
		mode := fi.Mode()
		switch {
		case mode.IsDir():
			if err := os.Mkdir(target, 0o700); err != nil && !(rel == "." && errors.Is(err, os.ErrExist)) {
				return err
			}
		case mode&os.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			if err := os.Symlink(link, target); err != nil {
				return err
			}
		case mode.IsRegular():
			if st.Nlink > 1 {
				if first, ok := links[st.Ino]; ok {
					return os.Link(first, target)
				}
				links[st.Ino] = target
			}
			n, err := copyFile(path, target)
			if err != nil {
				return err
			}
			total += n
		case mode&(os.ModeDevice|os.ModeCharDevice|os.ModeNamedPipe) != 0:
			if err := unix.Mknod(target, st.Mode, int(st.Rdev)); err != nil {
				return fmt.Errorf("mknod %s: %w", target, err)
			}
		default:
			return nil // sockets do not survive a checkpoint
		}
		if err := copyXattrs(path, target); err != nil {
			return err
		}
		if err := os.Lchown(target, int(st.Uid), int(st.Gid)); err != nil {
			return err
		}
		if mode&os.ModeSymlink == 0 {
			if err := unix.Chmod(target, st.Mode&0o7777); err != nil {
				return err
			}
		}
		ts := []unix.Timespec{{Sec: st.Atim.Sec, Nsec: st.Atim.Nsec}, {Sec: st.Mtim.Sec, Nsec: st.Mtim.Nsec}}
		return unix.UtimesNanoAt(unix.AT_FDCWD, target, ts, unix.AT_SYMLINK_NOFOLLOW)
	})
	return total, err
}

type unixStat = syscall.Stat_t

func copyFile(src, dst string) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}

func copyXattrs(src, dst string) error {
	sz, err := unix.Llistxattr(src, nil)
	if err != nil || sz == 0 {
		return nil
	}
	buf := make([]byte, sz)
	sz, err = unix.Llistxattr(src, buf)
	if err != nil {
		return nil
	}
	for _, name := range strings.Split(strings.TrimRight(string(buf[:sz]), "\x00"), "\x00") {
		if !keptXattrs[name] && !strings.HasPrefix(name, "user.") && !strings.HasPrefix(name, "security.capability") {
			continue
		}
		vsz, err := unix.Lgetxattr(src, name, nil)
		if err != nil {
			continue
		}
		val := make([]byte, vsz)
		vsz, err = unix.Lgetxattr(src, name, val)
		if err != nil {
			continue
		}
		if err := unix.Lsetxattr(dst, name, val[:vsz], 0); err != nil {
			return fmt.Errorf("set %s on %s: %w", name, dst, err)
		}
	}
	return nil
}
