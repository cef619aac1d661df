// Command paddock-bench measures Paddock against peers in the same run and
// prints each figure beside the peer's, as a ratio: absolute times on a
// shared machine are noise, ratios much less so. `make bench` runs it (as
// root).
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"time"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
	"paddock.dev/paddock/hostd/daemon/daemontest"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/hypervisor/image"
	"paddock.dev/paddock/hypervisor/procbox"
)

func main() {
	runs := flag.Int("n", 20, "repetitions of each measurement (median reported)")
	guest := flag.String("guest", os.Getenv("PADDOCK_GUEST"), "paddock-guest binary")
	state := flag.String("state-dir", "", "state dir (default: a temporary one)")
	egressOnly := flag.Bool("egress-only", false, "measure only the egress proxy (no root needed)")
	policyOnly := flag.Bool("policy-only", false, "measure only the policy engine's decisions (no root needed)")
	gatewayOnly := flag.Bool("gateway-only", false, "measure only the HTTPS gateway against hostd's socket (no root needed)")
	qemuOnly := flag.Bool("qemu-only", false, "measure only the qemu microVM backend")
	qemuRuns := flag.Int("qemu-runs", 5, "repetitions of each qemu measurement (each boots a VM: seconds under TCG)")
	vmCache := flag.String("vm-cache", filepath.Join(os.TempDir(), "paddock-test-vm"), "the qemu backend's kernel and initramfs cache (the qemu tests' one by default, shared)")
	egressProxies := flag.String("egress-proxies", "", "internal: serve the benchmark's proxies for this upstream address")
	egressCPU := flag.Int("egress-proxies-cpu", 1, "internal: the CPU the proxies run on")
	flag.Parse()
	if *egressProxies != "" {
		proxyChild(*egressProxies, *egressCPU)
		return
	}
	if *egressOnly {
		benchEgress()
		return
	}
	if *policyOnly {
		benchPolicy(0)
		return
	}
	if *gatewayOnly {
		benchGateway()
		return
	}
	if os.Geteuid() != 0 && !*qemuOnly {
		fmt.Fprintln(os.Stderr, "paddock-bench: run as root (sandboxes need namespaces and cgroups)")
		os.Exit(2)
	}
	if *guest == "" {
		fmt.Fprintln(os.Stderr, "paddock-bench: pass --guest or set PADDOCK_GUEST (make bench does)")
		os.Exit(2)
	}
	dir := *state
	if dir == "" {
		d, err := os.MkdirTemp("", "pdkbench")
		check(err)
		defer os.RemoveAll(d)
		dir = d
	}
	ctx := context.Background()
	imgs := image.Store{Dir: filepath.Join(dir, "images")}
	if _, err := imgs.Get("mini"); err != nil {
		_, err := imgs.BuildMini(ctx, "mini", nil)
		check(err)
	}
	if *qemuOnly {
		fmt.Printf("paddock-bench: qemu only, median of %d runs each, peers measured in the same run\n", *qemuRuns)
		fmt.Printf("%-44s %12s %12s %8s  %s\n", "measurement", "paddock", "peer", "ratio", "peer")
		benchQEMU(ctx, dir, *guest, *vmCache, imgs, *qemuRuns)
		return
	}
	b, err := procbox.New(hypervisor.Config{StateDir: dir, GuestBinary: *guest, ImagesDir: imgs.Dir})
	check(err)
	defer b.Close()
	// Warm up: the first create copies the guest binary into its memfd.
	m, err := b.Create(ctx, hypervisor.MachineSpec{Image: "mini"})
	check(err)
	check(m.Stop(ctx))

	fmt.Printf("paddock-bench: median of %d runs each, peers measured in the same run\n\n", *runs)
	fmt.Printf("%-44s %12s %12s %8s  %s\n", "measurement", "paddock", "peer", "ratio", "peer")

	// 1. create → first exec answered, against bwrap and unshare.
	ours := median(*runs, func() time.Duration {
		t0 := time.Now()
		m, err := b.Create(ctx, hypervisor.MachineSpec{Image: "mini"})
		check(err)
		cl := client.New(dialer(m))
		_, err = cl.Exec(ctx, api.ExecRequest{Command: api.Command{Argv: []string{"true"}}})
		check(err)
		d := time.Since(t0)
		check(m.Stop(ctx))
		return d
	})
	if _, err := exec.LookPath("bwrap"); err == nil {
		peer := median(*runs, timeCmd("bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all", "true"))
		row("create + first exec vs bwrap --unshare-all", ours, peer, "bwrap (goal ≤ 3×)")
	}
	peer := median(*runs, timeCmd("unshare", "--mount", "--pid", "--fork", "--uts", "--ipc", "--net", "--cgroup", "true"))
	row("create + first exec vs unshare (6 ns)", ours, peer, "unshare")

	// 2. exec round trip against a bare fork/exec.
	m, err = b.Create(ctx, hypervisor.MachineSpec{Image: "mini"})
	check(err)
	cl := client.New(dialer(m))
	execRT := median(*runs*5, func() time.Duration {
		t0 := time.Now()
		_, err := cl.Exec(ctx, api.ExecRequest{Command: api.Command{Argv: []string{"true"}}})
		check(err)
		return time.Since(t0)
	})
	bare := median(*runs*5, timeCmd("true"))
	row("exec round trip vs fork/exec", execRT, bare, fmt.Sprintf("fork/exec (goal ≤ +2ms; +%.2fms)", float64(execRT-bare)/1e6))

	// 3. checkpoint (O(1) on the btrfs store: compare 1 MiB and 256 MiB of
	// changes against cp -a of the same bytes), restore and fork.
	kind, note, err := b.StoreKind()
	check(err)
	fmt.Printf("(layer store: %s%s)\n", kind, map[bool]string{true: "; " + note, false: ""}[note != ""])
	var snap hypervisor.Snapshot
	for _, mib := range []int{1, 256} {
		_, err = cl.Exec(ctx, api.ExecRequest{Command: api.Command{Shell: fmt.Sprintf("head -c %d /dev/urandom > /workspace/data.bin", mib<<20), TimeoutSeconds: 120}})
		check(err)
		peerDir := filepath.Join(dir, "cp-peer")
		check(os.MkdirAll(peerDir, 0o755))
		check(os.WriteFile(filepath.Join(peerDir, "data.bin"), make([]byte, mib<<20), 0o644))
		n := *runs
		if mib > 1 {
			n = 5
		}
		ckpt := median(n, func() time.Duration {
			t0 := time.Now()
			s, err := m.Checkpoint(ctx, "bench", false)
			check(err)
			d := time.Since(t0)
			if snap.ID != "" {
				check(m.DeleteSnapshot(ctx, snap))
			}
			snap = s
			return d
		})
		cp := median(n, func() time.Duration {
			os.RemoveAll(peerDir + ".copy")
			return timeCmd("cp", "-a", peerDir, peerDir+".copy")()
		})
		os.RemoveAll(peerDir + ".copy")
		row(fmt.Sprintf("checkpoint, %d MiB changed, vs cp -a of it", mib), ckpt, cp, "cp -a")
	}
	rest := median(*runs, func() time.Duration {
		t0 := time.Now()
		check(m.Restore(ctx, snap))
		_, err := cl.Exec(ctx, api.ExecRequest{Command: api.Command{Argv: []string{"true"}}})
		check(err)
		return time.Since(t0)
	})
	row("restore + first exec vs create + first exec", rest, ours, "create")
	fork := median(*runs/2+1, func() time.Duration {
		t0 := time.Now()
		kids, err := m.Fork(ctx, snap, 4)
		check(err)
		d := time.Since(t0) / 4
		for _, k := range kids {
			check(k.Stop(ctx))
		}
		return d
	})
	row("fork into 4, per child vs create", fork, ours, "create (goal ≤ 50ms per child)")
	check(m.Stop(ctx))
	apiExec := benchAPI(ctx, b, dir, *runs, ours, execRT)
	benchEgress()
	benchPolicy(apiExec)
	benchGateway()
	benchQEMU(ctx, dir, *guest, *vmCache, imgs, *qemuRuns)
	// Deferred: Close unmounts the store, then the state dir goes.
}

