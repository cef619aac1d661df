package procbox

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/sandboxinit"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/hypervisor/image"
)

// freezeTimeout bounds how long a checkpoint waits for the sandbox to freeze.
const freezeTimeout = 10 * time.Second

// Machine is one procbox sandbox.
type Machine struct {
	b     *Backend
	store layerStore
	spec  hypervisor.MachineSpec
	dir   string
	guest *os.File
	owner *os.File // flock held while this process owns the machine
	log   *slog.Logger

	// opMu serializes lifecycle operations (checkpoint, restore, fork,
	// stop) on this machine.
	opMu sync.Mutex

	mu         sync.Mutex
	image      string
	rootfs     string
	layers     []string    // snapshot layers under the upper layer, oldest first
	proc       *os.Process // the current init (started here, or adopted)
	lim        limits
	cpuBefore  time.Duration // CPU time of earlier boots (compute.go)
	exited     chan struct{} // closed when the current init exits
	halting    bool
	stopped    bool
	writable   bool          // the store holds a writable layer for this machine
	usedRootfs string        // the image build this boot marked in use
	gone       chan struct{} // closed once the machine has stopped for good
	goneOnce   sync.Once
}

// ID implements hypervisor.Machine.
func (m *Machine) ID() string { return m.spec.ID }

// Image returns the image the machine's layer chain sits on.
func (m *Machine) Image() string { m.mu.Lock(); defer m.mu.Unlock(); return m.image }

// PID returns the host pid of the machine's init, 0 when not running.
func (m *Machine) PID() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc == nil {
		return 0
	}
	return m.proc.Pid
}

// sockPath is short whatever the id (unix socket paths are limited to 107
// bytes): <state>/procbox/run/<16 hex of sha256(id)>.sock.
func (m *Machine) sockPath() string {
	h := sha256.Sum256([]byte(m.spec.ID))
	return filepath.Join(m.b.dir, "run", hex.EncodeToString(h[:8])+".sock")
}

// Dial implements hypervisor.Machine.
func (m *Machine) Dial(ctx context.Context) (net.Conn, error) {
	m.mu.Lock()
	stopped := m.stopped
	m.mu.Unlock()
	if stopped {
		return nil, fmt.Errorf("%w: %s", hypervisor.ErrStopped, m.spec.ID)
	}
	return dialUnix(ctx, m.sockPath())
}

