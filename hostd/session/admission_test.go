package session

import (
	"errors"
	"strings"
	"testing"

	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hypervisor"
)

// TestAdmissionArithmetic holds the sums admission does: the host's bounds
// per machine, a tenant's limits (from the file, else the built-in
// defaults), the backend's disk less its reserve (and the operator's
// overcommit), counted for a fork's children and for checkpoints; and the
// numbers each refusal gives.
func TestAdmissionArithmetic(t *testing.T) {
	// A 2 GiB disk keeping 512 MiB: 1536 MiB can be committed; a host of
	// 4096 MiB and 2 CPUs. Tenant defaults: 768 MiB of disk, 4096 MiB of
	// memory, 8 CPUs.
	capa := &hypervisor.Capacity{DiskBytes: 2 << 30, DiskReserveBytes: 512 << 20, Disk: "the test store", MemoryMB: 4096, CPUs: 2}
	one := Resources{DiskMB: 256, MemoryMB: 512, CPUs: 1}
	cases := []struct {
		name string
		c    admissionCheck
		code string   // "" admitted
		want []string // in the message
	}{
		{"fits", admissionCheck{ask: one, count: 1}, "", nil},
		{"admin fills the disk to the reserve", admissionCheck{ask: Resources{DiskMB: 1536}, count: 1}, "", nil},
		{"admin one MiB past it", admissionCheck{ask: Resources{DiskMB: 1537}, count: 1}, CodeDiskExhausted,
			[]string{"this sandbox asks for 1537 MiB of disk;", "0 MiB are committed", "of 2048 MiB (the test store)", "keeps 512 MiB in reserve", "1536 MiB can be committed", "1536 MiB are left"}},
		{"more than the disk at all", admissionCheck{ask: Resources{DiskMB: 65536}, count: 1}, CodeDiskExhausted, []string{"65536 MiB"}},
		{"others hold the disk", admissionCheck{ask: one, count: 1, backendDiskMB: 1400}, CodeDiskExhausted,
			[]string{"asks for 256 MiB", "1400 MiB are committed", "136 MiB are left"}},
		{"exactly what is left", admissionCheck{ask: Resources{DiskMB: 136}, count: 1, backendDiskMB: 1400}, "", nil},
		{"overcommit 2 doubles the room", admissionCheck{ask: one, count: 1, backendDiskMB: 2800, overcommit: 2}, "", nil},
		{"overcommit 2 past it", admissionCheck{ask: one, count: 1, backendDiskMB: 2900, overcommit: 2}, CodeDiskExhausted,
			[]string{"3072 MiB can be committed", "overcommitted 2 times", "172 MiB are left"}},
		{"overcommit below 1 is none", admissionCheck{ask: one, count: 1, backendDiskMB: 1400, overcommit: 0.5}, CodeDiskExhausted, nil},
		{"fork children count", admissionCheck{ask: one, count: 6, backendDiskMB: 100}, CodeDiskExhausted,
			[]string{"these 6 sandboxes ask for 1536 MiB of disk (6 × 256)"}},
		{"fork children that fit", admissionCheck{ask: one, count: 5, backendDiskMB: 100}, "", nil},
		{"checkpoint alone fits", admissionCheck{snapMB: 100, backendDiskMB: 1400}, "", nil},
		{"checkpoint alone past the disk", admissionCheck{snapMB: 200, backendDiskMB: 1400}, CodeDiskExhausted,
			[]string{"this session asks to keep a checkpoint that may come to hold 200 MiB", "delete checkpoints"}},
		{"memory above the host", admissionCheck{ask: Resources{MemoryMB: 4097}, count: 1}, CodeMemoryAboveHost,
			[]string{"memory_mb 4097", "MemTotal 4096 MiB"}},
		{"memory of the host", admissionCheck{ask: Resources{MemoryMB: 4096}, count: 1}, "", nil},
		{"cpus above the host", admissionCheck{ask: Resources{CPUs: 2.5}, count: 1}, CodeCPUsAboveHost, []string{"cpus 2.5", "2 CPUs"}},
		{"host checked before the tenant", admissionCheck{ask: Resources{CPUs: 3}, count: 1, tenant: "a", tenantHeld: Resources{CPUs: 100}}, CodeCPUsAboveHost, nil},
		{"tenant default disk", admissionCheck{ask: one, count: 1, tenant: "a", tenantHeld: Resources{DiskMB: 513}}, CodeTenantDiskLimit,
			[]string{"tenant a's limit on disk_mb", "is 768 MiB", "hold 513 MiB", "256 MiB more", "tenants file"}},
		{"tenant default disk, just in", admissionCheck{ask: one, count: 1, tenant: "a", tenantHeld: Resources{DiskMB: 512}}, "", nil},
		{"tenant default memory", admissionCheck{ask: one, count: 1, tenant: "a", tenantHeld: Resources{MemoryMB: 3600}}, CodeTenantMemoryLimit,
			[]string{"memory_mb is 4096 MiB", "hold 3600 MiB", "512 MiB more"}},
		{"tenant default memory, just in", admissionCheck{ask: one, count: 1, tenant: "a", tenantHeld: Resources{MemoryMB: 3584}}, "", nil},
		{"tenant default cpus", admissionCheck{ask: one, count: 1, tenant: "a", tenantHeld: Resources{CPUs: 7.5}}, CodeTenantCPUsLimit,
			[]string{"limit on cpus is 8", "hold 7.5", "1 more"}},
		{"tenant default cpus, just in", admissionCheck{ask: one, count: 1, tenant: "a", tenantHeld: Resources{CPUs: 7}}, "", nil},
		{"tenant cpus in tenths add up", admissionCheck{ask: Resources{CPUs: 0.2}, count: 1, tenant: "a", limits: auth.Limits{CPUs: 0.3}, tenantHeld: Resources{CPUs: 0.1}}, "", nil},
		{"tenant file limit", admissionCheck{ask: one, count: 1, tenant: "a", limits: auth.Limits{DiskMB: 300}, tenantHeld: Resources{DiskMB: 100}}, CodeTenantDiskLimit,
			[]string{"is 300 MiB"}},
		{"tenant file limit above the default", admissionCheck{ask: one, count: 1, tenant: "a", limits: auth.Limits{DiskMB: 1400}, tenantHeld: Resources{DiskMB: 1000}}, "", nil},
		{"tenant limit does not lift the disk", admissionCheck{ask: one, count: 1, tenant: "a", limits: auth.Limits{DiskMB: 99999}, tenantHeld: Resources{DiskMB: 1400}, backendDiskMB: 1400}, CodeDiskExhausted, nil},
		{"tenant fork children", admissionCheck{ask: one, count: 3, tenant: "a", limits: auth.Limits{MemoryMB: 1500}}, CodeTenantMemoryLimit,
			[]string{"these 3 sandboxes ask for 1536 MiB (3 × 512) more"}},
		{"tenant checkpoint counts on disk only", admissionCheck{snapMB: 300, tenant: "a", limits: auth.Limits{DiskMB: 1000, MemoryMB: 1, CPUs: 0.01}, tenantHeld: Resources{DiskMB: 800, MemoryMB: 9999, CPUs: 99}}, CodeTenantDiskLimit,
			[]string{"the checkpoint asks for 300 MiB more"}},
		{"the admin has no tenant limits", admissionCheck{ask: one, count: 1, limits: auth.Limits{DiskMB: 1}}, "", nil},
		{"no capacity: only the file's limits", admissionCheck{ask: Resources{DiskMB: 1 << 20, MemoryMB: 1 << 20, CPUs: 64}, count: 1, tenant: "a", limits: auth.Limits{CPUs: 100}}, "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c
			c.backend = "procbox"
			if !strings.HasPrefix(tc.name, "no capacity") {
				c.cap = capa
			}
			err := c.check()
			if tc.code == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ce *CodedError
			if !errors.As(err, &ce) || ce.Code != tc.code {
				t.Fatalf("got %v, want code %s", err, tc.code)
			}
			sentinel := map[string]error{CodeDiskExhausted: ErrConflict, CodeMemoryAboveHost: ErrBadRequest, CodeCPUsAboveHost: ErrBadRequest}[tc.code]
			if sentinel == nil {
				sentinel = ErrForbidden
			}
			if !errors.Is(err, sentinel) {
				t.Errorf("%v does not wrap %v", err, sentinel)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message lacks %q:\n%s", w, err)
				}
			}
		})
	}
}

