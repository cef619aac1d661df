package procbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"paddock.dev/paddock/hypervisor"
)

// Machines outlive the process that made them: the init runs in its own
// session, and nothing ties it to its parent. On boot each machine writes
// state.json into its directory; a process that stops without stopping
// its machines (Detach, or a crash) leaves them running with their owner
// locks released, and the next process on the state dir can Adopt them
// before SweepLeftovers removes the rest.

const stateFile = "state.json"

// stateVersion changes when machineState's meaning does; a file of
// another version is not adopted.
const stateVersion = 1

// machineState is what a later process needs to take a running machine
// over.
type machineState struct {
	Version int                    `json:"version"`
	Spec    hypervisor.MachineSpec `json:"spec"`
	Image   string                 `json:"image"`
	Rootfs  string                 `json:"rootfs"`
	Layers  []string               `json:"layers"`
	// PID, StartTime (clock ticks after boot, /proc/<pid>/stat field 22)
	// and BootID name the init process unambiguously: a recycled pid has
	// another start time, and both mean nothing after a reboot.
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"`
	BootID    string `json:"boot_id"`
	// Adoptable: the owner opened its backend with AdoptLeftovers (a
	// daemon), so the machine is meant to outlive it until the next
	// daemon adopts it; the sweep on opening a store leaves it alone
	// while it runs, and only SweepLeftovers removes it.
	Adoptable bool `json:"adoptable,omitempty"`
	// CPUBeforeNS is the CPU time of the machine's earlier boots (a
	// restore reboots it), so CPUTime carries on after an adoption.
	CPUBeforeNS int64 `json:"cpu_before_ns,omitempty"`
}

func (m *Machine) writeState() error {
	m.mu.Lock()
	st := machineState{Version: stateVersion, Spec: m.spec, Image: m.image, Rootfs: m.rootfs,
		Layers: append([]string(nil), m.layers...), Adoptable: m.b.adoptLeftovers, CPUBeforeNS: int64(m.cpuBefore)}
	if m.proc != nil {
		st.PID = m.proc.Pid
	}
	m.mu.Unlock()
	st.Spec.From = nil
	var err error
	if st.StartTime, err = procStartTime(st.PID); err != nil {
		return fmt.Errorf("record the machine's state: %w", err)
	}
	if st.BootID, err = bootID(); err != nil {
		return fmt.Errorf("record the machine's state: %w", err)
	}
	raw, err := json.Marshal(st)
	if err != nil {
		return err
	}
	tmp := filepath.Join(m.dir, stateFile+".tmp")
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(m.dir, stateFile))
}

var (
	procStartTime = hypervisor.ProcStartTime
	bootID        = hypervisor.BootID
)

// Adopt implements hypervisor.Adopter: it takes over machine id, which an
// earlier process on this state dir left running.
func (b *Backend) Adopt(ctx context.Context, id string) (hypervisor.Machine, error) {
	if !idRE.MatchString(id) {
		return nil, fmt.Errorf("%w: machine id %q", hypervisor.ErrInvalidSpec, id)
	}
	store, err := b.layerStore()
	if err != nil {
		return nil, err
	}
	guest, err := b.guestMemfd()
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	if _, dup := b.machines[id]; dup {
		b.mu.Unlock()
		return nil, fmt.Errorf("%w: machine %q is already this process's", hypervisor.ErrInvalidSpec, id)
	}
	m := &Machine{b: b, store: store, guest: guest, dir: filepath.Join(b.dir, "machines", id),
		spec: hypervisor.MachineSpec{ID: id}, log: b.log.With("machine", id)}
	b.machines[id] = m
	b.mu.Unlock()
	fail := func(err error) (hypervisor.Machine, error) {
		b.forget(id)
		return nil, err
	}
	lock, err := tryLock(filepath.Join(m.dir, "owner.lock"))
	if errors.Is(err, os.ErrNotExist) {
		return fail(fmt.Errorf("%w: no machine %s on this state dir", hypervisor.ErrNotFound, id))
	}
	if err != nil {
		return fail(fmt.Errorf("machine %s is owned by a running process: %w", id, err))
	}
	st, pidfd, proc, err := m.checkState(id)
	if err != nil {
		lock.Close()
		return fail(fmt.Errorf("%w: machine %s: %v", hypervisor.ErrNotFound, id, err))
	}
	lim, err := loadLimits(id)
	if err == nil {
		// A crash in the middle of a checkpoint leaves the cgroup frozen.
		err = lim.thaw()
	}
	if err != nil {
		unix.Close(pidfd)
		lock.Close()
		return fail(fmt.Errorf("%w: machine %s: %v", hypervisor.ErrNotFound, id, err))
	}
	exited := make(chan struct{})
	m.mu.Lock()
	m.spec, m.image, m.rootfs, m.layers = st.Spec, st.Image, st.Rootfs, st.Layers
	m.usedRootfs, m.writable = st.Rootfs, true
	m.owner, m.proc, m.lim, m.exited = lock, proc, lim, exited
	m.cpuBefore = time.Duration(st.CPUBeforeNS)
	m.gone = make(chan struct{})
	m.mu.Unlock()
	go m.watchAdopted(pidfd, exited)
	hctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if err := m.waitReady(hctx, exited); err != nil {
		if ctx.Err() != nil {
			// The caller gave up (a daemon told to stop while it
			// starts): the machine is not at fault, so it is let go,
			// running, for the next process.
			m.detach()
			return nil, fmt.Errorf("adopt machine %s: %w", id, ctx.Err())
		}
		m.Stop(context.Background())
		return nil, fmt.Errorf("%w: machine %s: its guest agent does not answer (%v)", hypervisor.ErrNotFound, id, err)
	}
	// The link an earlier daemon gave it ended with that daemon. Without
	// a new one the sandbox has no way out at all (it fails closed) but
	// keeps its work.
	if err := b.attachNet(st.Spec, st.PID, st.StartTime); err != nil {
		m.log.Warn("adopted sandbox left without network", "err", err)
	}
	m.log.Info("adopted a running sandbox", "pid", st.PID)
	return m, nil
}