// benchAPI measures the same operations through the daemon's HTTP API
// (SQLite store, ledger, JSON) beside the backend called directly, so the
// API's own overhead shows as a ratio.
func benchAPI(ctx context.Context, b hypervisor.Backend, dir string, runs int, directCreate, directExec time.Duration) (apiExec time.Duration) {
	// The daemon as paddock serve wires it (hostd/daemon, through the
	// tests' helper), on the backend measured above.
	const tok = "pdk_bench_token_0123456789"
	d, err := daemontest.Start(daemontest.WithBackends(func(string) ([]hypervisor.Backend, error) { return []hypervisor.Backend{b}, nil }),
		daemontest.WithImage("mini", filepath.Join(dir, "images")), daemontest.WithStateDir(filepath.Join(dir, "daemon")), daemontest.WithToken(tok))
	check(err)
	defer d.Close()
	cl := d.Client
	fmt.Println()
	create := median(runs, func() time.Duration {
		t0 := time.Now()
		s, err := cl.CreateSession(ctx, session.CreateRequest{})
		check(err)
		_, err = cl.Exec(ctx, s.ID, session.ExecRequest{Command: "true"})
		check(err)
		d := time.Since(t0)
		check(cl.DeleteSession(ctx, s.ID))
		return d
	})
	row("API: session create + first exec vs backend", create, directCreate, "backend directly")
	s, err := cl.CreateSession(ctx, session.CreateRequest{})
	check(err)
	ex := median(runs*5, func() time.Duration {
		t0 := time.Now()
		_, err := cl.Exec(ctx, s.ID, session.ExecRequest{Command: "true"})
		check(err)
		return time.Since(t0)
	})
	row("API: exec round trip vs guest client", ex, directExec, "guest client directly")
	// A rewind point per exec (hostd/rewind's command hook): the same
	// exec with rewind on, beside the plain one; the difference is the
	// point (goal ≤ 10 ms on btrfs, where the snapshot is O(1)).
	sr, err := cl.CreateSession(ctx, session.CreateRequest{})
	check(err)
	on, ringSize := true, apiv1.MaxRewindPoints
	_, err = cl.RewindConfig(ctx, sr.ID, apiv1.RewindConfigRequest{Enabled: &on, MaxPoints: &ringSize})
	check(err)
	exRW := median(runs*5, func() time.Duration {
		t0 := time.Now()
		_, err := cl.Exec(ctx, sr.ID, session.ExecRequest{Command: "true"})
		check(err)
		return time.Since(t0)
	})
	row("API: exec with a rewind point vs plain exec", exRW, ex, fmt.Sprintf("plain exec (the point: %s, goal ≤ 10ms)", (exRW-ex).Round(10*time.Microsecond)))
	// Undo, then the first exec after it (which takes its own point, as
	// rewind is still on): what going back one command costs before work
	// goes on. Each run first takes the point it undoes to.
	undo := median(runs, func() time.Duration {
		_, err := cl.Exec(ctx, sr.ID, session.ExecRequest{Command: "true"})
		check(err)
		t0 := time.Now()
		_, err = cl.RewindUndo(ctx, sr.ID, apiv1.RewindUndoRequest{Steps: 1})
		check(err)
		_, err = cl.Exec(ctx, sr.ID, session.ExecRequest{Command: "true"})
		check(err)
		return time.Since(t0)
	})
	row("API: undo → first exec vs plain exec", undo, ex, "plain exec (the exec takes a point too)")
	check(cl.DeleteSession(ctx, sr.ID))
	i := 0
	ck := median(runs, func() time.Duration {
		i++
		t0 := time.Now()
		_, err := cl.Checkpoint(ctx, s.ID, -1, session.CheckpointRequest{Tag: fmt.Sprintf("b%d", i)})
		check(err)
		return time.Since(t0)
	})
	m2, err := b.Create(ctx, hypervisor.MachineSpec{Image: "mini"})
	check(err)
	direct := median(runs, func() time.Duration {
		t0 := time.Now()
		snap, err := m2.Checkpoint(ctx, "d", false)
		check(err)
		d := time.Since(t0)
		check(m2.DeleteSnapshot(ctx, snap))
		return d
	})
	check(m2.Stop(ctx))
	row("API: checkpoint vs backend checkpoint", ck, direct, "backend directly")
	benchPromote(ctx, cl, runs)
	benchEvaluate(ctx, cl, runs)
	benchSpeculate(ctx, cl, runs)
	check(cl.DeleteSession(ctx, s.ID))
	return ex
}

func dialer(m hypervisor.Machine) func(context.Context) (net.Conn, error) {
	return func(ctx context.Context) (net.Conn, error) { return m.Dial(ctx) }
}

func row(name string, ours, peer time.Duration, note string) {
	fmt.Printf("%-44s %12s %12s %7.2f×  %s\n", name, ours.Round(10*time.Microsecond), peer.Round(10*time.Microsecond), float64(ours)/float64(peer), note)
}

func timeCmd(name string, args ...string) func() time.Duration {
	return func() time.Duration {
		t0 := time.Now()
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v: %s\n", name, err, out)
			os.Exit(1)
		}
		return time.Since(t0)
	}
}

func median(n int, f func() time.Duration) time.Duration {
	ds := make([]time.Duration, n)
	for i := range ds {
		ds[i] = f()
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[n/2]
}

func check(err error) {
	if err != nil {
		panic(fmt.Sprintf("paddock-bench: %v", err)) // unwinds the deferred cleanup
	}
}
