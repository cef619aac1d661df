package qemu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/hypervisor/vmkit"
)

// A daemon opened with Config.AdoptLeftovers starts its VMs detachable
// (their own session, no parent-death signal) and keeps a state file per
// machine in <state>/qemu/machines/<id>.json. When it exits it lets them
// run (Detach); the next daemon adopts them: it checks the recorded QEMU
// process is the same one (start time, host boot id), dials its QMP
// socket and redoes the agent handshake with the machine's identity, so
// the guest carries on as it was. What nobody adopts is swept.

var _ hypervisor.Adopter = (*Backend)(nil)

// machineState is what a machine's state file records.
type machineState struct {
	Spec      hypervisor.MachineSpec `json:"spec"`
	Dir       string                 `json:"dir"`
	MachineID string                 `json:"machine_id"`
	Identity  string                 `json:"identity"`
	Kit       vmkit.Kit              `json:"kit"`
	Accel     string                 `json:"accel"`
	Channel   string                 `json:"channel"`
	MMIO      bool                   `json:"mmio,omitempty"`
	CID       uint32                 `json:"cid,omitempty"`
	Disk      string                 `json:"disk"`
	MemoryMB  int64                  `json:"memory_mb"`
	CPUs      int                    `json:"cpus"`
	PID       int                    `json:"pid"`
	PIDStart  uint64                 `json:"pid_start"`
	BootID    string                 `json:"boot_id"`
}

func (b *Backend) statePath(id string) string { return filepath.Join(b.machinesDir(), id+".json") }

// saveState records a detachable machine's running VM (after every boot
// and every change of its disk layer). Machines of a backend that does
// not adopt keep none.
func (m *Machine) saveState() error {
	if !m.b.adopt {
		return nil
	}
	m.mu.Lock()
	st := machineState{Spec: m.spec, Dir: m.dir, MachineID: m.machineID, Identity: m.identity, Kit: m.kit,
		Accel: m.accel, Channel: m.channel, MMIO: m.mmio, CID: m.cid, Disk: m.disk, MemoryMB: m.memoryMB, CPUs: m.cpus}
	if m.vm != nil {
		st.PID = m.vm.Pid()
	}
	m.mu.Unlock()
	var err error
	if st.PIDStart, err = hypervisor.ProcStartTime(st.PID); err != nil {
		return err
	}
	if st.BootID, err = hypervisor.BootID(); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(m.b.machinesDir(), 0o700); err != nil {
		return err
	}
	return writeFileSync(m.b.statePath(m.spec.ID), raw)
}

// alive says whether the state's QEMU process is the one it recorded.
func (st *machineState) alive() bool {
	start, err := hypervisor.ProcStartTime(st.PID)
	if err != nil || start != st.PIDStart {
		return false
	}
	boot, err := hypervisor.BootID()
	return err == nil && boot == st.BootID
}

func (b *Backend) readState(id string) (*machineState, error) {
	raw, err := os.ReadFile(b.statePath(id))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: no qemu machine %s", hypervisor.ErrNotFound, id)
	}
	if err != nil {
		return nil, err
	}
	var st machineState
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, fmt.Errorf("qemu: state of %s: %w", id, err)
	}
	if st.Spec.ID != id {
		return nil, fmt.Errorf("qemu: state of %s names %q", id, st.Spec.ID)
	}
	return &st, nil
}

// Adopt implements hypervisor.Adopter.
func (b *Backend) Adopt(ctx context.Context, id string) (hypervisor.Machine, error) {
	if !hypervisor.IDPattern.MatchString(id) {
		return nil, fmt.Errorf("%w: machine id %q", hypervisor.ErrInvalidSpec, id)
	}
	st, err := b.readState(id)
	if err != nil {
		return nil, err
	}
	if !st.alive() {
		return nil, fmt.Errorf("%w: the QEMU process of %s is gone", hypervisor.ErrNotFound, id)
	}
	b.mu.Lock()
	if _, dup := b.machines[id]; dup {
		b.mu.Unlock()
		return nil, fmt.Errorf("%w: machine %q is already this process's", hypervisor.ErrInvalidSpec, id)
	}
	m := &Machine{b: b, spec: st.Spec, dir: st.Dir, machineID: st.MachineID, identity: st.Identity, kit: st.Kit,
		accel: st.Accel, channel: st.Channel, mmio: st.MMIO, cid: st.CID, disk: st.Disk, memoryMB: st.MemoryMB,
		cpus: st.CPUs, done: make(chan struct{})}
	b.machines[id] = m
	b.mu.Unlock()
	cfg := VMConfig{Kit: st.Kit, Dir: st.Dir, Disk: st.Disk, Channel: true, VsockCID: st.CID, MMIO: st.MMIO, Detachable: true}
	vm, err := Attach(ctx, cfg, st.PID)
	if err == nil {
		m.mu.Lock()
		m.vm = vm
		m.mu.Unlock()
		go m.watch(vm)
		err = m.connect(ctx, "")
	}
	if err != nil {
		if ctx.Err() != nil {
			// Stopping while starting: let it run for the next start.
			m.forget()
			return nil, err
		}
		m.Stop(context.Background())
		return nil, fmt.Errorf("%w: adopt %s: %v", hypervisor.ErrNotFound, id, err)
	}
	return m, nil
}

// forget drops a machine from this process without stopping its VM.
func (m *Machine) forget() {
	m.mu.Lock()
	m.stopped = true
	sess, vm := m.sess, m.vm
	m.sess = nil
	m.mu.Unlock()
	if sess != nil {
		sess.Close()
	}
	if vm != nil && vm.QMP != nil {
		vm.QMP.Close()
	}
	m.b.mu.Lock()
	if m.b.machines[m.spec.ID] == m {
		delete(m.b.machines, m.spec.ID)
	}
	m.b.mu.Unlock()
}

// Detach implements hypervisor.Adopter: every machine is let go running,
// its state file kept for the next process.
func (b *Backend) Detach() {
	b.mu.Lock()
	ms := slices.Collect(maps.Values(b.machines))
	b.mu.Unlock()
	for _, m := range ms {
		m.saveState()
		m.forget()
	}
}

// SweepLeftovers implements hypervisor.Adopter: machines an earlier
// process left and nobody adopted are stopped (when their QEMU is still
// the recorded one) and their layer, run directory and state removed.
func (b *Backend) SweepLeftovers() {
	ents, _ := os.ReadDir(b.machinesDir())
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		b.mu.Lock()
		_, ours := b.machines[id]
		b.mu.Unlock()
		if ours {
			continue
		}
		st, err := b.readState(id)
		if err != nil {
			b.log.Warn("sweep: unreadable machine state", "file", e.Name(), "err", err)
			os.Remove(filepath.Join(b.machinesDir(), e.Name()))
			continue
		}
		if st.alive() {
			syscall.Kill(-st.PID, syscall.SIGKILL)
		}
		if st.Disk != "" {
			os.Remove(st.Disk)
		}
		if st.Dir != "" && strings.HasPrefix(st.Dir, b.dir+string(filepath.Separator)) {
			os.RemoveAll(st.Dir)
		}
		os.Remove(b.statePath(id))
		b.log.Info("swept a machine nobody adopted", "machine", id)
	}
	b.collect()
}
