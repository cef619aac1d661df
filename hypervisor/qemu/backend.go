package qemu

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/hypervisor/image"
	"paddock.dev/paddock/hypervisor/vmkit"
)

// Name is the backend's registry name.
const Name = "qemu"

// Defaults and bounds of a VM.
const (
	DefaultMemoryMB = 512
	DefaultDiskMB   = 2048
	DefaultCPUs     = 1
	MaxMemoryMB     = 32 << 10
	MaxDiskMB       = 64 << 10
	MaxCPUs         = 16
	// bootTimeout bounds a boot to the agent's answer; TCG on a busy
	// two-core machine is slow.
	bootTimeout = 90 * time.Second
)

var specLimits = hypervisor.Limits{
	Backend: Name, IDPrefix: "vm-",
	CPUs: DefaultCPUs, MaxCPUs: MaxCPUs,
	MemoryMB: DefaultMemoryMB, MinMemoryMB: 128, MaxMemoryMB: MaxMemoryMB,
	DiskMB: DefaultDiskMB, MaxDiskMB: MaxDiskMB,
	PIDs: 1024, MaxPIDs: 65536,
	GuestUser: fmt.Sprintf("%d:%d", image.GuestUID, image.GuestGID),
	// A VM has no NIC: its egress is the agent's forwarders over the
	// channel. Transparent mode's route and nftables rules are installed
	// by the guest's PID 1 (the initramfs loads the netfilter modules).
	Networks: []string{hypervisor.NetworkOffline, hypervisor.NetworkProxy, hypervisor.NetworkTransparent},
	// Overlays are mounted by the guest's PID 1 at each boot, their
	// writes on the machine's disk (so checkpoints, restores and forks
	// carry them).
	Overlays: true,
}

func init() {
	hypervisor.Register(Name, func(c hypervisor.Config) (hypervisor.Backend, error) { return New(c) })
}

// Backend is the QEMU microVM backend.
type Backend struct {
	dir   string // <state>/qemu
	cache string // kernels, busybox, initramfs images
	// adopt: machines are detachable and keep state files (Adopter).
	adopt bool
	// channelOpt is Options["channel"]: ChannelSerial or ChannelVsock to
	// force one, "" for vsock where the host has it.
	channelOpt string
	guest      string
	reserve    hypervisor.Reserve // see Capacity
	images     image.Store
	log        *slog.Logger

	mu       sync.Mutex
	machines map[string]*Machine
	gcMu     sync.Mutex         // one layer collection at a time
	kitMu    sync.Mutex         // one kit build at a time: they share the cache
	baseMu   sync.Mutex         // one sized base disk made at a time (sizedbase.go)
	kits     map[string]kitMemo // under kitMu, by image rootfs

	capsOnce sync.Once
	caps     hypervisor.Capabilities
	host     Capabilities

	probeMu sync.Mutex  // one KVM probe at a time; held while it boots
	kvm     *KVMVerdict // this process's verdict, under mu; nil until decided
}

var _ hypervisor.Backend = (*Backend)(nil)

// New returns the backend; it starts nothing. Kernels and initramfs
// images are cached in Options["cache"], else next to the images
// directory (<images>/../vm-cache), so state directories share them.
func New(c hypervisor.Config) (*Backend, error) {
	c, err := c.Check(Name)
	if err != nil {
		return nil, err
	}
	log, images := c.Logger, c.ImagesDir
	cache := c.Options["cache"]
	if cache == "" {
		cache = filepath.Join(filepath.Dir(filepath.Clean(images)), "vm-cache")
	}
	b := &Backend{
		dir:        filepath.Join(c.StateDir, Name),
		cache:      cache,
		guest:      c.GuestBinary,
		images:     image.Store{Dir: images},
		log:        log.With("backend", Name),
		machines:   map[string]*Machine{},
		channelOpt: c.Options["channel"],
		adopt:      c.AdoptLeftovers,
		reserve:    c.DiskReserve,
	}
	switch b.channelOpt {
	case "", ChannelSerial, ChannelVsock:
	default:
		return nil, fmt.Errorf("qemu: option channel=%q: use %q or %q", b.channelOpt, ChannelSerial, ChannelVsock)
	}
	return b, nil
}

// Name implements hypervisor.Backend.
func (b *Backend) Name() string { return Name }

// Capabilities implements hypervisor.Backend.
func (b *Backend) Capabilities() hypervisor.Capabilities {
	b.capsOnce.Do(func() {
		c := hypervisor.Capabilities{
			Isolation: "vm", Snapshot: true, MemoryCheckpoint: true, Fork: true,
			PTY: true, Confinement: true,
		}
		host, err := Probe(context.Background(), ProbeOptions{})
		b.host = host
		switch {
		case err != nil:
			c.Reason = err.Error()
		case b.guest == "":
			c.Reason = "no guest binary configured"
		default:
			c.Available = true
		}
		for _, tool := range []string{"qemu-img", "mkfs.ext4", "debugfs"} {
			if _, err := lookPath(tool); err != nil && c.Available {
				c.Available, c.Reason = false, tool+" not installed (make deps)"
			}
		}
		if !c.Available {
			c.Snapshot, c.MemoryCheckpoint, c.Fork = false, false, false
			c.MemoryCheckpointReason = c.Reason
		}
		b.caps = c
	})
	c := b.caps
	if b.host.QEMUVersion != "" {
		c.Accelerator = b.kvmVerdict().Describe()
	}
	return c
}

