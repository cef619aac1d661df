package qemu

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/yamux"

	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
	"paddock.dev/paddock/guest/vmchan"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/hypervisor/image"
	"paddock.dev/paddock/hypervisor/vmkit"
)

// Machine is one microVM. Its disk is a qcow2 in the backend's disks
// directory over a chain of frozen layers (checkpoints) over the image's
// read-only ext4; its sockets and console log are in a short run
// directory (unix socket paths are limited to 108 bytes).
type Machine struct {
	b         *Backend
	spec      hypervisor.MachineSpec
	dir       string
	machineID string

	opMu sync.Mutex // checkpoint, restore, fork and stop, one at a time

	mu       sync.Mutex
	kit      vmkit.Kit
	accel    string // "kvm" or "tcg"; a snapshot's machines keep its
	channel  string // ChannelSerial or ChannelVsock; a snapshot's machines keep its
	cid      uint32 // the guest CID of the running VM (vsock)
	mmio     bool   // virtio-mmio devices (a machine from an older snapshot)
	memoryMB int64
	cpus     int
	vm       *VM
	disk     string // the active qcow2
	sess     *yamux.Session
	identity string
	stopped  bool
	done     chan struct{}
	doneOnce sync.Once
	connMu   sync.Mutex // one handshake at a time

	// The guest kernel's OOM count at the start of the current boot
	// (see OOMKills): bootGen counts boots, oomBase is the count the
	// boot began with, oomRebase says it is still to be read.
	bootGen   uint64
	oomBase   int64
	oomRebase bool
}

var _ hypervisor.Machine = (*Machine)(nil)

// Create implements hypervisor.Backend.
func (b *Backend) Create(ctx context.Context, spec hypervisor.MachineSpec) (hypervisor.Machine, error) {
	return b.create(ctx, spec)
}

func (b *Backend) create(ctx context.Context, spec hypervisor.MachineSpec) (*Machine, error) {
	if caps := b.Capabilities(); !caps.Available {
		return nil, fmt.Errorf("%w: %s", hypervisor.ErrNotSupported, caps.Reason)
	}
	spec, err := hypervisor.Normalize(spec, specLimits)
	if err != nil {
		return nil, err
	}
	m := &Machine{b: b, spec: spec, done: make(chan struct{}), memoryMB: spec.MemoryMB,
		cpus: int(math.Ceil(spec.CPUs))}
	var idb [16]byte
	rand.Read(idb[:])
	m.machineID = hex.EncodeToString(idb[:])
	if spec.MachineID != "" {
		m.machineID = spec.MachineID
	}
	h := sha256.Sum256([]byte(spec.ID))
	m.dir = filepath.Join(b.dir, "run", hex.EncodeToString(h[:8]))

	base, format, incoming := "", "raw", ""
	if spec.From != nil {
		meta, err := b.loadSnapshot(*spec.From)
		if err != nil {
			return nil, err
		}
		m.kit, m.memoryMB, m.cpus, m.accel, m.channel = meta.Kit, meta.MemoryMB, meta.CPUs, snapAccel(meta), snapChannel(meta)
		m.mmio = meta.Devices != devicesPCI
		base, format = meta.Disk, "qcow2"
		if meta.Snapshot.Memory {
			incoming = filepath.Join(b.snapshotsDir(), spec.From.ID, "memory")
		}
		spec.Image = meta.Snapshot.Image
		m.spec.Image = spec.Image
	} else {
		if m.kit, err = b.kit(ctx, spec.Image); err != nil {
			return nil, err
		}
		base = m.kit.RootDisk
		m.accel = b.accel(ctx, m.kit)
		if m.channel, err = channelFor(b.channelOpt, b.host.VhostVsock); err != nil {
			return nil, err
		}
	}
	b.mu.Lock()
	if _, dup := b.machines[spec.ID]; dup {
		b.mu.Unlock()
		return nil, fmt.Errorf("%w: machine %q already exists", hypervisor.ErrInvalidSpec, spec.ID)
	}
	b.machines[spec.ID] = m
	b.mu.Unlock()
	fail := func(err error) (*Machine, error) {
		m.Stop(context.Background())
		return nil, err
	}
	for _, d := range []string{b.disksDir(), b.snapshotsDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fail(err)
		}
	}
	if err := os.MkdirAll(m.dir, 0o700); err != nil {
		return fail(err)
	}
	if spec.EgressDir != "" {
		if err := os.MkdirAll(spec.EgressDir, 0o700); err != nil {
			return fail(err)
		}
	}
	disk := filepath.Join(b.disksDir(), randomID(spec.ID+"-")+".qcow2")
	var size int64 // a snapshot's disk keeps its size
	if spec.From == nil {
		fi, err := os.Stat(base)
		if err != nil {
			return fail(err)
		}
		// The filesystem's free room is the machine's disk_mb: what the
		// image's filesystem has free counts toward it. The base is
		// grown to that on the host (the guest would grow it at boot).
		size = fi.Size() + max(spec.DiskMB<<20-m.kit.RootFree, 0)
		if base, err = b.sizedBase(ctx, m.kit, size); err != nil {
			return fail(err)
		}
		size = 0 // the overlay takes the base's size
	}
	if err := CreateOverlay(ctx, base, format, disk, size); err != nil {
		return fail(err)
	}
	m.mu.Lock()
	m.disk = disk
	m.mu.Unlock()
	if err := m.boot(ctx, incoming); err != nil {
		return fail(err)
	}
	return m, nil
}

