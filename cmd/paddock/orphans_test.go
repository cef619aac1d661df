package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/hypervisor/qemu"
)

// TestCLIOrphans stops a daemon with a procbox sandbox and a qemu VM
// running (the VM when qemu can run here), as a person would with Ctrl-C:
// its exit message names them, with the ways to stop them. The state dir
// is then removed, and `paddock sandbox orphans` lists both as orphans,
// stops them (processes, cgroup and QEMU gone) and never touches the
// sandbox of a second daemon that runs meanwhile, even when named.
func TestCLIOrphans(t *testing.T) {
	bin, stateA, addrA, envA := daemonSetupFresh(t)
	stateB, addrB, envB := daemonOn(t, bin)
	runQEMU := true
	if _, err := qemu.Probe(t.Context(), qemu.ProbeOptions{}); err != nil {
		t.Logf("qemu cannot run here, the VM part is left out: %v", err)
		runQEMU = false
	}
	// The qemu tests' kernel cache, so the kernel is not fetched again.
	envA = append(envA, "PADDOCK_VM_CACHE="+filepath.Join(os.TempDir(), "paddock-test-vm"))
	create := func(env []string, args ...string) string {
		t.Helper()
		out, se, code := runCLI(t, bin, env, nil, append([]string{"--json", "session", "run"}, args...)...)
		var s struct{ ID string }
		if err := json.Unmarshal([]byte(out), &s); err != nil || code != 0 || s.ID == "" {
			t.Fatalf("session run %v: code %d %q %q", args, code, out, se)
		}
		return s.ID
	}
	orphans := func(args ...string) ([]orphanRow, string, int) {
		t.Helper()
		out, se, code := runCLI(t, bin, os.Environ(), nil, append([]string{"--json", "sandbox", "orphans"}, args...)...)
		var rows []orphanRow
		if code == 0 {
			if err := json.Unmarshal([]byte(out), &rows); err != nil {
				t.Fatalf("orphans %v: %v %q", args, err, out)
			}
		}
		return rows, se, code
	}
	find := func(rows []orphanRow, id string) *orphanRow {
		i := slices.IndexFunc(rows, func(r orphanRow) bool { return r.ID == id })
		if i < 0 {
			return nil
		}
		return &rows[i]
	}

	// B: a live daemon whose sandbox must be left alone throughout.
	srvB := startServe(t, bin, stateB, addrB, envB, "--stop-sandboxes")
	defer stopServe(t, srvB)
	live := create(envB)

	// A: stopped with SIGTERM, its sandboxes left running.
	srvA := startServe(t, bin, stateA, addrA, envA)
	box := create(envA)
	left := []string{box}
	var vm string
	if runQEMU {
		vm = create(envA, "--backend", "qemu")
		left = append(left, vm)
	}
	var pids []int
	rows, _, code := orphans("--all")
	for _, id := range left {
		r := find(rows, id)
		if code != 0 || r == nil || r.Orphan || r.Status != "owned by a running daemon" || r.StateDir != stateA || len(r.PIDs) == 0 {
			t.Fatalf("orphans --all while its daemon runs, %s: %+v (code %d)", id, r, code)
		}
		pids = append(pids, r.PIDs...)
	}
	t.Cleanup(func() {
		runCLI(t, bin, os.Environ(), nil, append([]string{"sandbox", "orphans", "--stop"}, left...)...)
	})
	stopServe(t, srvA)
	logs := serveLogs(srvA)
	want := []string{"paddock: left " + strconv.Itoa(len(left)) + " sandbox(es) running", box + " (procbox)",
		"--stop-sandboxes", "paddock sandbox orphans --stop",
		`msg="left sandboxes running for the next start on this state dir to adopt" count=` + strconv.Itoa(len(left))}
	if vm != "" {
		want = append(want, vm+" (qemu)")
	}
	for _, w := range want {
		if !strings.Contains(logs, w) {
			t.Errorf("the exit message lacks %q:\n%s", w, tail(logs, 1500))
		}
	}
	rows, _, _ = orphans("--all")
	for _, id := range left {
		if r := find(rows, id); r == nil || r.Orphan || r.Status != "left for the next daemon on its state dir to adopt" {
			t.Errorf("after the daemon stopped, %s: %+v", id, r)
		}
	}

	// The person removes the state dir (its layer store unmounted first).
	unmountUnder(t, stateA)
	if err := os.RemoveAll(stateA); err != nil {
		t.Fatal(err)
	}
	rows, _, code = orphans()
	if code != 0 || len(rows) < len(left) {
		t.Fatalf("orphans after the state dir went: code %d, %+v", code, rows)
	}
	for _, id := range left {
		if r := find(rows, id); r == nil || !r.Orphan || r.Status != "orphan: its state dir is gone" {
			t.Errorf("orphan %s: %+v", id, r)
		}
	}
	if r := find(rows, live); r != nil {
		t.Errorf("a live daemon's sandbox is listed as an orphan: %+v", r)
	}
	rows, _, _ = orphans("--all")
	if r := find(rows, live); r == nil || r.Orphan || r.Status != "owned by a running daemon" || r.StateDir != stateB {
		t.Errorf("the live daemon's sandbox in --all: %+v", r)
	}
	// The table for people says the same.
	if out, _, code := runCLI(t, bin, os.Environ(), nil, "sandbox", "orphans"); code != 0 || !strings.HasPrefix(out, "BACKEND") ||
		!strings.Contains(out, box) || !strings.Contains(out, "its state dir is gone") || strings.Contains(out, live) {
		t.Errorf("orphans table: code %d\n%s", code, out)
	}

	// Naming the live daemon's sandbox is refused (exit 4), and it runs on.
	if _, se, code := orphans("--stop", live); code != exitConflict || !strings.Contains(se, "not an orphan") {
		t.Errorf("orphans --stop on a live daemon's sandbox: code %d, %q", code, se)
	}
	if _, se, code := orphans("--stop", box, live); code != exitConflict || !cgroupOf(box) {
		t.Errorf("orphans --stop with a live daemon's sandbox among the ids: code %d, %q; nothing may be stopped", code, se)
	}
	rows, se, code := orphans(append([]string{"--stop"}, left...)...)
	if code != 0 || len(rows) != len(left) {
		t.Fatalf("orphans --stop: code %d %q %+v", code, se, rows)
	}
	for _, r := range rows {
		if !r.Stopped || r.Error != "" {
			t.Errorf("stop %s: %+v", r.ID, r)
		}
	}
	for _, pid := range pids {
		if _, err := hypervisor.ProcStartTime(pid); err == nil {
			t.Errorf("process %d of an orphan still runs", pid)
		}
	}
	if cgroupOf(box) {
		t.Errorf("the orphan's cgroup %s is still there", box)
	}
	if _, _, code := orphans(box); code != exitNotFound {
		t.Errorf("a stopped orphan named again: code %d, want %d", code, exitNotFound)
	}
	if out, _, code := runCLI(t, bin, envB, nil, "session", "exec", live, "--", "echo alive"); code != 0 || out != "alive\n" {
		t.Errorf("the live daemon's sandbox after the orphans were stopped: code %d %q", code, out)
	}
}

