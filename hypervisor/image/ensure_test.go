package image_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"paddock.dev/paddock/hypervisor/image"
	"paddock.dev/paddock/internal/testutil"
)

// TestEnsureBuiltOnce: callers racing on a fresh images directory build
// the built-in image once (one reports built, one build on disk); another
// name is never built, and stays not found.
func TestEnsureBuiltOnce(t *testing.T) {
	testutil.RequiresRoot(t) // chown of /workspace to the guest user
	s := image.Store{Dir: filepath.Join(t.TempDir(), "images")}
	const n = 4
	var wg sync.WaitGroup
	builtBy := make(chan int, n)
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			built, err := s.EnsureBuilt(context.Background(), image.DefaultName)
			if err != nil {
				errs <- err
			}
			if built {
				builtBy <- i
			}
		}()
	}
	wg.Wait()
	close(builtBy)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(builtBy) != 1 {
		t.Errorf("%d callers built the image, want 1", len(builtBy))
	}
	if builds, _ := os.ReadDir(filepath.Join(s.Dir, image.DefaultName, "builds")); len(builds) != 1 {
		t.Errorf("%d builds on disk, want 1", len(builds))
	}
	if m, err := s.Get(image.DefaultName); err != nil || m.Builder != "mini" {
		t.Errorf("after EnsureBuilt: %+v %v", m, err)
	}
	// Built already: nothing to do.
	if built, err := s.EnsureBuilt(context.Background(), image.DefaultName); built || err != nil {
		t.Errorf("a second EnsureBuilt: built %v, %v", built, err)
	}
	// Only the built-in image is built on first use.
	if built, err := s.EnsureBuilt(context.Background(), "debian"); built || err != nil {
		t.Errorf("EnsureBuilt(debian): built %v, %v", built, err)
	}
	if _, err := s.Rootfs("debian"); !errors.Is(err, image.ErrNotFound) {
		t.Errorf("debian after EnsureBuilt: %v, want not found", err)
	}
}