// TestAdmissionHoldings: what admission counts follows machines and
// checkpoints (a pending create counts, a released one does not, a
// committed one counts while its machine runs, its checkpoints until the
// session is released) without a backend behind it.
func TestAdmissionHoldings(t *testing.T) {
	m := New(Config{})
	m.held = map[string]*holding{}
	r := &reservation{m: m}
	m.mu.Lock()
	r.key = "pending-1"
	m.held[r.key] = &holding{tenant: "a", backend: "procbox", res: Resources{DiskMB: 300, MemoryMB: 100, CPUs: 1}.times(2), pending: true}
	m.mu.Unlock()
	if h := m.HeldNow(); h.BackendDiskMB["procbox"] != 600 || h.Tenants["a"].CPUs != 2 {
		t.Fatalf("pending fork not counted: %+v", h)
	}
	if err := r.grow("procbox", "a", 50); err != nil {
		t.Fatal(err)
	}
	r.commit([]string{"ses-1", "ses-2"}, Resources{DiskMB: 300, MemoryMB: 100, CPUs: 1})
	r.release() // after commit: nothing
	// No machines run: the children hold only the fork's checkpoint.
	if h := m.HeldNow(); h.BackendDiskMB["procbox"] != 50 || h.Tenants["a"].MemoryMB != 0 {
		t.Fatalf("after commit without machines: %+v", h)
	}
	// Their machines run.
	m.mu.Lock()
	m.machines["ses-1"] = fakeMachine{}
	m.machines["ses-2"] = fakeMachine{}
	m.mu.Unlock()
	if h := m.HeldNow(); h.BackendDiskMB["procbox"] != 650 || h.Tenants["a"] != (Resources{DiskMB: 650, MemoryMB: 200, CPUs: 2}) {
		t.Fatalf("two running children and the fork's checkpoint: %+v", h)
	}
	m.mu.Lock()
	disk, byTenant := m.sumsLocked("procbox", "a", "ses-2")
	m.mu.Unlock()
	if disk != 350 || byTenant.DiskMB != 350 {
		t.Errorf("a restore of ses-2 counts it once: %d %+v", disk, byTenant)
	}
	m.releaseHolding("ses-1")
	if h := m.HeldNow(); h.BackendDiskMB["procbox"] != 300 {
		t.Errorf("released ses-1 (and the fork checkpoint it held): %+v", h)
	}
	m.mu.Lock()
	delete(m.machines, "ses-2")
	m.mu.Unlock()
	if h := m.HeldNow(); h.BackendDiskMB["procbox"] != 0 || len(h.Tenants) != 0 {
		t.Errorf("a stopped machine still counts: %+v", h)
	}
}

type fakeMachine struct{ hypervisor.Machine }
