package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"paddock.dev/paddock/hostd/auth"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/internal/testutil"
)

// TestAttackOneTenantFillsTheDisk runs the attack of issue 16 (broken 2)
// against a real `paddock serve` on a real btrfs layer store, made small
// for the test (--store-size 2GiB, --disk-reserve 512MiB: 1536 MiB can be
// promised to sandboxes). Tenant a asks for more disk than the store
// holds and is refused; it takes its share and fills it to the last
// byte; tenant b can still create a sandbox and write to it; the
// admin's ask that would pass what the store can hold is refused; b's
// own limits from the tenants file (disk, memory, cpus, fork children)
// and checkpoints against the store are refused with codes naming them;
// memory_mb and cpus beyond the host's are refused; and what a deleted
// session held is given back.
func TestAttackOneTenantFillsTheDisk(t *testing.T) {
	testutil.RequiresCommand(t, "mkfs.btrfs")
	bin, state, addr, env := daemonSetup(t)
	tokA, sumA := auth.NewTenantToken()
	tokB, sumB := auth.NewTenantToken()
	tf := auth.TenantsFile{Tenants: []auth.TenantEntry{
		{Name: "a", TokenSHA256: sumA, Limits: &auth.Limits{DiskMB: 8192}}, // more than the store: the store stops it
		{Name: "b", TokenSHA256: sumB, Limits: &auth.Limits{DiskMB: 640, MemoryMB: 1024, CPUs: 1.5}},
	}}
	tenants := filepath.Join(t.TempDir(), "tenants.json")
	if err := auth.WriteTenantsFile(tenants, tf); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, bin, state, addr, env, "--stop-sandboxes", "--tenants", tenants, "--store-size", "2GiB", "--disk-reserve", "512MiB")
	defer stopServe(t, srv)
	admin := "pdk_cli_test_token_0123456789"
	hc := daemonHTTPClient(state)
	hc.Timeout = 3 * time.Minute
	type answer struct {
		Status int
		Code   string `json:"code"`
		Error  string `json:"error"`
		ID     string `json:"id"`
		// exec
		ExitCode int    `json:"exit_code"`
		Stdout   string `json:"stdout"`
		Stderr   string `json:"stderr"`
	}
	call := func(tok, method, path string, body any) answer {
		t.Helper()
		raw, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, "https://"+addr+path, bytes.NewReader(raw))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var a answer
		json.Unmarshal(b, &a)
		a.Status = resp.StatusCode
		return a
	}
	create := func(tok string, rt map[string]any) answer {
		t.Helper()
		return call(tok, "POST", "/v1/agents/sessions", map[string]any{"runtime": rt, "ttl_seconds": 900})
	}
	run := func(tok, id, line string) answer {
		t.Helper()
		a := call(tok, "POST", "/v1/agents/sessions/"+id+"/exec", map[string]any{"command": line, "timeout_seconds": 170})
		if a.Status != http.StatusOK {
			t.Fatalf("exec %q: %d %s", line, a.Status, a.Error)
		}
		return a
	}
	refused := func(what string, a answer, status int, code string, says ...string) {
		t.Helper()
		if a.Status != status || a.Code != code {
			t.Errorf("%s: %d %q %q, want %d with code %s", what, a.Status, a.Code, a.Error, status, code)
			return
		}
		for _, s := range says {
			if !strings.Contains(a.Error, s) {
				t.Errorf("%s: the message does not say %q: %s", what, s, a.Error)
			}
		}
	}

	// 1. More than the store can hold at all.
	refused("a asks for 4 GiB on a 2 GiB store", create(tokA, map[string]any{"disk_mb": 4096}), http.StatusConflict, "disk_exhausted",
		"asks for 4096 MiB", "0 MiB are committed", "2048 MiB", "512 MiB in reserve", "1536 MiB can be committed")

	// 2. a takes its share and fills it: its own limit stops it.
	sa := create(tokA, map[string]any{"disk_mb": 1024})
	if sa.Status != http.StatusCreated {
		t.Fatalf("a's 1 GiB session: %d %s", sa.Status, sa.Error)
	}
	fill := run(tokA, sa.ID, "dd if=/dev/zero of=fill bs=1M count=1600 2>&1; sync; stat -c %s fill")
	lines := strings.Split(strings.TrimSpace(fill.Stdout), "\n")
	size, _ := strconv.ParseInt(lines[len(lines)-1], 10, 64)
	if size < 900<<20 || size > 1024<<20 || !strings.Contains(fill.Stdout, "quota exceeded") {
		t.Fatalf("a filling its disk: wrote %d bytes, want between 900 MiB and its 1024 MiB, stopped by its quota:\n%s", size, fill.Stdout)
	}

	// 3. b still creates and writes, and reads back what it wrote.
	sb := create(tokB, map[string]any{"disk_mb": 256, "memory_mb": 512, "cpus": 1})
	if sb.Status != http.StatusCreated {
		t.Fatalf("b's session after a filled its disk: %d %s", sb.Status, sb.Error)
	}
	w := run(tokB, sb.ID, "a=$(head -c 104857600 /dev/urandom | tee data | sha256sum) && sync && b=$(sha256sum < data) && [ \"$a\" = \"$b\" ] && stat -c %s data")
	if w.ExitCode != 0 || strings.TrimSpace(w.Stdout) != strconv.Itoa(100<<20) {
		t.Fatalf("b writing 100 MiB: exit %d %q %q", w.ExitCode, w.Stdout, w.Stderr)
	}

	// 4. The store is promised up to its reserve: 1024 + 256 held.
	refused("the admin asks for 512 MiB more", create(admin, map[string]any{"disk_mb": 512}), http.StatusConflict, "disk_exhausted",
		"1280 MiB are committed", "256 MiB are left")

	// 5. b's limits from the tenants file.
	refused("b past its disk limit", create(tokB, map[string]any{"disk_mb": 512, "memory_mb": 256, "cpus": 0.25}), http.StatusForbidden, "tenant_disk_limit",
		"tenant b's limit on disk_mb", "640 MiB", "hold 256 MiB", "512 MiB more")
	refused("b past its memory limit", create(tokB, map[string]any{"disk_mb": 128, "memory_mb": 768, "cpus": 0.25}), http.StatusForbidden, "tenant_memory_limit",
		"limit on memory_mb is 1024 MiB", "hold 512 MiB")
	refused("b past its cpus limit", create(tokB, map[string]any{"disk_mb": 128, "memory_mb": 256, "cpus": 1}), http.StatusForbidden, "tenant_cpus_limit",
		"limit on cpus is 1.5")
	refused("b forks two children", call(tokB, "POST", "/v1/agents/sessions/"+sb.ID+"/fork", map[string]any{"count": 2}), http.StatusForbidden, "tenant_disk_limit",
		"these 2 sandboxes ask for 512 MiB (2 × 256) more")

	// 6. Checkpoints hold what they may come to keep (b's 100 MiB each):
	// two fit in what the store has left, the third does not, and is
	// not kept.
	for _, tag := range []string{"c1", "c2"} {
		if a := call(tokB, "POST", "/v1/agents/sessions/"+sb.ID+"/checkpoint", map[string]any{"tag": tag}); a.Status != http.StatusCreated && a.Status != http.StatusOK {
			t.Fatalf("checkpoint %s: %d %s", tag, a.Status, a.Error)
		}
	}
	refused("a third checkpoint", call(tokB, "POST", "/v1/agents/sessions/"+sb.ID+"/checkpoint", map[string]any{"tag": "c3"}), http.StatusConflict, "disk_exhausted",
		"a checkpoint that may come to hold 10")
	var got struct {
		Checkpoints []struct{ Tag string }
	}
	req, _ := http.NewRequest("GET", "https://"+addr+"/v1/agents/sessions/"+sb.ID, nil)
	req.Header.Set("Authorization", "Bearer "+tokB)
	if resp, err := hc.Do(req); err == nil {
		json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
	}
	if len(got.Checkpoints) != 2 {
		t.Errorf("b's checkpoints after the refusal: %+v, want c1 and c2", got.Checkpoints)
	}

	// 7. Beyond the host (16 MiB of disk fits what the store has left:
	// only the host's bounds can refuse these).
	mem, err := hypervisor.HostMemoryMB()
	if err != nil {
		t.Fatal(err)
	}
	refused("memory_mb above the host", create(admin, map[string]any{"disk_mb": 16, "memory_mb": mem + 1}), http.StatusBadRequest, "memory_above_host",
		fmt.Sprintf("memory_mb %d", mem+1), fmt.Sprintf("MemTotal %d MiB", mem))
	refused("cpus above the host", create(admin, map[string]any{"disk_mb": 16, "cpus": hypervisor.HostCPUs() + 1}), http.StatusBadRequest, "cpus_above_host",
		fmt.Sprintf("%d CPUs", hypervisor.HostCPUs()))

	// 8. What a deleted session held is given back.
	if a := call(tokA, "DELETE", "/v1/agents/sessions/"+sa.ID, nil); a.Status != http.StatusNoContent && a.Status != http.StatusOK {
		t.Fatalf("delete a's session: %d %s", a.Status, a.Error)
	}
	if a := create(admin, map[string]any{"disk_mb": 512}); a.Status != http.StatusCreated {
		t.Errorf("the admin's 512 MiB once a's session is gone: %d %s", a.Status, a.Error)
	}
	if t.Failed() {
		t.Logf("daemon log:\n%s", serveLogs(srv))
	}
}