// boot starts QEMU on m.disk (loading memory from incoming when set) and
// connects the agent channel with a new identity.
func (m *Machine) boot(ctx context.Context, incoming string) error {
	ctx, cancel := context.WithTimeout(ctx, bootTimeout)
	defer cancel()
	m.mu.Lock()
	cfg := VMConfig{Kit: m.kit, Dir: m.dir, MemoryMB: int(m.memoryMB), CPUs: m.cpus, Accel: m.accel,
		Disk: m.disk, Channel: true, Incoming: incoming, MMIO: m.mmio, Detachable: m.b.adopt, Append: fmt.Sprintf("paddock.pids=%d", m.spec.PIDs)}
	vsockCh := m.channel == ChannelVsock
	m.mu.Unlock()
	var vm *VM
	var err error
	for try := 0; ; try++ {
		if vsockCh {
			// A fresh CID every boot: a restored or forked guest takes
			// the new one at the transport reset QEMU sends it.
			cfg.VsockCID = newCID()
		}
		vm, err = Boot(ctx, cfg)
		if err == nil || !vsockCh || !cidInUse(err) || try == 4 {
			break
		}
	}
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.vm, m.cid = vm, cfg.VsockCID
	m.mu.Unlock()
	go m.watch(vm)
	if incoming != "" {
		if err := vm.FinishIncoming(ctx); err != nil {
			return fmt.Errorf("qemu: load memory: %w%s", err, vm.consoleTail())
		}
	}
	if err := m.connect(ctx, randomID("id-")); err != nil {
		return err
	}
	m.startOOMCount(ctx, incoming != "")
	return m.saveState()
}

// watch notices a VM that exits on its own (a guest poweroff, a crash).
func (m *Machine) watch(vm *VM) {
	<-vm.Exited()
	m.mu.Lock()
	current := m.vm == vm
	stopped := m.stopped
	m.mu.Unlock()
	if current && !stopped {
		m.b.log.Warn("vm exited", "machine", m.spec.ID, "err", vm.waitErr, "console", vm.consoleTail())
		m.doneOnce.Do(func() { close(m.done) })
	}
}