// kvmVerdict is what is known without booting anything: this process's
// verdict, else one cached on disk for this QEMU and host kernel, else
// the device check's.
func (b *Backend) kvmVerdict() KVMVerdict {
	b.mu.Lock()
	v := b.kvm
	b.mu.Unlock()
	if v != nil {
		return *v
	}
	if b.host.KVM == KVMAbsent {
		return KVMVerdict{State: KVMAbsent}
	}
	if cached, ok := CachedKVMVerdict(b.cache, b.host.QEMUVersion, HostRelease()); ok {
		return cached
	}
	return KVMVerdict{State: KVMPresentUnverified}
}

// accel returns the accelerator for new machines booting kit: "kvm" only
// when a tiny guest reached userspace under it (ProbeKVM, run here at the
// first create that needs it, its verdict cached on disk), else "tcg".
// A probe that cannot run leaves the question open for the next create.
func (b *Backend) accel(ctx context.Context, kit vmkit.Kit) string {
	b.Capabilities() // fills b.host
	b.probeMu.Lock()
	defer b.probeMu.Unlock()
	b.mu.Lock()
	v := b.kvm
	b.mu.Unlock()
	if v != nil {
		return v.Accel()
	}
	verdict, err := b.probeKVM(ctx, kit)
	if err != nil {
		b.log.Warn("kvm probe did not conclude; using tcg", "err", err)
		return "tcg"
	}
	b.log.Info("accelerator", "accel", verdict.Accel(), "kvm", string(verdict.State), "why", verdict.Describe())
	b.mu.Lock()
	b.kvm = &verdict
	b.mu.Unlock()
	return verdict.Accel()
}

func (b *Backend) probeKVM(ctx context.Context, kit vmkit.Kit) (KVMVerdict, error) {
	if b.host.KVM == KVMAbsent {
		return KVMVerdict{State: KVMAbsent}, nil
	}
	opts := KVMProbeOptions{Kernel: kit.Kernel, KernelVersion: kit.KernelVersion,
		QEMUVersion: b.host.QEMUVersion, CacheDir: b.cache, MemoryMB: DefaultMemoryMB}
	if v, ok := readVerdict(verdictPath(b.cache, kit.KernelVersion, b.host.QEMUVersion, HostRelease())); ok {
		return v, nil
	}
	initrd, err := ProbeInitramfs(ctx, b.cache)
	if err != nil {
		return KVMVerdict{}, err
	}
	opts.Initrd = initrd
	run := filepath.Join(b.dir, "run")
	if err := os.MkdirAll(run, 0o700); err != nil {
		return KVMVerdict{}, err
	}
	dir, err := os.MkdirTemp(run, "kvm-probe-")
	if err != nil {
		return KVMVerdict{}, err
	}
	defer os.RemoveAll(dir)
	opts.Dir = dir
	b.log.Info("probing kvm: booting a test guest under -accel kvm", "timeout", DefaultKVMProbeTimeout)
	return ProbeKVM(ctx, opts)
}

// Close stops every machine this backend started.
func (b *Backend) Close() error {
	b.mu.Lock()
	ms := make([]*Machine, 0, len(b.machines))
	for _, m := range b.machines {
		ms = append(ms, m)
	}
	b.mu.Unlock()
	var errs []error
	for _, m := range ms {
		errs = append(errs, m.Stop(context.Background()))
	}
	return errors.Join(errs...)
}

func (b *Backend) machinesDir() string  { return filepath.Join(b.dir, "machines") }
func (b *Backend) disksDir() string     { return filepath.Join(b.dir, "disks") }
func (b *Backend) snapshotsDir() string { return filepath.Join(b.dir, "snapshots") }

// kitMemo is a kit this process found or built, reused for kitMemoTTL
// while the guest binary is the same file and the kit's files exist:
// BuildKit on a warm cache still asks apt-cache and hashes the guest
// binary (over a second on a busy two-core machine, as long as a third of
// a TCG boot). The TTL bounds how long a daemon keeps booting a kernel
// the archive has since replaced.
type kitMemo struct {
	kit   vmkit.Kit
	guest string // the guest binary's size and mtime
	at    time.Time
}

const kitMemoTTL = 10 * time.Minute

func fileStamp(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%d %d", fi.Size(), fi.ModTime().UnixNano())
}