// boot starts the machine's init on the current layer chain with a fresh
// upper layer, and returns once the guest agent answers.
func (m *Machine) boot(ctx context.Context) error {
	if m.gone == nil {
		m.gone = make(chan struct{})
	}
	merged := filepath.Join(m.dir, "merged")
	for _, d := range []string{merged, filepath.Dir(m.sockPath())} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	if len(m.sockPath()) >= 108 {
		return fmt.Errorf("%w: socket path %q is too long for a unix socket; use a shorter state dir", hypervisor.ErrInvalidSpec, m.sockPath())
	}
	// The image build under this machine must outlive a rebuild.
	m.mu.Lock()
	rootfs := m.rootfs
	m.mu.Unlock()
	if err := m.b.images.Use(rootfs, "m-"+m.spec.ID); err != nil {
		return fmt.Errorf("mark the image in use: %w", err)
	}
	m.mu.Lock()
	m.usedRootfs = rootfs
	m.mu.Unlock()
	rw, err := m.store.newWritable(m.spec.ID, m.spec.DiskMB)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.writable = true
	m.mu.Unlock()
	upper, work, ident := filepath.Join(rw, "upper"), filepath.Join(rw, "work"), filepath.Join(rw, "identity")
	overlays, err := m.overlayConfig(rw)
	if err != nil {
		return err
	}
	// The layer chain this boot stands on, on disk, so layer collection by
	// any process on this state dir keeps it (see collectLayers).
	m.mu.Lock()
	chain, _ := json.Marshal(m.layers)
	m.mu.Unlock()
	if err := os.WriteFile(filepath.Join(m.dir, "layers.json"), chain, 0o600); err != nil {
		return err
	}
	os.Remove(m.sockPath())
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: m.sockPath(), Net: "unix"})
	if err != nil {
		return fmt.Errorf("listen on the agent socket: %w", err)
	}
	l.SetUnlinkOnClose(false)
	lf, err := l.File()
	l.Close()
	if err != nil {
		return err
	}
	defer lf.Close()
	os.Chmod(m.sockPath(), 0o600)

	lim, err := newLimits(m.spec.ID, resources{cpus: m.spec.CPUs, memoryMB: m.spec.MemoryMB, pids: m.spec.PIDs})
	if err != nil {
		return err
	}
	console, err := os.OpenFile(filepath.Join(m.dir, "console.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		lim.delete()
		return err
	}
	defer console.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		lim.delete()
		return err
	}
	defer pw.Close()
	// The child execs the guest straight from the sealed memfd, which
	// ExtraFiles puts at fd 5 (so nothing in the sandbox can rewrite the
	// host's copy of the binary through /proc/1/exe).
	newCmd := func() *exec.Cmd {
		return &exec.Cmd{
			Path:       "/proc/self/fd/5",
			Args:       []string{"paddock-guest", sandboxinit.Subcommand},
			Env:        []string{},
			Stdout:     console,
			Stderr:     console,
			ExtraFiles: []*os.File{lf, pr, m.guest}, // fds 3, 4, 5: see sandboxinit
			SysProcAttr: &syscall.SysProcAttr{
				Cloneflags: unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWNET,
				Setsid:     true,
			},
		}
	}
	cmd := newCmd()
	cgfd, err := lim.dirFD()
	if err != nil {
		lim.delete()
		return err
	}
	if cgfd != nil {
		defer cgfd.Close()
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = int(cgfd.Fd())
	}
	err = cmd.Start()
	if err != nil && cgfd != nil && (errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM)) {
		// CLONE_INTO_CGROUP needs clone3, which some seccomp profiles
		// (Docker's default) refuse: start normally and add the pid
		// before the init is allowed to go on, as on cgroup v1.
		m.log.Debug("clone3 refused; adding the init to its cgroup after start", "err", err)
		cmd = newCmd()
		cgfd.Close()
		cgfd = nil
		err = cmd.Start()
	}
	if err != nil {
		pr.Close()
		lim.delete()
		return fmt.Errorf("start sandbox init: %w", err)
	}
	pr.Close()
	// The child has the listener now: without our copy, a connection to a
	// dead init is refused at once instead of waiting in the backlog.
	lf.Close()
	exited := make(chan struct{})
	m.mu.Lock()
	m.proc, m.lim, m.exited, m.halting = cmd.Process, lim, exited, false
	lower := make([]string, 0, len(m.layers)+1)
	for i := len(m.layers) - 1; i >= 0; i-- {
		lower = append(lower, m.layers[i])
	}
	lower = append(lower, m.rootfs)
	m.mu.Unlock()
	go func() {
		err := cmd.Wait()
		m.mu.Lock()
		halting := m.halting
		m.mu.Unlock()
		close(exited)
		if !halting {
			m.log.Warn("sandbox init exited on its own", "err", err)
			m.goneOnce.Do(func() { close(m.gone) })
		}
	}()
	if cgfd == nil {
		if err := lim.addProc(cmd.Process.Pid); err != nil {
			return fmt.Errorf("add init to its cgroup: %w", err)
		}
	}
	cfg := sandboxinit.Config{
		Merged: merged, Lower: lower, Upper: upper, Work: work, IdentityDir: ident,
		Hostname: m.spec.Hostname, MachineID: m.spec.MachineID, GuestUser: m.spec.GuestUser, GuestHome: image.GuestHome,
		Env: m.spec.Env, Overlays: overlays, TrustPEM: string(m.spec.TrustPEM),
	}
	if len(m.spec.TrustPEM) > 0 {
		cfg.Env = append(append([]string(nil), cfg.Env...), api.TrustEnv()...)
	}
	if n := m.spec.Network; n == hypervisor.NetworkProxy || n == hypervisor.NetworkTransparent {
		if err := os.MkdirAll(m.spec.EgressDir, 0o700); err != nil {
			return fmt.Errorf("egress directory: %w", err)
		}
		cfg.Egress = &sandboxinit.Egress{Dir: m.spec.EgressDir, Transparent: n == hypervisor.NetworkTransparent}
		cfg.Env = append(append([]string(nil), cfg.Env...), api.ProxyEnv()...)
	}
	if err := json.NewEncoder(pw).Encode(cfg); err != nil {
		return fmt.Errorf("send init config: %w", err)
	}
	pw.Close()
	if err := m.waitReady(ctx, exited); err != nil {
		return err
	}
	if err := m.b.attachNet(m.spec, cmd.Process.Pid, 0); err != nil {
		return err
	}
	// What a later process needs to adopt this machine.
	return m.writeState()
}

