// Package procbox is the Linux namespace backend: a sandbox is a process
// tree in new mount, PID, UTS, IPC, network and cgroup namespaces, on an
// overlayfs root (the image and any checkpoint layers read-only, a private
// size-limited tmpfs upper layer), limited by a cgroup (v1 or v2), with the
// guest agent as PID 1 serving on a unix socket the host created.
//
// Checkpoints freeze the cgroup and copy the upper layer into a new
// read-only layer; restore and fork start sandboxes on that layer chain
// with a fresh upper layer each. Memory checkpoints need CRIU, which is
// probed and reported (see Capabilities) and refused when it cannot work.
package procbox

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/hypervisor/image"
)

// Name is the backend's registry name.
const Name = "procbox"

// Defaults for a MachineSpec that leaves limits at zero.
const (
	DefaultMemoryMB = 2048
	DefaultDiskMB   = 2048
	DefaultPIDs     = 1024
	DefaultCPUs     = 1
	MaxMemoryMB     = 64 << 10
	MaxDiskMB       = 64 << 10
	MaxPIDs         = 65536
	MaxCPUs         = 64
	readyTimeout    = 15 * time.Second
)

func init() {
	hypervisor.Register(Name, func(c hypervisor.Config) (hypervisor.Backend, error) { return New(c) })
}

// Backend is the procbox backend.
type Backend struct {
	dir    string
	guest  string
	images image.Store
	log    *slog.Logger

	mu          sync.Mutex
	machines    map[string]*Machine
	closeWanted bool // Close was called: the last Stop releases the store
	// adoptLeftovers defers the sweep of what earlier processes left
	// until SweepLeftovers (see hypervisor.Config.AdoptLeftovers).
	adoptLeftovers bool
	guestFile      *os.File // sealed memfd with the guest binary, made on first Create

	gcMu sync.Mutex // one layer collection at a time

	storeWanted string
	storeSize   int64              // of a new btrfs image; 0: half the free space
	reserve     hypervisor.Reserve // see Capacity
	storeMu     sync.Mutex
	store       layerStore // opened on first Create
	storeNote   string

	capsOnce sync.Once
	caps     hypervisor.Capabilities

	netAttach func(id, netnsPath string) error // see SetNetAttach
}

var (
	_ hypervisor.Backend          = (*Backend)(nil)
	_ hypervisor.NetAttacher      = (*Backend)(nil)
	_ hypervisor.CapacityReporter = (*Backend)(nil)
)

// SetNetAttach implements hypervisor.NetAttacher. Set it before the
// first Create or Adopt.
func (b *Backend) SetNetAttach(hook func(id, netnsPath string) error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.netAttach = hook
}

// attachNet runs the hook for a machine with transparent egress whose
// init is pid, started at start (/proc/<pid>/stat's start time; 0: read
// it now). The hook gets the namespace as an open descriptor
// (/proc/self/fd/N), taken while pid is still that process, so a pid used
// again by another process cannot lead it anywhere else.
func (b *Backend) attachNet(spec hypervisor.MachineSpec, pid int, start uint64) error {
	b.mu.Lock()
	hook := b.netAttach
	b.mu.Unlock()
	if hook == nil || spec.Network != hypervisor.NetworkTransparent {
		return nil
	}
	if start == 0 {
		t, err := procStartTime(pid)
		if err != nil {
			return fmt.Errorf("link the sandbox's network: its init: %w", err)
		}
		start = t
	}
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return fmt.Errorf("link the sandbox's network: %w", err)
	}
	defer ns.Close()
	if t, err := procStartTime(pid); err != nil || t != start {
		return fmt.Errorf("link the sandbox's network: its init (pid %d) is gone", pid)
	}
	if err := hook(spec.ID, fmt.Sprintf("/proc/self/fd/%d", ns.Fd())); err != nil {
		return fmt.Errorf("link the sandbox's network: %w", err)
	}
	return nil
}

var _ hypervisor.Machine = (*Machine)(nil)