// checkState reads the machine's state file and checks its init is still
// the process it names; it returns a pidfd on that process.
func (m *Machine) checkState(id string) (machineState, int, *os.Process, error) {
	var st machineState
	raw, err := os.ReadFile(filepath.Join(m.dir, stateFile))
	if err != nil {
		return st, -1, nil, fmt.Errorf("no state file (it never finished booting): %w", err)
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return st, -1, nil, fmt.Errorf("corrupt state file: %w", err)
	}
	if st.Version != stateVersion || st.Spec.ID != id || st.PID <= 0 {
		return st, -1, nil, fmt.Errorf("state file of another version or machine")
	}
	if boot, err := bootID(); err != nil || boot != st.BootID {
		return st, -1, nil, errors.New("the host rebooted since it ran")
	}
	// The pidfd first, then the start time: if the start time still
	// matches, the process the pidfd names is the machine's init.
	pidfd, err := unix.PidfdOpen(st.PID, 0)
	if err != nil {
		return st, -1, nil, fmt.Errorf("its init (pid %d) is not running", st.PID)
	}
	// The handle used to signal it is taken before the start time is
	// checked too, so it names the same process.
	proc, err := os.FindProcess(st.PID)
	if err != nil {
		unix.Close(pidfd)
		return st, -1, nil, fmt.Errorf("its init (pid %d): %v", st.PID, err)
	}
	if t, err := procStartTime(st.PID); err != nil || t != st.StartTime {
		unix.Close(pidfd)
		return st, -1, nil, fmt.Errorf("its init (pid %d) is not running", st.PID)
	}
	if _, err := os.Stat(st.Rootfs); err != nil {
		unix.Close(pidfd)
		return st, -1, nil, fmt.Errorf("its image build is gone: %w", err)
	}
	return st, pidfd, proc, nil
}

// leftForAdoption reports whether machine id was left running by a daemon
// for the next one to adopt, and its init still runs.
func (b *Backend) leftForAdoption(id string) bool {
	m := &Machine{dir: filepath.Join(b.dir, "machines", id)}
	st, pidfd, proc, err := m.checkState(id)
	if proc != nil {
		proc.Release()
	}
	if err != nil {
		return false
	}
	unix.Close(pidfd)
	return st.Adoptable
}

// watchAdopted closes exited when the adopted init ends. It is not this
// process's child, so it cannot be waited for; its pidfd turns readable
// when it exits.
func (m *Machine) watchAdopted(pidfd int, exited chan struct{}) {
	defer unix.Close(pidfd)
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); !errors.Is(err, unix.EINTR) {
			break
		}
	}
	m.mu.Lock()
	halting := m.halting
	m.mu.Unlock()
	close(exited)
	if !halting {
		m.log.Warn("adopted sandbox init exited on its own")
		m.goneOnce.Do(func() { close(m.gone) })
	}
}

// Detach implements hypervisor.Adopter: every machine is let go, running,
// with its owner lock released and the layer store left mounted.
func (b *Backend) Detach() {
	b.mu.Lock()
	ms := slices.Collect(maps.Values(b.machines))
	b.mu.Unlock()
	for _, m := range ms {
		m.detach()
	}
}

// detach lets go of one machine, running, with its owner lock released.
func (m *Machine) detach() {
	// Wait for a lifecycle operation in flight, then refuse the rest.
	m.opMu.Lock()
	m.mu.Lock()
	already := m.stopped
	m.stopped, m.halting = true, true
	m.mu.Unlock()
	if !already && m.owner != nil {
		m.owner.Close()
		m.log.Info("left running for a later process to adopt")
	}
	m.opMu.Unlock()
	m.b.forget(m.spec.ID)
}

// SweepLeftovers implements hypervisor.Adopter: unlike the sweep on
// opening the store, it also removes running machines a daemon left for
// adoption.
func (b *Backend) SweepLeftovers() {
	s, err := b.layerStore()
	if err != nil {
		b.log.Warn("sweep leftovers: open the layer store", "err", err)
		return
	}
	b.sweep(s, true)
}

var _ hypervisor.Adopter = (*Backend)(nil)