// overlayConfig makes the writable directories of the machine's overlays
// in rw and lists, for each, the snapshot layers under it (newest first).
// The upper's root is the guest user's, so the view is writable by it.
func (m *Machine) overlayConfig(rw string) ([]sandboxinit.Overlay, error) {
	if len(m.spec.Overlays) == 0 {
		return nil, nil
	}
	uid, gid := image.GuestUID, image.GuestGID
	fmt.Sscanf(m.spec.GuestUser, "%d:%d", &uid, &gid)
	m.mu.Lock()
	layers := slices.Clone(m.layers)
	m.mu.Unlock()
	out := make([]sandboxinit.Overlay, 0, len(m.spec.Overlays))
	for i, o := range m.spec.Overlays {
		dir := filepath.Join(rw, overlaysDir, fmt.Sprint(i))
		upper, work := filepath.Join(dir, "upper"), filepath.Join(dir, "work")
		for _, d := range []string{upper, work} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return nil, err
			}
		}
		if err := os.Chown(upper, uid, gid); err != nil {
			return nil, err
		}
		ov := sandboxinit.Overlay{Target: o.Target, Lower: o.Lower, Upper: upper, Work: work}
		for j := len(layers) - 1; j >= 0; j-- {
			if l := m.store.overlayLayer(layers[j], i); fileExists(l) {
				ov.Layers = append(ov.Layers, l)
			}
		}
		out = append(out, ov)
	}
	return out, nil
}

// waitReady polls the agent's health route until it answers.
func (m *Machine) waitReady(ctx context.Context, exited chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	delay := 200 * time.Microsecond
	for {
		// Each try is short: a try that connected just before the init
		// died would otherwise wait for the whole timeout.
		tctx, tcancel := context.WithTimeout(ctx, time.Second)
		err := m.health(tctx)
		tcancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("sandbox init exited before the agent answered: %s", m.consoleTail())
		case <-ctx.Done():
			return fmt.Errorf("guest agent did not answer within %s: %v; console: %s", readyTimeout, err, m.consoleTail())
		case <-time.After(delay):
		}
		if delay < 20*time.Millisecond {
			delay *= 2
		}
	}
}

