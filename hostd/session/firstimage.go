package session

import (
	"context"
	"fmt"
	"time"

	"paddock.dev/paddock/hypervisor/image"
)

// ensureImage builds the built-in image on a create that needs it and
// finds it not built yet (a fresh state dir), so the first create works
// without `paddock image build`. Creates racing on it build it once
// (image.Store.EnsureBuilt); any other image is the backend's to find,
// and a missing one is refused there with its hint.
func (m *Manager) ensureImage(ctx context.Context, name string) error {
	if m.images == "" {
		return nil
	}
	start := time.Now()
	built, err := image.Store{Dir: m.images}.EnsureBuilt(ctx, name)
	if err != nil {
		return fmt.Errorf("build the built-in image %q on first use: %w", name, err)
	}
	if built {
		m.log.Info("built the default image on first use", "image", name, "builder", "mini",
			"took", time.Since(start).Round(time.Millisecond))
	}
	return nil
}
