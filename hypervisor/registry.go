package hypervisor

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"sync"
)

// Config is what every backend constructor gets.
type Config struct {
	StateDir    string // backend data lives under StateDir/<backend name>
	GuestBinary string // path to the static paddock-guest binary
	ImagesDir   string // where `paddock image build` puts images
	Logger      *slog.Logger
	// AdoptLeftovers: machines an earlier process on this state dir left
	// running are kept for Adopter.Adopt instead of being swept when the
	// backend first opens its state; the owner calls SweepLeftovers once
	// it has adopted what it wants. Backends that are not Adopters ignore
	// it.
	AdoptLeftovers bool
	// Options are backend-specific settings (procbox: "store" = "btrfs"
	// or "tmpfs", empty picks btrfs when it can; "store_size" = the size
	// of a new btrfs store image, see ParseSize, empty is half the free
	// space).
	Options map[string]string
	// DiskReserve is what the backend's Capacity keeps back for the
	// daemon's own writes (the zero Reserve is the default).
	DiskReserve Reserve
}

// Check refuses a config without a state directory and fills in the
// defaults every backend uses: a logger that discards, and images under
// StateDir/images. name prefixes the error.
func (c Config) Check(name string) (Config, error) {
	if c.StateDir == "" {
		return c, fmt.Errorf("%s: a state directory is required", name)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.ImagesDir == "" {
		c.ImagesDir = filepath.Join(c.StateDir, "images")
	}
	return c, nil
}

// Constructor builds a backend. It must not start anything: side effects
// belong in Create.
type Constructor func(Config) (Backend, error)

var (
	regMu    sync.Mutex
	registry = map[string]Constructor{}
)

// Register makes a backend available by name. Backends call it from init.
func Register(name string, c Constructor) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[name]; dup {
		panic("hypervisor: backend registered twice: " + name)
	}
	registry[name] = c
}

// Lookup returns the constructor registered under name.
func Lookup(name string) (Constructor, error) {
	regMu.Lock()
	defer regMu.Unlock()
	c, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("%w %q (registered: %v)", ErrUnknownBackend, name, listLocked())
	}
	return c, nil
}

// List returns the registered backend names, sorted.
func List() []string {
	regMu.Lock()
	defer regMu.Unlock()
	return listLocked()
}

func listLocked() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