// unmountUnder unmounts everything mounted under dir, deepest first.
func unmountUnder(t *testing.T, dir string) {
	t.Helper()
	raw, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var points []string
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			points = append(points, f[4])
		}
	}
	slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
	for _, p := range points {
		if err := unix.Unmount(p, 0); err != nil {
			if err := unix.Unmount(p, unix.MNT_DETACH); err != nil {
				t.Fatalf("unmount %s: %v", p, err)
			}
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestClassifyHostSandbox: what makes a sandbox found on the host an
// orphan (nothing will ever stop it) and what keeps it from being one.
func TestClassifyHostSandbox(t *testing.T) {
	now := time.Now()
	live, idle := t.TempDir(), t.TempDir()
	lock, err := os.Create(filepath.Join(live, "serve.lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(idle, "serve.lock"), nil, 0o600) // nobody holds it
	gone := filepath.Join(t.TempDir(), "removed")
	for _, c := range []struct {
		name   string
		h      hypervisor.HostSandbox
		orphan bool
		status string
	}{
		{"state dir gone", hypervisor.HostSandbox{StateDir: gone, PIDs: []int{7}, Record: true}, true, "state dir is gone"},
		{"record gone", hypervisor.HostSandbox{StateDir: idle, PIDs: []int{7}}, true, "record in the state dir is gone"},
		{"old empty cgroup", hypervisor.HostSandbox{Started: now.Add(-2 * emptyCgroupGrace)}, true, "empty cgroup"},
		{"new empty cgroup", hypervisor.HostSandbox{Started: now.Add(-time.Second)}, false, "just made"},
		{"no state dir named", hypervisor.HostSandbox{PIDs: []int{7}}, false, "unknown"},
		{"live daemon", hypervisor.HostSandbox{StateDir: live, PIDs: []int{7}, Record: true, Adoptable: true}, false, "running daemon"},
		{"live process", hypervisor.HostSandbox{StateDir: idle, PIDs: []int{7}, Record: true, Owned: true}, false, "running process"},
		{"left to adopt", hypervisor.HostSandbox{StateDir: idle, PIDs: []int{7}, Record: true, Adoptable: true}, false, "to adopt"},
		{"left by a crash", hypervisor.HostSandbox{StateDir: idle, PIDs: []int{7}, Record: true}, false, "removes it"},
	} {
		status, orphan := classifyHostSandbox(c.h, now)
		if orphan != c.orphan || !strings.Contains(status, c.status) {
			t.Errorf("%s: %q orphan=%v, want %q orphan=%v", c.name, status, orphan, c.status, c.orphan)
		}
	}
}