// kit returns the boot kit for an image (built and cached on first use).
func (b *Backend) kit(ctx context.Context, img string) (vmkit.Kit, error) {
	rootfs, err := b.images.Rootfs(img)
	if err != nil {
		return vmkit.Kit{}, fmt.Errorf("%w: image %q: %v", hypervisor.ErrNotFound, img, err)
	}
	b.kitMu.Lock()
	defer b.kitMu.Unlock()
	guest := fileStamp(b.guest)
	if m, ok := b.kits[rootfs]; ok && m.guest == guest && time.Since(m.at) < kitMemoTTL &&
		exists(m.kit.Kernel) && exists(m.kit.Initrd) && exists(m.kit.RootDisk) {
		return m.kit, nil
	}
	kit, err := vmkit.BuildKit(ctx, rootfs, vmkit.KitOptions{CacheDir: b.cache, GuestBinary: b.guest,
		Progress: func(s string) { b.log.Info("vm image", "step", s) }})
	if err != nil {
		return vmkit.Kit{}, err
	}
	if b.kits == nil {
		b.kits = map[string]kitMemo{}
	}
	b.kits[rootfs] = kitMemo{kit: kit, guest: guest, at: time.Now()}
	return kit, nil
}

// snapMeta is what a snapshot directory records beside the memory file:
// enough to start a machine from it without the machine that took it.
type snapMeta struct {
	Snapshot hypervisor.Snapshot `json:"snapshot"`
	Kit      vmkit.Kit           `json:"kit"`
	MemoryMB int64               `json:"memory_mb"`
	CPUs     int                 `json:"cpus"`
	Disk     string              `json:"disk"` // frozen qcow2 the snapshot's disk is
	// Accel is the accelerator the snapshot was taken under; a machine
	// from its memory must use the same ("" in older snapshots: tcg).
	Accel string `json:"accel,omitempty"`
	// Channel is the agent channel's transport, ChannelVsock or ""
	// (virtio-serial): a machine from the snapshot's memory needs the
	// same device set.
	Channel string `json:"channel,omitempty"`
	// Devices is "pci" for machines on microvm's PCIe bus; "" (older
	// snapshots) is virtio-mmio. A machine from the snapshot's memory
	// needs the same device set.
	Devices string `json:"devices,omitempty"`
}

func (b *Backend) loadSnapshot(s hypervisor.Snapshot) (snapMeta, error) {
	var meta snapMeta
	if !hypervisor.IDPattern.MatchString(s.ID) {
		return meta, fmt.Errorf("%w: snapshot id %q", hypervisor.ErrInvalidSpec, s.ID)
	}
	raw, err := os.ReadFile(filepath.Join(b.snapshotsDir(), s.ID, "snapshot.json"))
	if errors.Is(err, os.ErrNotExist) {
		return meta, fmt.Errorf("%w: snapshot %s", hypervisor.ErrNotFound, s.ID)
	}
	if err != nil {
		return meta, err
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		return meta, fmt.Errorf("snapshot %s: %w", s.ID, err)
	}
	return meta, nil
}

// collect removes frozen disk layers that no snapshot and no machine
// stands on any more. A layer's users are found by walking backing
// chains: the disks of running machines and of snapshots.
func (b *Backend) collect() {
	b.gcMu.Lock()
	defer b.gcMu.Unlock()
	used := map[string]bool{}
	b.mu.Lock()
	var roots []string
	for _, m := range b.machines {
		m.mu.Lock()
		if m.disk != "" {
			roots = append(roots, m.disk)
		}
		m.mu.Unlock()
	}
	b.mu.Unlock()
	// Machines another process left running (to be adopted or swept)
	// keep their layers until SweepLeftovers removes their state.
	states, _ := os.ReadDir(b.machinesDir())
	for _, e := range states {
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok {
			if st, err := b.readState(id); err == nil && st.Disk != "" {
				roots = append(roots, st.Disk)
			}
		}
	}
	ents, _ := os.ReadDir(b.snapshotsDir())
	for _, e := range ents {
		if meta, err := b.loadSnapshot(hypervisor.Snapshot{ID: e.Name()}); err == nil {
			roots = append(roots, meta.Disk)
		} else if !errors.Is(err, hypervisor.ErrNotFound) {
			return // unsure what is used: keep everything
		}
	}
	for _, r := range roots {
		for _, l := range backingChain(r) {
			used[filepath.Base(l)] = true
		}
	}
	disks, _ := os.ReadDir(b.disksDir())
	for _, d := range disks {
		if !used[d.Name()] && strings.HasSuffix(d.Name(), ".qcow2") {
			if fi, err := d.Info(); err == nil && time.Since(fi.ModTime()) < 5*time.Second && strings.HasPrefix(d.Name(), "new-") {
				continue
			}
			os.Remove(filepath.Join(b.disksDir(), d.Name()))
		}
	}
}

// backingChain returns path and the files it stands on, reading each
// qcow2 header's backing file name (only files in our disks directory
// are followed).
func backingChain(path string) []string {
	var chain []string
	for i := 0; path != "" && i < 1000; i++ {
		chain = append(chain, path)
		next, err := qcow2Backing(path)
		if err != nil || next == "" || filepath.Dir(next) != filepath.Dir(path) {
			break
		}
		path = next
	}
	return chain
}

func randomID(prefix string) string {
	var b [6]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