// New returns a backend storing its data under c.StateDir/procbox. It
// starts nothing.
func New(c hypervisor.Config) (*Backend, error) {
	c, err := c.Check(Name)
	if err != nil {
		return nil, err
	}
	log, images := c.Logger, c.ImagesDir
	want := c.Options["store"]
	if want != "" && want != StoreBtrfs && want != StoreTmpfs {
		return nil, fmt.Errorf("%w: procbox store %q: use %q or %q", hypervisor.ErrInvalidSpec, want, StoreBtrfs, StoreTmpfs)
	}
	var size int64
	if o := c.Options["store_size"]; o != "" {
		if size, err = hypervisor.ParseSize(o); err != nil || size < minStoreBytes || size > maxStoreBytes {
			return nil, fmt.Errorf("%w: procbox store_size %q: a size from %s to %s, such as 2GiB", hypervisor.ErrInvalidSpec, o,
				hypervisor.FormatBytes(minStoreBytes), hypervisor.FormatBytes(maxStoreBytes))
		}
	}
	return &Backend{
		storeWanted:    want,
		storeSize:      size,
		reserve:        c.DiskReserve,
		adoptLeftovers: c.AdoptLeftovers,
		dir:            filepath.Join(c.StateDir, Name),
		guest:          c.GuestBinary,
		images:         image.Store{Dir: images},
		log:            log.With("backend", Name),
		machines:       map[string]*Machine{},
	}, nil
}

// openStore opens the layer store once.
func (b *Backend) layerStore() (layerStore, error) {
	b.storeMu.Lock()
	defer b.storeMu.Unlock()
	if b.store != nil {
		return b.store, nil
	}
	if err := os.MkdirAll(b.dir, 0o700); err != nil {
		return nil, err
	}
	size := b.storeSize
	if size == 0 {
		size = storeImageSize(b.dir)
	}
	s, note, err := openStore(b.dir, b.storeWanted, size)
	if err != nil {
		return nil, err
	}
	if note != "" {
		b.log.Info("procbox layer store", "kind", s.kind(), "note", note)
	}
	b.store, b.storeNote = s, note
	if !b.adoptLeftovers {
		b.sweep(s, false)
	}
	return s, nil
}

// sweep removes what sandboxes of a process that died left behind: their
// processes (through their cgroups), writable layers, sockets and
// directories. A machine directory whose owner lock is held belongs to a
// live process and is left alone; so, unless adopted is set (by
// SweepLeftovers, once a daemon has adopted what it wants), is a running
// machine a daemon left for the next one (see machineState.Adoptable).
func (b *Backend) sweep(store layerStore, adopted bool) {
	ents, _ := os.ReadDir(filepath.Join(b.dir, "machines"))
	for _, e := range ents {
		id := e.Name()
		b.mu.Lock()
		_, ours := b.machines[id]
		b.mu.Unlock()
		if strings.HasPrefix(id, ".new-") {
			// A directory its maker died before renaming. Its maker
			// creates the lock file and then takes the lock: between
			// the two the lock is free, so only a directory older than
			// any live maker could leave it is taken for dead.
			fi, err := os.Lstat(filepath.Join(b.dir, "machines", id))
			if err != nil || time.Since(fi.ModTime()) < time.Minute {
				continue
			}
			if lock, err := tryLock(filepath.Join(b.dir, "machines", id, "owner.lock")); err == nil {
				os.RemoveAll(filepath.Join(b.dir, "machines", id))
				lock.Close()
			}
			continue
		}
		if ours || !idRE.MatchString(id) {
			continue
		}
		if !adopted && b.leftForAdoption(id) {
			b.log.Debug("sweep: left a running sandbox for its daemon to adopt", "machine", id)
			continue
		}
		dir := filepath.Join(b.dir, "machines", id)
		lock, err := tryLock(filepath.Join(dir, "owner.lock"))
		if err != nil {
			continue // alive elsewhere
		}
		if err := killCgroups(id); err != nil {
			// Something of it may still run: leave it all for next time.
			lock.Close()
			b.log.Warn("sweep: could not end a leftover sandbox", "machine", id, "err", err)
			continue
		}
		errs := []error{store.removeWritable(id)}
		b.images.ReleaseAll("m-" + id)
		h := sha256.Sum256([]byte(id))
		os.Remove(filepath.Join(b.dir, "run", hex.EncodeToString(h[:8])+".sock"))
		// Everything but the lock first, then the lock: a directory is
		// gone only once nothing of it is left.
		subs, _ := os.ReadDir(dir)
		for _, e := range subs {
			if e.Name() != "owner.lock" {
				errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
			}
		}
		errs = append(errs, os.Remove(filepath.Join(dir, "owner.lock")), os.Remove(dir))
		lock.Close()
		if err := errors.Join(errs...); err != nil {
			b.log.Warn("sweep a leftover sandbox", "machine", id, "err", err)
		} else {
			b.log.Info("swept a leftover sandbox", "machine", id)
		}
	}
}