// connect dials the channel socket and runs the handshake; identity ""
// keeps the current one.
func (m *Machine) connect(ctx context.Context, identity string) error {
	m.connMu.Lock()
	defer m.connMu.Unlock()
	m.mu.Lock()
	vm := m.vm
	if identity == "" {
		identity = m.identity
	}
	old := m.sess
	m.sess = nil
	m.mu.Unlock()
	if old != nil {
		old.Close()
	}
	if vm == nil {
		return hypervisor.ErrStopped
	}
	var conn net.Conn
	m.mu.Lock()
	cid := m.cid
	m.mu.Unlock()
	for cid == 0 {
		c, err := net.Dial("unix", vm.Agent)
		if err == nil {
			conn = c
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("qemu: agent channel: %w", err)
		case <-vm.Exited():
			return fmt.Errorf("qemu exited: %v%s", vm.waitErr, vm.consoleTail())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if cid != 0 {
		c, err := dialVsock(ctx, cid, vm.Exited())
		if err != nil {
			return fmt.Errorf("%w%s", err, vm.consoleTail())
		}
		conn = c
	}
	seed := make([]byte, 32)
	rand.Read(seed)
	hello := vmchan.Hello{
		Identity: identity, Hostname: m.spec.Hostname, MachineID: m.machineID, Seed: seed,
		TimeUnixNano: time.Now().UnixNano(),
		GuestUser:    m.spec.GuestUser, GuestHome: image.GuestHome, Env: m.spec.Env,
		Network: m.spec.Network, TrustPEM: string(m.spec.TrustPEM),
	}
	for _, o := range m.spec.Overlays {
		hello.Overlays = append(hello.Overlays, vmchan.Overlay{Lower: o.Lower, Target: o.Target})
	}
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-vm.Exited():
			cancel()
		case <-hctx.Done():
		}
	}()
	s, err := vmchan.Host(hctx, conn, hello)
	if err != nil {
		select {
		case <-vm.Exited():
			return fmt.Errorf("qemu exited during the handshake: %v%s", vm.waitErr, vm.consoleTail())
		default:
		}
		return fmt.Errorf("%w%s", err, vm.consoleTail())
	}
	m.mu.Lock()
	m.sess, m.identity = s, identity
	m.mu.Unlock()
	go m.serveEgress(s)
	return nil
}

// serveEgress carries the streams the guest opens to this machine's
// egress sockets.
func (m *Machine) serveEgress(s *yamux.Session) {
	for {
		c, err := s.AcceptStream()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			name, err := vmchan.ReadEgress(c)
			if err != nil || m.spec.EgressDir == "" {
				return
			}
			up, err := net.DialTimeout("unix", filepath.Join(m.spec.EgressDir, name), 10*time.Second)
			if err != nil {
				return
			}
			defer up.Close()
			done := make(chan struct{})
			go func() {
				io.Copy(up, c)
				if cw, ok := up.(interface{ CloseWrite() error }); ok {
					cw.CloseWrite()
				}
				close(done)
			}()
			io.Copy(c, up)
			c.Close()
			<-done
		}()
	}
}

// ID implements hypervisor.Machine.
func (m *Machine) ID() string { return m.spec.ID }

// Dial implements hypervisor.Machine: a new stream to the guest agent.
func (m *Machine) Dial(ctx context.Context) (net.Conn, error) {
	for attempt := 0; ; attempt++ {
		m.mu.Lock()
		s, stopped := m.sess, m.stopped
		m.mu.Unlock()
		if stopped {
			return nil, hypervisor.ErrStopped
		}
		select {
		case <-m.done:
			return nil, hypervisor.ErrStopped
		default:
		}
		if s != nil && !s.IsClosed() {
			c, err := s.OpenStream()
			if err == nil {
				return vmchan.Stream{Stream: c}, nil
			}
			if attempt > 0 {
				return nil, err
			}
		}
		if attempt > 0 {
			return nil, errors.New("qemu: agent channel is down")
		}
		// The session ended under a running VM (its agent restarted):
		// shake hands again, keeping the identity.
		if err := m.connect(ctx, ""); err != nil {
			return nil, err
		}
	}
}

// guestClient talks to this machine's agent.
func (m *Machine) guestClient() *client.Client {
	return client.New(func(ctx context.Context) (net.Conn, error) { return m.Dial(ctx) })
}

