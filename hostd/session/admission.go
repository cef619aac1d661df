package session

// Admission: before a machine is made (create, fork, restore) and when a
// checkpoint is kept, what it asks for is added to what the live machines
// and checkpoints already hold, and refused when that passes one of:
//
//   - the host: one machine's memory_mb or cpus above the host's MemTotal
//     or CPU count (400, memory_above_host, cpus_above_host);
//   - the tenant's limits: the sums of disk_mb (checkpoints included),
//     memory_mb and cpus over the tenant's live sessions and sandboxes
//     (403, tenant_disk_limit, tenant_memory_limit, tenant_cpus_limit);
//   - the backend's disk: the sum of disk_mb of the machines on one
//     backend, and of its checkpoints' bytes, within its disk's size less
//     the reserve kept for the daemon's own writes, times the operator's
//     overcommit ratio (1, none, unless `paddock serve --disk-overcommit`)
//     (409, disk_exhausted).
//
// A request that does not fit is refused, never cut down: a sandbox whose
// disk fills sooner than it was told is a worse surprise than a refusal
// that says how much is left. The sums live in memory (Manager.held),
// rebuilt from the records by Reattach.

import (
	"fmt"
	"math"
	"strconv"

	"paddock.dev/paddock/errdefs"
	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hypervisor"
)

// MaxDiskOvercommit bounds AdmissionConfig.DiskOvercommit.
const MaxDiskOvercommit = 100

// AdmissionConfig sets what admission allows beyond the defaults.
type AdmissionConfig struct {
	// DiskOvercommit lets the disk sizes on one backend add up to this
	// many times what its disk can hold less the reserve. 0 and 1 mean no
	// overcommit; at most MaxDiskOvercommit.
	DiskOvercommit float64
	// TenantLimits gives a tenant's limits as the tenants file sets them
	// (nil: only the built-in defaults, see tenantLimits).
	TenantLimits func(tenant string) auth.Limits
}