// newOwnedDir makes dir holding a locked owner.lock, atomically.
func newOwnedDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".new-")
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(tmp, "owner.lock"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	}
	if err == nil {
		err = os.Rename(tmp, dir)
	}
	if err != nil {
		if f != nil {
			f.Close()
		}
		os.RemoveAll(tmp)
		return nil, err
	}
	return f, nil
}

// tryLock takes an exclusive flock on an existing file without waiting,
// and checks the file is still linked where it was opened (a sweeper may
// have removed it in between).
func tryLock(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	var held, named unix.Stat_t
	if unix.Fstat(int(f.Fd()), &held) != nil || unix.Stat(path, &named) != nil || held.Ino != named.Ino || held.Dev != named.Dev {
		f.Close()
		return nil, fmt.Errorf("%s was replaced while locking it", path)
	}
	return f, nil
}

// StoreKind reports which layer store this backend uses ("btrfs" or
// "tmpfs"), opening it if needed, and why when it is not btrfs.
func (b *Backend) StoreKind() (string, string, error) {
	s, err := b.layerStore()
	if err != nil {
		return "", "", err
	}
	return s.kind(), b.storeNote, nil
}

// Capacity implements hypervisor.CapacityReporter: the layer store's size
// (opening the store as a first Create would), with the configured reserve,
// and the host's memory and CPUs. The size set by Options["store_size"]
// applies to a store image made from now on; an existing image keeps the
// size it was made with.
func (b *Backend) Capacity() (hypervisor.Capacity, error) {
	c, err := hypervisor.HostCapacity(hypervisor.Capacity{}, specLimits)
	if err != nil {
		return c, err
	}
	s, err := b.layerStore()
	if err != nil {
		return c, err
	}
	if c.DiskBytes, c.Disk, err = s.capacity(); err != nil {
		return c, err
	}
	c.DiskReserveBytes = b.reserve.Of(c.DiskBytes)
	return c, nil
}

// Close releases the layer store (a btrfs loop mount, unmounted when no
// other process holds it). With machines of this backend still running it
// waits: the last Stop releases the store.
func (b *Backend) Close() error {
	b.mu.Lock()
	running := len(b.machines)
	b.closeWanted = true
	b.mu.Unlock()
	if running > 0 {
		return nil
	}
	return b.releaseStore()
}

func (b *Backend) releaseStore() error {
	b.storeMu.Lock()
	defer b.storeMu.Unlock()
	if b.store == nil {
		return nil
	}
	// A machine directory left on disk may be a running sandbox a later
	// process adopts (see Detach): its layers live in the store, which
	// must then stay mounted (mounting the image again would attach a
	// second loop device to one file system).
	ents, _ := os.ReadDir(filepath.Join(b.dir, "machines"))
	keep := len(ents) > 0
	err := b.store.close(keep)
	b.store = nil
	return err
}

// Name implements hypervisor.Backend.
func (b *Backend) Name() string { return Name }

// Capabilities implements hypervisor.Backend.
func (b *Backend) Capabilities() hypervisor.Capabilities {
	b.capsOnce.Do(func() { b.caps = probeCapabilities() })
	return b.caps
}

func probeCapabilities() hypervisor.Capabilities {
	c := hypervisor.Capabilities{
		Isolation: "namespaces",
		Snapshot:  true,
		Fork:      true,
		PTY:       true,
		CPUMeter:  true,
		Available: true,
	}
	if os.Geteuid() != 0 {
		c.Available, c.Reason = false, "procbox needs root (namespaces, overlayfs and cgroups)"
	} else if !hasFilesystem("overlay") {
		c.Available, c.Reason = false, "the kernel has no overlayfs"
	} else if cgroupMode() == "unavailable" {
		c.Available, c.Reason = false, "no cgroup hierarchy is mounted"
	}
	if abi, _, _ := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, 1); int(abi) > 0 {
		c.Confinement = true
	}
	c.MemoryCheckpoint, c.MemoryCheckpointReason = criuUsable()
	return c
}

// criuUsable runs `criu check`, which is what decides whether memory
// checkpoints can work on this kernel.
func criuUsable() (bool, string) {
	path, err := exec.LookPath("criu")
	if err != nil {
		return false, "criu is not installed"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "check").CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if i := strings.LastIndex(msg, "\n"); i >= 0 && len(msg) > 300 {
			msg = msg[i+1:]
		}
		return false, "criu check failed: " + msg
	}
	// criu check passing is necessary, not sufficient: procbox does not
	// yet drive criu dump/restore, so memory checkpoints stay off.
	return false, "criu check passed, but procbox memory checkpoints are not implemented yet"
}

