package image

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// DefaultName is the built-in image: what a daemon and a one-off sandbox
// start from when no image is named. It is made by the mini builder from
// the host's own tools in about a second, so it is built on first use
// rather than refused.
const DefaultName = "mini"

// EnsureBuilt builds the built-in image (DefaultName, with the mini
// builder) when name is it and no build of it exists yet, and reports
// whether this call built it. Any other name is left to the caller (a
// missing one stays ErrNotFound there, with its hint). Callers in one
// process or several build it once: they take turns on a lock file in the
// images directory, and those after the first find its build.
func (s Store) EnsureBuilt(ctx context.Context, name string) (built bool, err error) {
	if name != DefaultName {
		return false, nil
	}
	if _, err := s.Get(name); !errors.Is(err, ErrNotFound) {
		return false, err
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return false, err
	}
	// Not the image's own lock (commit takes that one): a lock held for
	// the whole build. flock locks belong to the open file, so two
	// goroutines of one process exclude each other too.
	f, err := os.OpenFile(filepath.Join(s.Dir, "."+name+".first-build.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if err := flockCtx(ctx, f); err != nil {
		return false, err
	}
	if _, err := s.Get(name); !errors.Is(err, ErrNotFound) {
		return false, err // another caller built it meanwhile
	}
	if _, err := s.BuildMini(ctx, name, nil); err != nil {
		return false, err
	}
	return true, nil
}

// flockCtx takes an exclusive flock on f, giving up when ctx ends.
func flockCtx(ctx context.Context, f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