// SetAdmission replaces the admission settings; call it before serving.
func (m *Manager) SetAdmission(c AdmissionConfig) error {
	if c.DiskOvercommit != 0 && !(c.DiskOvercommit >= 1 && c.DiskOvercommit <= MaxDiskOvercommit) {
		return fmt.Errorf("disk overcommit %v: a ratio from 1 (none) to %d", c.DiskOvercommit, MaxDiskOvercommit)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.admission = c
	return nil
}

// Resources are what one machine is given: its disk, memory and CPUs.
type Resources struct {
	DiskMB   int64   `json:"disk_mb"`
	MemoryMB int64   `json:"memory_mb"`
	CPUs     float64 `json:"cpus"`
}

func (r Resources) times(n int) Resources {
	return Resources{DiskMB: r.DiskMB * int64(n), MemoryMB: r.MemoryMB * int64(n), CPUs: r.CPUs * float64(n)}
}

func (r Resources) plus(o Resources) Resources {
	return Resources{DiskMB: r.DiskMB + o.DiskMB, MemoryMB: r.MemoryMB + o.MemoryMB, CPUs: r.CPUs + o.CPUs}
}

// holding is what one session (or a create or fork under way) holds.
type holding struct {
	tenant  string
	backend string
	// res is its machine's: counted while the machine runs
	// (Manager.machines) or while pending.
	res     Resources
	pending bool
	// snaps are its checkpoints' MiB, by snapshot id: counted until the
	// session is deleted or expires (the checkpoints go with it).
	snaps map[string]int64
}

func (h *holding) snapMB() (n int64) {
	for _, v := range h.snaps {
		n += v
	}
	return n
}

// admissionCheck is the arithmetic of one admission, apart from the
// Manager so that it can be tested as a table.
type admissionCheck struct {
	backend string
	ask     Resources // one machine's (zero for a checkpoint alone)
	count   int       // how many machines (a fork's children)
	snapMB  int64     // checkpoint MiB asked for besides the machines
	cap     *hypervisor.Capacity
	// overcommit is the disk ratio (0 or 1: none).
	overcommit float64
	// backendDiskMB is what the backend's disk holds already: the disk_mb
	// of its live machines and its checkpoints' MiB.
	backendDiskMB int64
	tenant        string // "" is the admin: no tenant limits
	tenantHeld    Resources
	limits        auth.Limits // as the tenants file sets them
}

// diskRoomMB is the MiB that can be committed on the backend's disk in all.
func (c admissionCheck) diskRoomMB() int64 {
	ratio := c.overcommit
	if ratio < 1 {
		ratio = 1
	}
	room := float64(c.cap.DiskBytes-c.cap.DiskReserveBytes) * ratio / (1 << 20)
	return max(int64(math.Floor(room)), 0)
}

// tenantLimits fills the limits the tenants file leaves out with the
// built-in defaults: half of the backend's disk room (disk a tenant holds
// is disk no other tenant can have), the host's memory and four times its
// CPUs (memory_mb and cpus are ceilings the kernel enforces on use, not
// space set aside: one tenant is never promised more memory than the host
// has, and CPU time is shared). Without a capacity (a backend that cannot
// say) a missing limit does not apply (0).
func (c admissionCheck) tenantLimits() auth.Limits {
	l := c.limits
	if c.cap == nil {
		return l
	}
	if l.DiskMB == 0 {
		l.DiskMB = max(c.diskRoomMB()/2, 1)
	}
	if l.MemoryMB == 0 {
		l.MemoryMB = max(c.cap.MemoryMB, 1)
	}
	if l.CPUs == 0 {
		l.CPUs = float64(4 * c.cap.CPUs)
	}
	return l
}

func mib(n int64) string { return strconv.FormatInt(n, 10) + " MiB" }

func cpus(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// check refuses what does not fit, with a message that gives the numbers.
func (c admissionCheck) check() error {
	count := max(c.count, 0)
	what, asks := "this sandbox", "asks"
	if count > 1 {
		what, asks = fmt.Sprintf("these %d sandboxes", count), "ask"
	}
	if c.cap != nil && count > 0 {
		if c.cap.MemoryMB > 0 && c.ask.MemoryMB > c.cap.MemoryMB {
			return coded(CodeMemoryAboveHost, fmt.Errorf("%w: memory_mb %d is more than this host has (MemTotal %s); ask for at most %d",
				ErrBadRequest, c.ask.MemoryMB, mib(c.cap.MemoryMB), c.cap.MemoryMB))
		}
		if c.cap.CPUs > 0 && c.ask.CPUs > float64(c.cap.CPUs) {
			return coded(CodeCPUsAboveHost, fmt.Errorf("%w: cpus %s is more than this host has (%d CPUs); ask for at most %d",
				ErrBadRequest, cpus(c.ask.CPUs), c.cap.CPUs, c.cap.CPUs))
		}
	}
	total := c.ask.times(count)
	diskAsk := total.DiskMB + c.snapMB
	askText := func(unit string, n float64, per float64) string {
		if count > 1 {
			return fmt.Sprintf("%s%s (%d × %s)", cpus(n), unit, count, cpus(per))
		}
		return cpus(n) + unit
	}
	if c.tenant != "" {
		l := c.tenantLimits()
		over := func(code, field string, held, limit float64, askedText, unit string) error {
			return coded(code, fmt.Errorf("%w: tenant %s's limit on %s is %s%s: its live sessions and sandboxes hold %s%s, and %s %s for %s more; delete some of them or ask for less (the limit is set in the tenants file, see docs/tenants.md)",
				ErrForbidden, c.tenant, field, cpus(limit), unit, cpus(held), unit, what, asks, askedText))
		}
		if l.DiskMB > 0 && c.tenantHeld.DiskMB+diskAsk > l.DiskMB {
			t := askText(" MiB", float64(total.DiskMB), float64(c.ask.DiskMB))
			if count == 0 {
				what, t = "the checkpoint", mib(c.snapMB)
			} else if c.snapMB > 0 {
				t += " and the fork's checkpoint " + mib(c.snapMB)
			}
			return over(CodeTenantDiskLimit, "disk_mb (checkpoints included)", float64(c.tenantHeld.DiskMB), float64(l.DiskMB), t, " MiB")
		}
		if l.MemoryMB > 0 && count > 0 && c.tenantHeld.MemoryMB+total.MemoryMB > l.MemoryMB {
			return over(CodeTenantMemoryLimit, "memory_mb", float64(c.tenantHeld.MemoryMB), float64(l.MemoryMB),
				askText(" MiB", float64(total.MemoryMB), float64(c.ask.MemoryMB)), " MiB")
		}
		// A hair of slack: 0.1 + 0.2 is not 0.3 in floating point.
		if l.CPUs > 0 && count > 0 && c.tenantHeld.CPUs+total.CPUs > l.CPUs+1e-9 {
			return over(CodeTenantCPUsLimit, "cpus", c.tenantHeld.CPUs, l.CPUs, askText("", total.CPUs, c.ask.CPUs), "")
		}
	}
	if c.cap != nil {
		room := c.diskRoomMB()
		if c.backendDiskMB+diskAsk > room {
			asked := what + " " + asks + " for " + askText(" MiB of disk", float64(total.DiskMB), float64(c.ask.DiskMB))
			if count == 0 {
				asked = "this session asks to keep a checkpoint that may come to hold " + mib(c.snapMB)
			} else if c.snapMB > 0 {
				asked += " and a checkpoint of " + mib(c.snapMB)
			}
			ratio := ""
			if c.overcommit > 1 {
				ratio = fmt.Sprintf(", overcommitted %s times", cpus(c.overcommit))
			}
			hint := "ask for less (runtime.disk_mb) or delete sandboxes or checkpoints"
			if count == 0 {
				hint = "delete checkpoints or sandboxes first"
			}
			return coded(CodeDiskExhausted, fmt.Errorf("%w: not enough disk on the %s backend: %s; %s are committed already to live machines and checkpoints, of %s (%s), which keeps %s in reserve for the daemon's own writes: %s can be committed in all%s, %s are left; %s",
				ErrConflict, c.backend, asked, mib(c.backendDiskMB), mib(c.cap.DiskBytes>>20), c.cap.Disk, mib(c.cap.DiskReserveBytes>>20),
				mib(room), ratio, mib(max(room-c.backendDiskMB, 0)), hint))
		}
	}
	return nil
}

func coded(code string, err error) error { return errdefs.WithCode(code, err) }

// capacityOf is a backend's capacity, nil when it cannot say.
func capacityOf(b hypervisor.Backend) (*hypervisor.Capacity, error) {
	cr, ok := b.(hypervisor.CapacityReporter)
	if !ok {
		return nil, nil
	}
	c, err := cr.Capacity()
	if err != nil {
		return nil, fmt.Errorf("measure what the %s backend can hold: %w", b.Name(), err)
	}
	return &c, nil
}

// effective is what a runtime asks for, the backend's defaults filled in.
func effective(rt Runtime, c *hypervisor.Capacity) Resources {
	r := Resources{DiskMB: rt.DiskMB, MemoryMB: rt.MemoryMB, CPUs: rt.CPUs}
	if c != nil {
		if r.DiskMB == 0 {
			r.DiskMB = c.DefaultDiskMB
		}
		if r.MemoryMB == 0 {
			r.MemoryMB = c.DefaultMemoryMB
		}
		if r.CPUs == 0 {
			r.CPUs = c.DefaultCPUs
		}
	}
	return r
}

// snapshotMB is a snapshot's bytes in MiB, rounded up.
func snapshotMB(s hypervisor.Snapshot) int64 { return (max(s.Bytes, 0) + 1<<20 - 1) >> 20 }

// sumsLocked adds up what is held on backend and by tenant, leaving out
// the machine of session skip (a restore replaces it); m.mu is held.
// Holdings of machines that stopped and hold no checkpoints are dropped.
func (m *Manager) sumsLocked(backend, tenant, skip string) (diskMB int64, byTenant Resources) {
	for id, h := range m.held {
		live := h.pending || m.machines[id] != nil
		if !live && len(h.snaps) == 0 {
			delete(m.held, id)
			continue
		}
		var r Resources
		if live && id != skip {
			r = h.res
		}
		r.DiskMB += h.snapMB()
		if h.backend == backend {
			diskMB += r.DiskMB
		}
		if tenant != "" && h.tenant == tenant {
			byTenant = byTenant.plus(r)
		}
	}
	return diskMB, byTenant
}

// reservation is an admitted create or fork under way: it counts as
// pending until commit gives it to the sessions made, or release drops it.
type reservation struct {
	m   *Manager
	key string
	cap *hypervisor.Capacity
}

// admitMachines checks count machines of rt on backend for tenant and reserves
// them; restoreOf names the session a restore boots again (its own machine
// is not counted twice, and nothing is reserved).
func (m *Manager) admitMachines(backend hypervisor.Backend, tenant string, rt Runtime, count int, restoreOf string) (*reservation, error) {
	c, err := capacityOf(backend)
	if err != nil {
		return nil, err
	}
	ask := effective(rt, c)
	if ask.DiskMB < 0 || ask.MemoryMB < 0 || ask.CPUs < 0 {
		// The backend refuses these with its bounds.
		return &reservation{m: m, cap: c}, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	chk := m.checkLocked(backend.Name(), tenant, restoreOf, c)
	chk.ask, chk.count = ask, count
	if err := chk.check(); err != nil {
		return nil, err
	}
	r := &reservation{m: m, cap: c}
	if restoreOf == "" {
		m.heldSeq++
		r.key = fmt.Sprintf("pending-%d", m.heldSeq)
		m.held[r.key] = &holding{tenant: tenant, backend: backend.Name(), res: ask.times(count), pending: true}
	}
	return r, nil
}

// checkLocked starts an admissionCheck with what is held; m.mu is held.
func (m *Manager) checkLocked(backend, tenant, skip string, c *hypervisor.Capacity) admissionCheck {
	if m.held == nil {
		m.held = map[string]*holding{}
	}
	disk, byTenant := m.sumsLocked(backend, tenant, skip)
	var lim auth.Limits
	if tenant != "" && m.admission.TenantLimits != nil {
		lim = m.admission.TenantLimits(tenant)
	}
	return admissionCheck{backend: backend, cap: c, overcommit: m.admission.DiskOvercommit,
		backendDiskMB: disk, tenant: tenant, tenantHeld: byTenant, limits: lim}
}

// grow adds a fork's checkpoint to the reservation, if it fits.
func (r *reservation) grow(backend, tenant string, mb int64) error {
	if r.key == "" || mb <= 0 {
		return nil
	}
	m := r.m
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.held[r.key]
	if h == nil {
		return nil
	}
	// Checked as the checkpoint alone, the pending machines counted.
	chk := m.checkLocked(backend, tenant, "", r.cap)
	chk.snapMB = mb
	if err := chk.check(); err != nil {
		return err
	}
	if h.snaps == nil {
		h.snaps = map[string]int64{}
	}
	h.snaps["fork"] += mb
	return nil
}

// commit gives each session made its machine's share and the first one
// the checkpoints the reservation grew by; the rest is dropped.
func (r *reservation) commit(ids []string, one Resources) {
	m := r.m
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.held[r.key]
	delete(m.held, r.key)
	if h == nil {
		return
	}
	for i, id := range ids {
		nh := &holding{tenant: h.tenant, backend: h.backend, res: one}
		if i == 0 && len(h.snaps) > 0 {
			nh.snaps = map[string]int64{}
			for k, v := range h.snaps {
				nh.snaps[k+":"+id] = v
			}
		}
		m.held[id] = nh
	}
}

// release drops a reservation not committed. Idempotent.
func (r *reservation) release() {
	if r == nil || r.key == "" {
		return
	}
	r.m.mu.Lock()
	delete(r.m.held, r.key)
	r.m.mu.Unlock()
}

// admitCheckpoint counts a checkpoint session s just took, if it fits.
func (m *Manager) admitCheckpoint(s *Session, snap hypervisor.Snapshot) error {
	mb := snapshotMB(snap)
	b := m.backendOf(s.Backend)
	if b == nil {
		return nil
	}
	c, err := capacityOf(b)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	chk := m.checkLocked(s.Backend, s.Tenant, "", c)
	chk.snapMB = mb
	if err := chk.check(); err != nil {
		return err
	}
	h := m.held[s.ID]
	if h == nil {
		h = &holding{tenant: s.Tenant, backend: s.Backend}
		m.held[s.ID] = h
	}
	if h.snaps == nil {
		h.snaps = map[string]int64{}
	}
	h.snaps[snap.ID] = mb
	return nil
}

// releaseHolding forgets what session id held (deleted or expired: its
// machine and checkpoints are gone).
func (m *Manager) releaseHolding(id string) {
	m.mu.Lock()
	delete(m.held, id)
	m.mu.Unlock()
}

// holdRecord rebuilds what a stored session holds (Reattach): its
// machine's resources and its checkpoints.
func (m *Manager) holdRecord(st *stored) {
	s := st.Session
	b := m.backendOf(s.Backend)
	if b == nil {
		return
	}
	res := st.Resources
	if res == nil {
		c, err := capacityOf(b)
		if err != nil {
			m.log.Warn("reattach: measure the backend", "backend", b.Name(), "err", err)
		}
		r := effective(s.Runtime, c)
		res = &r
	}
	h := &holding{tenant: s.Tenant, backend: s.Backend, res: *res}
	for _, snap := range st.Snapshots {
		if h.snaps == nil {
			h.snaps = map[string]int64{}
		}
		h.snaps[snap.ID] = snapshotMB(snap)
	}
	m.mu.Lock()
	if m.held == nil {
		m.held = map[string]*holding{}
	}
	m.held[s.ID] = h
	m.mu.Unlock()
}

// Held is what the live sessions and sandboxes hold as admission counts
// it: by backend (disk MiB) and by tenant.
type Held struct {
	BackendDiskMB map[string]int64     `json:"backend_disk_mb"`
	Tenants       map[string]Resources `json:"tenants"`
}

// HeldNow adds up what is held now.
func (m *Manager) HeldNow() Held {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := Held{BackendDiskMB: map[string]int64{}, Tenants: map[string]Resources{}}
	for id, h := range m.held {
		live := h.pending || m.machines[id] != nil
		var r Resources
		if live {
			r = h.res
		}
		r.DiskMB += h.snapMB()
		if r == (Resources{}) {
			continue
		}
		out.BackendDiskMB[h.backend] += r.DiskMB
		if h.tenant != "" {
			out.Tenants[h.tenant] = out.Tenants[h.tenant].plus(r)
		}
	}
	return out
}

// dropSnapshotHeld forgets one checkpoint of session id.
func (m *Manager) dropSnapshotHeld(id, snap string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if h := m.held[id]; h != nil {
		delete(h.snaps, snap)
	}
}

// runtimeHeld is s's runtime with the sizes its machine was given (as
// admission counts them) in place of the ones asked for.
func (m *Manager) runtimeHeld(s *Session) Runtime {
	rt := s.Runtime
	m.mu.Lock()
	h := m.held[s.ID]
	m.mu.Unlock()
	if h != nil && h.res != (Resources{}) {
		rt.DiskMB, rt.MemoryMB, rt.CPUs = h.res.DiskMB, h.res.MemoryMB, h.res.CPUs
	}
	return rt
}