// Checkpoint implements hypervisor.Machine. The VM pauses; its disk's
// active layer is frozen (QMP blockdev-snapshot-sync puts a new one on
// top for the running VM); with memory, RAM and device state are saved
// to a file; the VM resumes. Without memory, the guest syncs its
// filesystems first, so the frozen layer holds what was written.
func (m *Machine) Checkpoint(ctx context.Context, tag string, memory bool) (hypervisor.Snapshot, error) {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	m.mu.Lock()
	vm, stopped := m.vm, m.stopped
	m.mu.Unlock()
	if stopped || vm == nil {
		return hypervisor.Snapshot{}, hypervisor.ErrStopped
	}
	if !memory {
		sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		res, err := m.guestClient().Exec(sctx, api.ExecRequest{Command: api.Command{Argv: []string{"sync"}, TimeoutSeconds: 60}})
		cancel()
		if err != nil {
			return hypervisor.Snapshot{}, fmt.Errorf("qemu: sync the guest's filesystems: %w", err)
		}
		if res.ExitCode != 0 {
			return hypervisor.Snapshot{}, fmt.Errorf("qemu: sync in the guest exited %d: %s", res.ExitCode, res.Stderr)
		}
	}
	id := randomID("snap-")
	dir := filepath.Join(m.b.snapshotsDir(), id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return hypervisor.Snapshot{}, err
	}
	fail := func(err error) (hypervisor.Snapshot, error) {
		os.RemoveAll(dir)
		return hypervisor.Snapshot{}, err
	}
	if err := vm.QMP.Execute(ctx, "stop", nil, nil); err != nil {
		return fail(fmt.Errorf("qemu: pause: %w", err))
	}
	resume := func() error {
		return vm.QMP.Execute(context.Background(), "cont", nil, nil)
	}
	m.mu.Lock()
	frozen := m.disk
	m.mu.Unlock()
	next := filepath.Join(m.b.disksDir(), randomID(m.spec.ID+"-")+".qcow2")
	err := vm.QMP.Execute(ctx, "blockdev-snapshot-sync", map[string]any{
		"device": "root", "snapshot-file": next, "format": "qcow2", "mode": "absolute-paths"}, nil)
	if err != nil {
		resume()
		os.Remove(next)
		return fail(fmt.Errorf("qemu: freeze the disk: %w", err))
	}
	m.mu.Lock()
	m.disk = next
	m.mu.Unlock()
	if err := m.saveState(); err != nil {
		m.b.log.Warn("save machine state", "machine", m.spec.ID, "err", err)
	}
	var bytes int64
	if memory {
		mem := filepath.Join(dir, "memory")
		if err := vm.SaveMemory(ctx, mem); err != nil {
			resume()
			return fail(fmt.Errorf("qemu: save memory: %w", err))
		}
		if fi, err := os.Stat(mem); err == nil {
			bytes += fi.Size()
		}
	}
	if err := resume(); err != nil {
		return fail(fmt.Errorf("qemu: resume: %w", err))
	}
	if fi, err := os.Stat(frozen); err == nil {
		bytes += fi.Size()
	}
	s := hypervisor.Snapshot{ID: id, Tag: tag, Machine: m.spec.ID, Backend: Name, Image: m.spec.Image,
		Memory: memory, CreatedAt: time.Now().UTC(), Layers: []string{filepath.Base(frozen)}, Bytes: bytes}
	m.mu.Lock()
	meta := snapMeta{Snapshot: s, Kit: m.kit, MemoryMB: m.memoryMB, CPUs: m.cpus, Disk: frozen, Accel: m.accel, Channel: m.channel}
	if !m.mmio {
		meta.Devices = devicesPCI
	}
	m.mu.Unlock()
	raw, _ := json.MarshalIndent(meta, "", "  ")
	if err := writeFileSync(filepath.Join(dir, "snapshot.json"), raw); err != nil {
		return fail(err)
	}
	return s, nil
}

// snapAccel is the accelerator a snapshot's machines boot under: the one
// it was taken under (device and memory state do not carry across), tcg
// for snapshots from before it was recorded.
func snapAccel(meta snapMeta) string {
	if meta.Accel == "" {
		return "tcg"
	}
	return meta.Accel
}