func hasFilesystem(name string) bool {
	b, err := os.ReadFile("/proc/filesystems")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 0 && f[len(f)-1] == name {
			return true
		}
	}
	return false
}

var idRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

func randomID(prefix string) string {
	var b [6]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// specLimits are procbox's defaults and bounds for a MachineSpec.
var specLimits = hypervisor.Limits{
	Backend: Name, IDPrefix: "pb-",
	CPUs: DefaultCPUs, MaxCPUs: MaxCPUs,
	MemoryMB: DefaultMemoryMB, MinMemoryMB: 16, MaxMemoryMB: MaxMemoryMB,
	DiskMB: DefaultDiskMB, MaxDiskMB: MaxDiskMB,
	PIDs: DefaultPIDs, MaxPIDs: MaxPIDs,
	GuestUser: fmt.Sprintf("%d:%d", image.GuestUID, image.GuestGID),
	Networks:  []string{hypervisor.NetworkOffline, hypervisor.NetworkProxy, hypervisor.NetworkTransparent},
	Overlays:  true,
}

// normalize fills defaults and checks limits.
func normalize(spec hypervisor.MachineSpec) (hypervisor.MachineSpec, error) {
	return hypervisor.Normalize(spec, specLimits)
}

var checkOverlays = hypervisor.CheckOverlays

// Create implements hypervisor.Backend.
func (b *Backend) Create(ctx context.Context, spec hypervisor.MachineSpec) (hypervisor.Machine, error) {
	return b.create(ctx, spec)
}

func (b *Backend) create(ctx context.Context, spec hypervisor.MachineSpec) (*Machine, error) {
	if caps := b.Capabilities(); !caps.Available {
		return nil, fmt.Errorf("%w: %s", hypervisor.ErrNotSupported, caps.Reason)
	}
	spec, err := normalize(spec)
	if err != nil {
		return nil, err
	}
	// The store first: a snapshot's layers live in it.
	store, err := b.layerStore()
	if err != nil {
		return nil, err
	}
	guest, err := b.guestMemfd()
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	if _, dup := b.machines[spec.ID]; dup {
		b.mu.Unlock()
		return nil, fmt.Errorf("%w: machine %q already exists", hypervisor.ErrInvalidSpec, spec.ID)
	}
	m := &Machine{b: b, store: store, spec: spec, image: spec.Image,
		dir: filepath.Join(b.dir, "machines", spec.ID), guest: guest,
		log: b.log.With("machine", spec.ID)}
	b.machines[spec.ID] = m
	b.mu.Unlock()
	fail := func(err error) (*Machine, error) {
		b.forget(spec.ID)
		return nil, err
	}
	// The image build is marked in use at once, so a rebuild cannot
	// remove it before the machine boots on it.
	user := "m-" + spec.ID
	if spec.From != nil {
		rec, rootfs, err := b.resolveSnapshot(*spec.From)
		if err != nil {
			return fail(err)
		}
		if err := b.images.Use(rootfs, user); err != nil {
			return fail(fmt.Errorf("%w: %v", hypervisor.ErrNotFound, err))
		}
		m.layers, m.image, m.rootfs = append([]string(nil), rec.Layers...), rec.Image, rootfs
	} else {
		rootfs, err := b.images.UseCurrent(spec.Image, user)
		if err != nil {
			return fail(fmt.Errorf("%w: %v", hypervisor.ErrNotFound, err))
		}
		m.rootfs = rootfs
	}
	m.usedRootfs = m.rootfs
	// The owner lock says this process is alive and owns the machine; a
	// sweep by another process skips it while it is held. The directory
	// is made under a name sweeps ignore and renamed once locked, so no
	// sweep ever sees it unlocked.
	if m.owner, err = newOwnedDir(m.dir); err != nil {
		b.images.Release(m.rootfs, user)
		return fail(fmt.Errorf("machine %s: %w", spec.ID, err))
	}
	if err := m.boot(ctx); err != nil {
		m.Stop(context.Background())
		return nil, err
	}
	return m, nil
}

// guestMemfd copies the guest binary into a sealed memfd once.
func (b *Backend) guestMemfd() (*os.File, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.guestFile != nil {
		return b.guestFile, nil
	}
	if b.guest == "" {
		return nil, errors.New("procbox: no guest binary configured (build it with `make build`, or pass --guest)")
	}
	src, err := os.Open(b.guest)
	if err != nil {
		return nil, fmt.Errorf("procbox: open guest binary: %w", err)
	}
	defer src.Close()
	// MFD_EXEC: hosts with vm.memfd_noexec set refuse to execute a memfd
	// unless it asks to be executable; kernels before 6.3 do not know the
	// flag (EINVAL) and allow it anyway.
	fd, err := unix.MemfdCreate("paddock-guest", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|unix.MFD_EXEC)
	if errors.Is(err, unix.EINVAL) {
		fd, err = unix.MemfdCreate("paddock-guest", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	}
	if err != nil {
		return nil, fmt.Errorf("procbox: memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "paddock-guest")
	if _, err := io.Copy(f, src); err != nil {
		f.Close()
		return nil, err
	}
	seals := unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, seals); err != nil {
		f.Close()
		return nil, fmt.Errorf("procbox: seal guest memfd: %w", err)
	}
	b.guestFile = f
	return f, nil
}

func (b *Backend) forget(id string) {
	b.mu.Lock()
	delete(b.machines, id)
	last := b.closeWanted && len(b.machines) == 0
	b.mu.Unlock()
	if last {
		if err := b.releaseStore(); err != nil {
			b.log.Warn("release the layer store", "err", err)
		}
	}
}

// snapshotDir is where a snapshot's layer and metadata live.
func (b *Backend) snapshotDir(id string) string { return filepath.Join(b.dir, "snapshots", id) }

// resolveSnapshot returns the snapshot as this backend recorded it. The
// caller's copy only names it: its layer paths are never trusted, so a
// forged snapshot cannot mount a host directory (or another sandbox's
// writable layer) into a sandbox.
// It also returns the image build (rootfs) the snapshot's layers sit on.
func (b *Backend) resolveSnapshot(s hypervisor.Snapshot) (hypervisor.Snapshot, string, error) {
	if s.Backend != Name {
		return hypervisor.Snapshot{}, "", fmt.Errorf("%w: snapshot %q belongs to backend %q", hypervisor.ErrInvalidSpec, s.ID, s.Backend)
	}
	rec, err := b.loadMeta(s.ID)
	if err != nil {
		return hypervisor.Snapshot{}, "", err
	}
	for _, l := range rec.Layers {
		if _, err := os.Stat(l); err != nil {
			return hypervisor.Snapshot{}, "", fmt.Errorf("%w: snapshot %q layer is missing: %v", hypervisor.ErrNotFound, s.ID, err)
		}
	}
	rootfs := rec.Rootfs
	if rootfs == "" {
		if rootfs, err = b.images.Rootfs(rec.Image); err != nil {
			return hypervisor.Snapshot{}, "", fmt.Errorf("%w: %v", hypervisor.ErrNotFound, err)
		}
	}
	if _, err := os.Stat(rootfs); err != nil {
		return hypervisor.Snapshot{}, "", fmt.Errorf("%w: the image build snapshot %q stands on is gone: %v", hypervisor.ErrNotFound, s.ID, err)
	}
	return rec.Snapshot, rootfs, nil
}

// LoadSnapshot reads a snapshot's metadata from the store.
func (b *Backend) LoadSnapshot(id string) (hypervisor.Snapshot, error) {
	m, err := b.loadMeta(id)
	return m.Snapshot, err
}

func (b *Backend) loadMeta(id string) (snapshotMeta, error) {
	if !idRE.MatchString(id) {
		return snapshotMeta{}, fmt.Errorf("%w: snapshot id %q", hypervisor.ErrInvalidSpec, id)
	}
	raw, err := os.ReadFile(filepath.Join(b.snapshotDir(id), "snapshot.json"))
	if errors.Is(err, os.ErrNotExist) {
		return snapshotMeta{}, fmt.Errorf("%w: snapshot %q", hypervisor.ErrNotFound, id)
	}
	if err != nil {
		return snapshotMeta{}, err
	}
	var s snapshotMeta
	if err := json.Unmarshal(raw, &s); err != nil {
		return snapshotMeta{}, err
	}
	if s.Deleted {
		return snapshotMeta{}, fmt.Errorf("%w: snapshot %q was deleted", hypervisor.ErrNotFound, id)
	}
	return s, nil
}

// snapshotMeta is snapshot.json: the snapshot, and whether it was deleted
// (its layer stays while a machine or another snapshot stands on it).
type snapshotMeta struct {
	hypervisor.Snapshot
	Deleted bool   `json:"deleted,omitempty"`
	Rootfs  string `json:"rootfs,omitempty"` // the image build under the layers
}

// dialUnix connects to a machine's agent socket.
func dialUnix(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", path)
}
