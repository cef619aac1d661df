package policy

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// WatchDebounce is how long the operator's modules must be quiet before a
// change is loaded: an editor or a deploy writes several files, or one
// file several times, and one load should see them all.
const WatchDebounce = 200 * time.Millisecond

// Watch reloads the operator's modules when they change (fsnotify on
// Options.ExtDir: every directory below it and its parent, so that the
// directory removed and made again is followed, or the bundle file's
// directory), WatchDebounce after the last change. A load that fails
// leaves the previous modules in force (see Reload and Status). It returns
// when ctx ends, at once when there is no ExtDir, or with an error when
// the watch cannot be set up.
func (e *Engine) Watch(ctx context.Context) error {
	src := e.opts.ExtDir
	if src == "" {
		return nil
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	bundleFile, root, named := "", "", filepath.Clean(src)
	if st.IsDir() {
		root, err = filepath.EvalSymlinks(src)
		if err != nil {
			return err
		}
		if err := watchTree(w, root); err != nil {
			return err
		}
		// The parents too (of the directory, and of the name given when
		// it is a link), to see the directory removed, renamed or made
		// again, or the link pointed elsewhere (deploys that swap it): a
		// watch on a directory ends with it. Without them the tree is
		// still watched.
		for _, d := range []string{filepath.Dir(root), filepath.Dir(named)} {
			if err := w.Add(d); err != nil {
				e.log.Warn("policy: the operator directory's parent is not watched; a swapped directory needs a reload", "dir", d, "err", err)
			}
		}
	} else {
		// Watch the directory: a bundle is usually replaced by a rename,
		// which a watch on the file itself would lose.
		bundleFile = filepath.Clean(src)
		if err := w.Add(filepath.Dir(bundleFile)); err != nil {
			return err
		}
	}
	var timer *time.Timer
	var fire <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return errors.New("policy: the file watch closed")
			}
			if bundleFile != "" && filepath.Clean(ev.Name) != bundleFile {
				continue
			}
			name := filepath.Clean(ev.Name)
			if root != "" && name != root && name != named &&
				(filepath.Dir(name) == filepath.Dir(root) || filepath.Dir(name) == filepath.Dir(named)) {
				continue // a sibling of the directory, in a parent
			}
			if root != "" && (name == root || name == named) {
				// The directory (or the link to it) came back or moved:
				// watch what the name leads to now.
				if r, err := filepath.EvalSymlinks(named); err == nil {
					if st, err := os.Stat(r); err == nil && st.IsDir() {
						if filepath.Dir(r) != filepath.Dir(root) {
							_ = w.Add(filepath.Dir(r))
						}
						root = r
						_ = watchTree(w, r)
					}
				}
			} else if bundleFile == "" && ev.Has(fsnotify.Create) {
				if st, err := os.Stat(ev.Name); err == nil && st.IsDir() && !strings.HasPrefix(filepath.Base(ev.Name), ".") {
					_ = watchTree(w, ev.Name) // files already in it are seen by the load
				}
			}
			if timer == nil {
				timer = time.NewTimer(WatchDebounce)
			} else {
				timer.Reset(WatchDebounce)
			}
			fire = timer.C
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("policy: the file watch closed")
			}
			e.log.Warn("policy: watching the operator's modules", "source", src, "err", err)
		case <-fire:
			fire = nil
			_ = e.Reload() // logged, and kept in Status, by Reload
		}
	}
}

// watchTree watches dir and every directory below it (hidden ones
// skipped, as the loader skips them).
func watchTree(w *fsnotify.Watcher, dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if p != dir && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		return w.Add(p)
	})
}