// health does one GET /v1/health over the socket, with no dependency on
// the guest client package.
func (m *Machine) health(ctx context.Context) error {
	c, err := dialUnix(ctx, m.sockPath())
	if err != nil {
		return err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	if _, err := c.Write([]byte("GET /v1/health HTTP/1.1\r\nHost: guest\r\nConnection: close\r\n\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.Contains(line, " 200 ") {
		return fmt.Errorf("health: %s", strings.TrimSpace(line))
	}
	return nil
}

func (m *Machine) consoleTail() string {
	b, _ := os.ReadFile(filepath.Join(m.dir, "console.log"))
	s := strings.TrimSpace(string(b))
	// A Go crash prints its reason first and a long trace after it.
	if i := strings.Index(s, "fatal error"); i >= 0 {
		s = s[i:]
	} else if i := strings.Index(s, "panic:"); i >= 0 {
		s = s[i:]
	}
	if len(s) > 2000 {
		s = s[:2000]
	}
	if s == "" {
		return "(no console output)"
	}
	return s
}

// halt ends the current init and everything in the cgroup, and removes the
// writable layer. The machine directory stays for the next boot.
func (m *Machine) halt() error {
	m.mu.Lock()
	proc, lim, exited := m.proc, m.lim, m.exited
	m.halting = true
	m.proc, m.lim = nil, nil
	m.mu.Unlock()
	var errs []error
	if proc != nil {
		// SIGKILL to PID 1 of a PID namespace kills the whole namespace.
		proc.Signal(syscall.SIGKILL)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			errs = append(errs, errors.New("sandbox init did not exit after SIGKILL"))
		}
	}
	if lim != nil {
		// The boot's CPU time outlives its cgroup (CPUTime).
		if d, err := lim.cpuUsage(); err == nil {
			m.mu.Lock()
			m.cpuBefore += d
			m.mu.Unlock()
		}
		if err := lim.delete(); err != nil {
			errs = append(errs, fmt.Errorf("remove cgroup: %w", err))
		}
	}
	m.mu.Lock()
	writable := m.writable
	m.writable = false
	m.mu.Unlock()
	if writable {
		if err := m.store.removeWritable(m.spec.ID); err != nil {
			errs = append(errs, fmt.Errorf("remove the writable layer: %w", err))
		}
	}
	os.Remove(m.sockPath())
	m.mu.Lock()
	used := m.usedRootfs
	m.usedRootfs = ""
	m.mu.Unlock()
	if used != "" {
		if err := m.b.images.Release(used, "m-"+m.spec.ID); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Stop implements hypervisor.Machine. It is idempotent.
func (m *Machine) Stop(ctx context.Context) error {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	return m.stopLocked()
}

// stopLocked is Stop with opMu held.
func (m *Machine) stopLocked() error {
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return nil
	}
	m.stopped = true
	m.mu.Unlock()
	err := m.halt()
	if rmErr := os.RemoveAll(m.dir); rmErr != nil {
		err = errors.Join(err, rmErr)
	}
	if m.owner != nil {
		m.owner.Close()
	}
	m.b.forget(m.spec.ID)
	if cerr := m.b.collectLayers(); cerr != nil {
		m.log.Warn("collect unused snapshot layers", "err", cerr)
	}
	if m.gone == nil {
		m.gone = make(chan struct{})
	}
	m.goneOnce.Do(func() { close(m.gone) })
	if err != nil {
		m.log.Error("stop left something behind", "err", err)
	}
	return err
}

// Wait implements hypervisor.Machine: it returns when the machine has
// stopped, or its init died.
func (m *Machine) Wait(ctx context.Context) error {
	select {
	case <-m.gone:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Checkpoint implements hypervisor.Machine. The cgroup is frozen while the
// upper layer is copied into a new read-only layer, so the copy is
// consistent; the machine carries on afterwards.
func (m *Machine) Checkpoint(ctx context.Context, tag string, memory bool) (hypervisor.Snapshot, error) {
	if memory {
		caps := m.b.Capabilities()
		if !caps.MemoryCheckpoint {
			return hypervisor.Snapshot{}, fmt.Errorf("%w: memory checkpoint: %s", hypervisor.ErrNotSupported, caps.MemoryCheckpointReason)
		}
	}
	if len(tag) > 128 || strings.ContainsAny(tag, "\x00\n") {
		return hypervisor.Snapshot{}, fmt.Errorf("%w: tag must be at most 128 characters without NUL or newline", hypervisor.ErrInvalidSpec)
	}
	m.opMu.Lock()
	defer m.opMu.Unlock()
	m.mu.Lock()
	if m.stopped || m.lim == nil {
		m.mu.Unlock()
		return hypervisor.Snapshot{}, fmt.Errorf("%w: %s", hypervisor.ErrStopped, m.spec.ID)
	}
	lim, layers, img := m.lim, slices.Clone(m.layers), m.image
	m.mu.Unlock()

	id := randomID("snap-")
	dir := m.b.snapshotDir(id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return hypervisor.Snapshot{}, err
	}
	// Frozen, no process changes the upper layer while it becomes a
	// layer: the snapshot is what the sandbox had at one instant.
	if err := lim.freeze(freezeTimeout); err != nil {
		os.RemoveAll(dir)
		return hypervisor.Snapshot{}, fmt.Errorf("freeze: %w", err)
	}
	layer, n, err := m.store.snapshot(ctx, m.spec.ID, id)
	if n < 0 {
		// The store could not say what the layer holds: at most the
		// machine's disk limit.
		n = m.spec.DiskMB << 20
	}
	if terr := lim.thaw(); terr != nil && err == nil {
		err = fmt.Errorf("thaw: %w", terr)
	}
	if err != nil {
		m.store.removeSnapshot(id)
		os.RemoveAll(dir)
		return hypervisor.Snapshot{}, fmt.Errorf("snapshot the writable layer: %w", err)
	}
	s := hypervisor.Snapshot{
		ID: id, Tag: tag, Machine: m.spec.ID, Backend: Name, Image: img,
		CreatedAt: time.Now().UTC(), Layers: append(layers, layer), Bytes: n,
	}
	m.mu.Lock()
	rootfs := m.rootfs
	m.mu.Unlock()
	if err := m.b.images.Use(rootfs, "s-"+id); err != nil {
		m.store.removeSnapshot(id)
		os.RemoveAll(dir)
		return hypervisor.Snapshot{}, err
	}
	if err := writeMeta(dir, snapshotMeta{Snapshot: s, Rootfs: rootfs}); err != nil {
		m.b.images.Release(rootfs, "s-"+id)
		m.store.removeSnapshot(id)
		os.RemoveAll(dir)
		return hypervisor.Snapshot{}, err
	}
	return s, nil
}

// Restore implements hypervisor.Machine: the machine reboots on the
// snapshot's layer chain with a fresh upper layer. Processes end.
func (m *Machine) Restore(ctx context.Context, s hypervisor.Snapshot) error {
	if s.Memory {
		return fmt.Errorf("%w: memory restore", hypervisor.ErrNotSupported)
	}
	s, rootfs, err := m.b.resolveSnapshot(s)
	if err != nil {
		return err
	}
	m.opMu.Lock()
	defer m.opMu.Unlock()
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return fmt.Errorf("%w: %s", hypervisor.ErrStopped, m.spec.ID)
	}
	m.mu.Unlock()
	if err := m.halt(); err != nil {
		return err
	}
	m.mu.Lock()
	m.layers, m.image, m.rootfs = slices.Clone(s.Layers), s.Image, rootfs
	m.mu.Unlock()
	if err := m.boot(ctx); err != nil {
		// Half booted is worse than stopped: clean up and say so.
		m.stopLocked()
		return fmt.Errorf("restore failed and the machine was stopped: %w", err)
	}
	return nil
}

// Fork implements hypervisor.Machine: n new machines boot from s in
// parallel, each with its own upper layer, hostname and id.
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
	s, _, err := m.b.resolveSnapshot(s)
	if err != nil {
		return nil, err
	}
	return hypervisor.ForkNAs(ctx, m.spec, s, n, id, m.b.create)
}

// DeleteSnapshot implements hypervisor.Machine. A snapshot whose layer is
// still under a running machine, or under another snapshot's chain, keeps
// its layer until the last user is gone.
func (m *Machine) DeleteSnapshot(ctx context.Context, s hypervisor.Snapshot) error {
	return m.b.DeleteSnapshot(s)
}

// DeleteSnapshot marks a snapshot deleted and removes every layer no
// longer used by a live snapshot or a running machine.
func (b *Backend) DeleteSnapshot(s hypervisor.Snapshot) error {
	if !idRE.MatchString(s.ID) {
		return fmt.Errorf("%w: snapshot id %q", hypervisor.ErrInvalidSpec, s.ID)
	}
	dir := b.snapshotDir(s.ID)
	raw, err := os.ReadFile(filepath.Join(dir, "snapshot.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil // already gone: deleting is idempotent
	}
	if err != nil {
		return err
	}
	var meta snapshotMeta
	if err := json.Unmarshal(raw, &meta); err != nil {
		return err
	}
	if !meta.Deleted {
		meta.Deleted = true
		if err := writeMeta(dir, meta); err != nil {
			return err
		}
	}
	return b.collectLayers()
}

func writeMeta(dir string, meta snapshotMeta) error {
	raw, _ := json.MarshalIndent(meta, "", "  ")
	tmp := filepath.Join(dir, "snapshot.json.tmp")
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "snapshot.json"))
}

// collectLayers removes deleted snapshots whose own layer no live snapshot
// chain and no running machine stands on.
func (b *Backend) collectLayers() error {
	b.gcMu.Lock()
	defer b.gcMu.Unlock()
	root := filepath.Join(b.dir, "snapshots")
	ents, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	used := map[string]bool{}
	var deleted []snapshotMeta
	for _, e := range ents {
		raw, err := os.ReadFile(filepath.Join(root, e.Name(), "snapshot.json"))
		if err != nil {
			continue // being written, or not a snapshot
		}
		var s snapshotMeta
		if json.Unmarshal(raw, &s) != nil {
			continue
		}
		if s.Deleted {
			deleted = append(deleted, s)
			continue
		}
		for _, l := range s.Layers {
			used[l] = true
		}
	}
	b.mu.Lock()
	for _, mm := range b.machines {
		mm.mu.Lock()
		for _, l := range mm.layers {
			used[l] = true
		}
		mm.mu.Unlock()
	}
	b.mu.Unlock()
	// Machines of other processes on this state dir: their chains are on
	// disk beside their owner locks.
	chains, _ := filepath.Glob(filepath.Join(b.dir, "machines", "*", "layers.json"))
	for _, c := range chains {
		var ls []string
		if raw, err := os.ReadFile(c); err == nil && json.Unmarshal(raw, &ls) == nil {
			for _, l := range ls {
				used[l] = true
			}
		}
	}
	b.storeMu.Lock()
	store := b.store
	b.storeMu.Unlock()
	if store == nil {
		return nil // released: collect on the next open
	}
	var errs []error
	// A deleted snapshot's chain may keep older deleted layers alive: go
	// round until nothing more can be freed.
	for changed := true; changed; {
		changed = false
		for i, s := range deleted {
			if s.ID == "" || len(s.Layers) == 0 {
				continue
			}
			own := s.Layers[len(s.Layers)-1]
			if used[own] || usedByDeleted(deleted, i, own) {
				continue
			}
			if s.Rootfs != "" {
				b.images.Release(s.Rootfs, "s-"+s.ID)
			}
			if err := store.removeSnapshot(s.ID); err != nil {
				errs = append(errs, err)
				continue
			}
			if err := os.RemoveAll(b.snapshotDir(s.ID)); err != nil {
				errs = append(errs, err)
			}
			deleted[i].ID = ""
			changed = true
		}
	}
	return errors.Join(errs...)
}

// usedByDeleted reports whether another deleted snapshot that still exists
// has layer in its chain below its own layer.
func usedByDeleted(deleted []snapshotMeta, self int, layer string) bool {
	for j, d := range deleted {
		if j == self || d.ID == "" {
			continue
		}
		for _, l := range d.Layers[:len(d.Layers)-1] {
			if l == layer {
				return true
			}
		}
	}
	return false
}