func writeFileSync(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Restore implements hypervisor.Machine: a new QEMU process starts on a
// fresh layer over the snapshot's frozen disk, loading its memory when it
// has some; the old process and its layer go. The machine keeps its id,
// hostname and machine-id; its random state is reseeded.
func (m *Machine) Restore(ctx context.Context, s hypervisor.Snapshot) error {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	meta, err := m.b.loadSnapshot(s)
	if err != nil {
		return err
	}
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return hypervisor.ErrStopped
	}
	old, oldDisk, sess := m.vm, m.disk, m.sess
	m.vm, m.sess = nil, nil
	m.mu.Unlock()
	if sess != nil {
		sess.Close()
	}
	if old != nil {
		old.Stop(ctx)
	}
	disk := filepath.Join(m.b.disksDir(), randomID(m.spec.ID+"-")+".qcow2")
	if err := CreateOverlay(ctx, meta.Disk, "qcow2", disk, 0); err != nil {
		return err
	}
	m.mu.Lock()
	m.disk = disk
	m.kit, m.memoryMB, m.cpus, m.accel, m.channel = meta.Kit, meta.MemoryMB, meta.CPUs, snapAccel(meta), snapChannel(meta)
	m.mmio = meta.Devices != devicesPCI
	m.mu.Unlock()
	os.Remove(oldDisk)
	incoming := ""
	if meta.Snapshot.Memory {
		incoming = filepath.Join(m.b.snapshotsDir(), s.ID, "memory")
	}
	if err := m.boot(ctx, incoming); err != nil {
		return fmt.Errorf("qemu: restore %s: %w", s.ID, err)
	}
	m.b.collect()
	return nil
}

// Fork implements hypervisor.Machine: n machines start from s at once,
// each on its own layer over the frozen disk, from the same memory file
// when s has memory, each with its own id, hostname, machine-id and seed.
func (m *Machine) Fork(ctx context.Context, s hypervisor.Snapshot, n int) ([]hypervisor.Machine, error) {
	return m.ForkAs(ctx, s, n, hypervisor.ForkIdentity{})
}

var _ hypervisor.IdentityForker = (*Machine)(nil)

// ForkAs implements hypervisor.IdentityForker: Fork whose children take
// the host name and machine-id of id that are set.
func (m *Machine) ForkAs(ctx context.Context, s hypervisor.Snapshot, n int, id hypervisor.ForkIdentity) ([]hypervisor.Machine, error) {
	if n < 1 || n > hypervisor.MaxForkChildren {
		return nil, fmt.Errorf("%w: fork count %d must be between 1 and %d", hypervisor.ErrInvalidSpec, n, hypervisor.MaxForkChildren)
	}
	if _, err := m.b.loadSnapshot(s); err != nil {
		return nil, err
	}
	return hypervisor.ForkNAs(ctx, m.spec, s, n, id, m.b.create)
}

// DeleteSnapshot implements hypervisor.Machine.
func (m *Machine) DeleteSnapshot(ctx context.Context, s hypervisor.Snapshot) error {
	if !hypervisor.IDPattern.MatchString(s.ID) {
		return fmt.Errorf("%w: snapshot id %q", hypervisor.ErrInvalidSpec, s.ID)
	}
	dir := filepath.Join(m.b.snapshotsDir(), s.ID)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: snapshot %s", hypervisor.ErrNotFound, s.ID)
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	m.b.collect()
	return nil
}

// Stop implements hypervisor.Machine: QEMU quits (or is killed), and the
// machine's layer, sockets and run directory go. Idempotent.
func (m *Machine) Stop(ctx context.Context) error {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return nil
	}
	m.stopped = true
	vm, sess, disk := m.vm, m.sess, m.disk
	m.sess = nil
	m.mu.Unlock()
	if sess != nil {
		sess.Close()
	}
	var errs []error
	if vm != nil {
		errs = append(errs, vm.Stop(ctx))
	}
	if disk != "" {
		if err := os.Remove(disk); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(m.dir); err != nil {
		errs = append(errs, err)
	}
	if err := os.Remove(m.b.statePath(m.spec.ID)); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	m.b.mu.Lock()
	if m.b.machines[m.spec.ID] == m {
		delete(m.b.machines, m.spec.ID)
	}
	m.b.mu.Unlock()
	m.doneOnce.Do(func() { close(m.done) })
	m.b.collect()
	return errors.Join(errs...)
}

// Wait implements hypervisor.Machine.
func (m *Machine) Wait(ctx context.Context) error {
	select {
	case <-m.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// consoleTail is the end of the console log, for error messages.
func (vm *VM) consoleTail() string {
	b, err := os.ReadFile(vm.Console)
	if err != nil || len(b) == 0 {
		return ""
	}
	if len(b) > 2048 {
		b = b[len(b)-2048:]
	}
	return "\nconsole:\n" + string(b)
}
