//go:build linux

package confine

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/internal/testutil"
)

// The test binary doubles as paddock-guest: with envMain set it runs
// Main on its arguments, and envABI stands in for the kernel's Landlock
// ABI so the refusal paths can be reached on a kernel that has it all.
const (
	envMain = "PADDOCK_CONFINE_TEST_MAIN"
	envABI  = "PADDOCK_CONFINE_TEST_ABI"
	envCaps = "PADDOCK_CONFINE_TEST_KEEP_CAPS"
)

var probeDir string // where the static probe is built, once

func TestMain(m *testing.M) {
	if os.Getenv(envMain) == "1" {
		if v := os.Getenv(envABI); v != "" {
			testLandlockABI, _ = strconv.Atoi(v)
		}
		testKeepCaps = os.Getenv(envCaps) == "1"
		os.Exit(Main(os.Args[1:]))
	}
	dir, err := os.MkdirTemp("", "confine-probe-")
	if err != nil {
		panic(err)
	}
	probeDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var (
	probeOnce sync.Once
	probeErr  error
)

// probe returns the path of testdata/probe.c built with gcc -static.
func probe(t *testing.T) string {
	t.Helper()
	testutil.RequiresCommand(t, "gcc")
	out := filepath.Join(probeDir, "probe")
	probeOnce.Do(func() {
		b, err := exec.Command("gcc", "-static", "-O1", "-o", out, "testdata/probe.c").CombinedOutput()
		if err != nil {
			probeErr = errors.New(err.Error() + ": " + string(b))
		}
	})
	if probeErr != nil {
		t.Fatalf("build probe (gcc -static needs libc6-dev): %v", probeErr)
	}
	return out
}

func requiresLandlock(t *testing.T) {
	t.Helper()
	if landlockABI() < 5 {
		t.Skipf("needs Landlock ABI 5 or later, the kernel has %d", landlockABI())
	}
}

// result is how one `confine ... -- argv` run ended.
type result struct {
	stdout, stderr string
	code           int            // -1 when killed
	signal         syscall.Signal // when killed
	report         *api.ConfineReport
}

type runOpts struct {
	abi int  // forced Landlock ABI; -1 for the kernel's
	fds bool // pass the policy on fd 3 and read the report from fd 4
	// keepCaps leaves root's bounding set alone, so only the seccomp
	// filter can refuse what root may otherwise do.
	keepCaps bool
}

var kernelABI = runOpts{abi: -1}

// confine runs the test binary as `paddock-guest confine` with policy p.
func confine(t *testing.T, p api.Confinement, o runOpts, argv ...string) result {
	t.Helper()
	policy, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	var reportR *os.File
	cmd := exec.Command(os.Args[0])
	if o.fds {
		policyR, policyW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		var reportW *os.File
		if reportR, reportW, err = os.Pipe(); err != nil {
			t.Fatal(err)
		}
		go func() { policyW.Write(policy); policyW.Close() }()
		cmd.ExtraFiles = []*os.File{policyR, reportW}
		defer policyR.Close()
		defer reportW.Close()
		args = []string{"--policy-fd", "3", "--report-fd", "4"}
	} else {
		args = []string{"--policy-json", string(policy)}
	}
	cmd.Args = append(append(append(cmd.Args, args...), "--"), argv...)
	cmd.Env = append(os.Environ(), envMain+"=1")
	if o.abi >= 0 {
		cmd.Env = append(cmd.Env, envABI+"="+strconv.Itoa(o.abi))
	}
	if o.keepCaps {
		cmd.Env = append(cmd.Env, envCaps+"=1")
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var report []byte
	if reportR != nil {
		cmd.ExtraFiles[1].Close() // our copy of the write end
		report, _ = io.ReadAll(reportR)
		reportR.Close()
	}
	err = cmd.Wait()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		ws := ee.Sys().(syscall.WaitStatus)
		r.code = ws.ExitStatus()
		if ws.Signaled() {
			r.signal = ws.Signal()
		}
	default:
		t.Fatal(err)
	}
	if len(report) > 0 {
		r.report = new(api.ConfineReport)
		if err := json.Unmarshal(report, r.report); err != nil {
			t.Fatalf("report %q: %v", report, err)
		}
	}
	return r
}

func (r result) String() string {
	return "exit " + strconv.Itoa(r.code) + " signal " + strconv.Itoa(int(r.signal)) +
		"\nstdout: " + r.stdout + "\nstderr: " + r.stderr
}

// layout is a set of directories for filesystem policies.
type layout struct {
	probe, ro, roFile, rw, outside, outsideFile string
}

func newLayout(t *testing.T) layout {
	l := layout{probe: probe(t), ro: t.TempDir(), rw: t.TempDir(), outside: t.TempDir()}
	l.roFile = filepath.Join(l.ro, "data")
	l.outsideFile = filepath.Join(l.outside, "data")
	for _, f := range []string{l.roFile, l.outsideFile} {
		if err := os.WriteFile(f, []byte("content"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// policy reads the probe's directory and ro, and writes rw ("/**" to
// check that the suffix means the directory).
func (l layout) policy() api.Confinement {
	return api.Confinement{
		ReadOnly:  []string{filepath.Dir(l.probe), l.ro},
		ReadWrite: []string{l.rw + "/**"},
	}
}

func TestFilesystem(t *testing.T) {
	requiresLandlock(t)
	l := newLayout(t)
	off := false
	tests := []struct {
		name   string
		policy api.Confinement
		argv   []string
		want   string
	}{
		{"write inside read_write", l.policy(), []string{"write", filepath.Join(l.rw, "f")}, "ok 1"},
		{"write outside", l.policy(), []string{"write", filepath.Join(l.outside, "f")}, "err=EACCES"},
		{"read outside", l.policy(), []string{"read", l.outsideFile}, "err=EACCES"},
		{"read read_only", l.policy(), []string{"read", l.roFile}, "ok 7"},
		{"write read_only", l.policy(), []string{"write", l.roFile}, "err=EACCES"},
		{"truncate read_only", l.policy(), []string{"truncate", l.roFile}, "err=EACCES"},
		{"truncate read_write", l.policy(), []string{"truncate", filepath.Join(l.rw, "f")}, "ok 0"},
		{"write /dev/null", l.policy(), []string{"write", "/dev/null"}, "ok 1"},
		{"write /usr", l.policy(), []string{"write", "/usr/paddock-confine-test"}, "err=EACCES"},
		// Control: without paths there is no ruleset and the same write works.
		{"no paths, no ruleset", api.Confinement{Seccomp: &off, Enforcement: Strict}, []string{"write", filepath.Join(l.outside, "f")}, "ok 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := confine(t, tt.policy, kernelABI, append([]string{l.probe}, tt.argv...)...)
			if got := strings.TrimSpace(r.stdout); got != tt.want || r.code != 0 {
				t.Errorf("probe %v = %q, want %q\n%v", tt.argv, got, tt.want, r)
			}
		})
	}
}

func TestSeccomp(t *testing.T) {
	p := probe(t)
	// A process to aim ptrace at, in case the filter lets it through.
	target := exec.Command("sleep", "30")
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { target.Process.Kill(); target.Wait() }()
	pid := strconv.Itoa(target.Process.Pid)

	// Should the filter ever let mount through, do not leave it mounted.
	mnt := t.TempDir()
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })

	on, off := true, false
	tests := []struct {
		name    string
		seccomp *bool
		argv    []string
		want    string         // stdout, when it returns
		notWant string         // a control without the filter must not see this
		killed  syscall.Signal // when the filter kills the process
	}{
		{"io_uring_setup", &on, []string{"io_uring_setup"}, "err=EPERM", "", 0},
		{"ptrace attach", &on, []string{"ptrace", pid}, "err=EPERM", "", 0},
		{"int 0x80 getpid", &on, []string{"int80"}, "", "", syscall.SIGSYS},
		{"int 0x80 control", &off, []string{"int80"}, "", "err=", 0},
		{"x32 getpid", &on, []string{"x32"}, "", "", syscall.SIGSYS},
		{"x32 control", &off, []string{"x32"}, "err=ENOSYS", "", 0},
		{"unshare user", &on, []string{"unshare_user"}, "err=EPERM", "", 0},
		{"clone newns", &on, []string{"clone_newns"}, "err=EPERM", "", 0},
		{"clone plain", &on, []string{"clone_plain"}, "ok 0", "", 0},
		{"clone3", &on, []string{"clone3"}, "err=ENOSYS", "", 0},
		{"mount", &on, []string{"mount", mnt}, "err=EPERM", "", 0},
		{"bpf", &on, []string{"bpf"}, "err=EPERM", "", 0},
		{"bpf control", &off, []string{"bpf"}, "", "err=EPERM", 0},
		{"personality ADDR_NO_RANDOMIZE", &on, []string{"personality", "0x0040000"}, "err=EPERM", "", 0},
		{"personality query", &on, []string{"personality", "0xffffffff"}, "ok 0", "", 0},
		{"personality linux", &on, []string{"personality", "0"}, "ok 0", "", 0},
		// Socket families outside unix, inet, inet6 and netlink fail as
		// if the kernel lacked them; netlink beyond routing and socket
		// diagnostics too. Upper bits cannot smuggle a refused family
		// past the filter (the kernel reads only the low 32).
		{"socket vsock", &on, []string{"socket", "40"}, "err=EAFNOSUPPORT", "", 0},
		{"socket vsock control", &off, []string{"socket", "40"}, "", "err=", 0},
		{"socket vsock upper bits", &on, []string{"socket", "0x100000028"}, "err=EAFNOSUPPORT", "", 0},
		{"socket vsock upper bits control", &off, []string{"socket", "0x100000028"}, "", "err=", 0},
		{"socketpair vsock", &on, []string{"socketpair", "40"}, "err=EAFNOSUPPORT", "", 0},
		{"socket packet", &on, []string{"socket", "17", "2"}, "err=EAFNOSUPPORT", "", 0},
		{"socket packet control", &off, []string{"socket", "17", "2"}, "", "err=", 0},
		{"socket family above any", &on, []string{"socket", "200"}, "err=EAFNOSUPPORT", "", 0},
		{"socket unix", &on, []string{"socket", "1"}, "ok 0", "", 0},
		{"socketpair unix", &on, []string{"socketpair", "1"}, "ok 0", "", 0},
		{"socket inet", &on, []string{"socket", "2"}, "ok 0", "", 0},
		{"socket inet6 datagram", &on, []string{"socket", "10", "2"}, "ok 0", "", 0},
		{"netlink route", &on, []string{"socket", "16", "3", "0"}, "ok 0", "", 0},
		{"netlink sock_diag", &on, []string{"socket", "16", "3", "4"}, "ok 0", "", 0},
		{"netlink generic", &on, []string{"socket", "16", "3", "16"}, "err=EPROTONOSUPPORT", "", 0},
		{"netlink generic control", &off, []string{"socket", "16", "3", "16"}, "", "err=", 0},
		{"netlink audit", &on, []string{"socket", "16", "3", "9"}, "err=EPROTONOSUPPORT", "", 0},
		{"netlink route upper bits", &on, []string{"socket", "16", "3", "0x100000010"}, "err=EPROTONOSUPPORT", "", 0},
		// IPv4 and IPv6 protocols: a protocol the kernel has not loaded
		// is a module load into the host's kernel, so only TCP, UDP and
		// ICMP (ping sockets) may be named. ICMP may still be refused by
		// ping_group_range (EACCES), never by the filter.
		{"inet sctp", &on, []string{"socket", "2", "1", "132"}, "err=EPROTONOSUPPORT", "", 0},
		{"inet6 sctp seqpacket", &on, []string{"socket", "10", "5", "132"}, "err=EPROTONOSUPPORT", "", 0},
		{"inet dccp", &on, []string{"socket", "2", "6", "33"}, "err=EPROTONOSUPPORT", "", 0},
		{"inet l2tp", &on, []string{"socket", "2", "2", "115"}, "err=EPROTONOSUPPORT", "", 0},
		{"inet6 smc", &on, []string{"socket", "10", "1", "256"}, "err=EPROTONOSUPPORT", "", 0},
		{"inet smc", &on, []string{"socket", "2", "1", "256"}, "err=EPROTONOSUPPORT", "", 0},
		{"inet mptcp", &on, []string{"socket", "2", "1", "262"}, "err=EPROTONOSUPPORT", "", 0},
		{"inet raw protocol", &on, []string{"socket", "2", "3", "255"}, "err=EPROTONOSUPPORT", "", 0},
		{"socketpair inet sctp", &on, []string{"socketpair", "2", "1", "132"}, "err=EPROTONOSUPPORT", "", 0},
		{"inet tcp upper bits", &on, []string{"socket", "2", "1", "0x100000006"}, "err=EPROTONOSUPPORT", "", 0},
		{"inet tcp", &on, []string{"socket", "2", "1", "6"}, "ok 0", "", 0},
		{"inet6 tcp", &on, []string{"socket", "10", "1", "6"}, "ok 0", "", 0},
		{"inet udp", &on, []string{"socket", "2", "2", "17"}, "ok 0", "", 0},
		{"inet6 udp", &on, []string{"socket", "10", "2", "17"}, "ok 0", "", 0},
		{"inet icmp", &on, []string{"socket", "2", "2", "1"}, "", "err=EPROTONOSUPPORT", 0},
		{"inet6 icmpv6", &on, []string{"socket", "10", "2", "58"}, "", "err=EPROTONOSUPPORT", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if (tt.name == "bpf control" || tt.name == "socket packet control") && os.Geteuid() != 0 {
				t.Skip("needs root: the call is refused without the filter too")
			}
			if strings.HasPrefix(tt.name, "int 0x80") && !has32BitEntry(p) {
				t.Skip(no32BitEntry)
			}
			if strings.HasPrefix(tt.name, "socket vsock") && strings.HasSuffix(tt.name, "control") && !hostHasVsock() {
				t.Skip("this kernel has no vsock: socket(AF_VSOCK) fails without the filter too")
			}
			// Seccomp alone: no ruleset, so only the filter can refuse.
			policy := api.Confinement{Seccomp: tt.seccomp, Enforcement: Strict}
			r := confine(t, policy, runOpts{abi: -1, keepCaps: true}, append([]string{p}, tt.argv...)...)
			got := strings.TrimSpace(r.stdout)
			switch {
			case tt.killed != 0:
				if r.signal != tt.killed {
					t.Errorf("probe %v: want killed by %v\n%v", tt.argv, tt.killed, r)
				}
			case tt.notWant != "":
				if r.code != 0 || got == "" || strings.HasPrefix(got, tt.notWant) {
					t.Errorf("control probe %v = %q, must not start with %q\n%v", tt.argv, got, tt.notWant, r)
				}
			default:
				if got != tt.want || r.code != 0 {
					t.Errorf("probe %v = %q, want %q\n%v", tt.argv, got, tt.want, r)
				}
			}
		})
	}
}

// no32BitEntry is the skip reason where the machine runs no 32-bit system
// calls at all (some hypervisors' guests: int 0x80 is SIGSEGV with no
// filter), so the filter's refusal of them cannot be told apart.
const no32BitEntry = "this machine has no working 32-bit system call entry (int 0x80 faults without the filter too)"

// has32BitEntry says whether int 0x80 getpid works without a filter.
func has32BitEntry(probe string) bool {
	out, err := exec.Command(probe, "int80").Output()
	return err == nil && strings.HasPrefix(strings.TrimSpace(string(out)), "ok ")
}

func TestExecAllowlist(t *testing.T) {
	requiresLandlock(t)
	if elfInterpreter("/usr/bin/id") == "" {
		t.Skip("needs a dynamically linked /usr/bin/id to show libraries still load")
	}
	l := newLayout(t)
	copied := filepath.Join(l.rw, "id-copy")
	data, err := os.ReadFile("/usr/bin/id")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(copied, data, 0o755); err != nil {
		t.Fatal(err)
	}
	listed := l.policy()
	listed.Exec = []string{"/usr/bin/id"}
	execOnly := api.Confinement{Exec: []string{"/usr/bin/id"}}

	tests := []struct {
		name       string
		policy     api.Confinement
		argv       []string
		wantCode   int
		wantStdout string // substring
		wantStderr string // substring
	}{
		{"listed dynamic binary through sh", listed, []string{"sh", "-c", "id"}, 0, "uid=", ""},
		{"true is always allowed", listed, []string{"sh", "-c", "true && echo yes"}, 0, "yes", ""},
		{"unlisted binary through sh", listed, []string{"sh", "-c", "/usr/bin/env"}, 126, "", "Permission denied"},
		{"copied binary in a writable dir", listed, []string{"sh", "-c", copied}, 126, "", "Permission denied"},
		{"unlisted binary as the command", listed, []string{"/usr/bin/env"}, 126, "", "allow-list"},
		{"control: copied binary runs without a list", l.policy(), []string{"sh", "-c", copied}, 0, "uid=", ""},
		{"exec list alone leaves writes alone", execOnly, []string{"sh", "-c", "id && echo x > " + filepath.Join(l.outside, "f") + " && echo wrote"}, 0, "wrote", ""},
		{"exec list alone still refuses", execOnly, []string{"sh", "-c", "/usr/bin/env"}, 126, "", "Permission denied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := confine(t, tt.policy, kernelABI, tt.argv...)
			if r.code != tt.wantCode || !strings.Contains(r.stdout, tt.wantStdout) || !strings.Contains(r.stderr, tt.wantStderr) {
				t.Errorf("%v: want exit %d, stdout ~%q, stderr ~%q\n%v", tt.argv, tt.wantCode, tt.wantStdout, tt.wantStderr, r)
			}
		})
	}
	t.Run("refused command writes no report", func(t *testing.T) {
		r := confine(t, listed, runOpts{abi: -1, fds: true}, "/usr/bin/env")
		if r.code != ExitRefused || r.report != nil || !strings.Contains(r.stderr, "allow-list") {
			t.Errorf("want exit 126, no report, the reason on stderr\n%v (report %+v)", r, r.report)
		}
	})
	t.Run("probe execve errno", func(t *testing.T) {
		p := listed
		p.Exec = append(p.Exec, l.probe)
		r := confine(t, p, kernelABI, l.probe, "exec", copied)
		if got := strings.TrimSpace(r.stdout); got != "err=EACCES" {
			t.Errorf("execve of a copied binary = %q, want err=EACCES\n%v", got, r)
		}
	})
}

func TestEnforcementModes(t *testing.T) {
	requiresLandlock(t)
	l := newLayout(t)
	marker := filepath.Join(l.rw, "ran")
	strict, lenient := l.policy(), l.policy()
	lenient.Enforcement = BestEffort
	listed := lenient
	listed.Exec = []string{l.probe}

	tests := []struct {
		name        string
		policy      api.Confinement
		abi         int
		refused     string   // stderr substring when refused
		wantMissing []string // prefixes of report.Missing when run
		landlock    bool
	}{
		{"strict without landlock", strict, 0, "cannot be enforced", nil, false},
		{"strict without truncate", strict, 2, "truncate", nil, false},
		{"strict without ioctl_dev", strict, 4, "ioctl_dev", nil, false},
		{"exec list without landlock, even best-effort", listed, 0, "allow-list needs Landlock", nil, false},
		{"best-effort without landlock", lenient, 0, "", []string{"landlock"}, false},
		{"best-effort on ABI 2", lenient, 2, "", []string{"truncate", "ioctl_dev"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os.Remove(marker)
			r := confine(t, tt.policy, runOpts{abi: tt.abi, fds: true}, l.probe, "write", marker)
			_, statErr := os.Stat(marker)
			if tt.refused != "" {
				if r.code != ExitRefused || !strings.Contains(r.stderr, tt.refused) || r.stdout != "" || statErr == nil || r.report != nil {
					t.Errorf("want refusal (exit 126, %q on stderr, nothing run, no report)\n%v", tt.refused, r)
				}
				return
			}
			if r.code != 0 || statErr != nil || r.report == nil {
				t.Fatalf("want the command run and a report\n%v", r)
			}
			var got []string
			for _, m := range r.report.Missing {
				got = append(got, strings.Fields(m)[0])
			}
			if diff := cmp.Diff(tt.wantMissing, got); diff != "" {
				t.Errorf("missing (-want +got):\n%s", diff)
			}
			if r.report.Landlock != tt.landlock || r.report.LandlockABI != tt.abi {
				t.Errorf("report landlock=%v abi=%d, want %v %d", r.report.Landlock, r.report.LandlockABI, tt.landlock, tt.abi)
			}
		})
	}
	t.Run("best-effort on ABI 2 really leaves truncate open", func(t *testing.T) {
		r := confine(t, lenient, runOpts{abi: 2}, l.probe, "truncate", l.roFile)
		if got := strings.TrimSpace(r.stdout); got != "ok 0" {
			t.Errorf("truncate = %q, want ok 0 (ABI 2 cannot restrict it)\n%v", got, r)
		}
	})
}

func TestRlimits(t *testing.T) {
	p := probe(t)
	dir := t.TempDir()
	off := false
	tests := []struct {
		name   string
		limits map[string]uint64
		argv   []string
		want   string
	}{
		{"nofile", map[string]uint64{"nofile": 16}, []string{"nofile", "20"}, "err=EMFILE"},
		{"nofile control", map[string]uint64{"nofile": 64}, []string{"nofile", "20"}, "ok 20"},
		{"fsize", map[string]uint64{"fsize": 1000}, []string{"fsize", filepath.Join(dir, "big"), "4096"}, "err=EFBIG"},
		{"fsize control", map[string]uint64{"fsize": 8192}, []string{"fsize", filepath.Join(dir, "big"), "4096"}, "ok 4096"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			policy := api.Confinement{Seccomp: &off, Rlimits: tt.limits}
			r := confine(t, policy, runOpts{abi: -1, fds: true}, append([]string{p}, tt.argv...)...)
			if got := strings.TrimSpace(r.stdout); got != tt.want {
				t.Errorf("probe %v = %q, want %q\n%v", tt.argv, got, tt.want, r)
			}
			if r.report == nil || len(r.report.Rlimits) != 1 {
				t.Errorf("report rlimits: %+v", r.report)
			}
		})
	}
	t.Run("unknown name is refused", func(t *testing.T) {
		r := confine(t, api.Confinement{Rlimits: map[string]uint64{"nofiles": 1}}, kernelABI, p, "write", filepath.Join(dir, "f"))
		if r.code != ExitRefused || !strings.Contains(r.stderr, `unknown rlimit "nofiles"`) || r.stdout != "" {
			t.Errorf("want refusal\n%v", r)
		}
	})
}

// TestReport checks that the report on fd 4 says what the kernel shows
// in /proc/self/status of the command.
func TestReport(t *testing.T) {
	requiresLandlock(t)
	l := newLayout(t)
	p := l.policy()
	p.Rlimits = map[string]uint64{"nofile": 64, "core": 0}
	r := confine(t, p, runOpts{abi: -1, fds: true}, l.probe, "status")
	if r.code != 0 || r.report == nil {
		t.Fatalf("want a run with a report\n%v", r)
	}
	n, err := normalize(p)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := planLandlock(n, landlockABI())
	if err != nil {
		t.Fatal(err)
	}
	want := api.ConfineReport{
		LandlockABI:   landlockABI(),
		Landlock:      true,
		LandlockRules: len(plan.rules),
		Seccomp:       true,
		NoNewPrivs:    true,
		Rlimits:       []string{"core=0", "nofile=64"},
	}
	if diff := cmp.Diff(want, *r.report); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	status := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		k, v, _ := strings.Cut(line, ":")
		status[k] = strings.TrimSpace(v)
	}
	if status["NoNewPrivs"] != "1" || status["Seccomp"] != "2" {
		t.Errorf("command status %v, want NoNewPrivs 1 and Seccomp 2 (filter)", status)
	}
	if os.Geteuid() == 0 {
		bnd, err := strconv.ParseUint(status["CapBnd"], 16, 64)
		if err != nil {
			t.Fatalf("CapBnd %q: %v", status["CapBnd"], err)
		}
		for _, c := range []int{unix.CAP_SYS_ADMIN, unix.CAP_MKNOD, unix.CAP_SYS_RESOURCE} {
			if bnd&(1<<c) != 0 {
				t.Errorf("capability %d still in the bounding set %#x", c, bnd)
			}
		}
		if bnd&(1<<unix.CAP_CHOWN) == 0 {
			t.Errorf("CAP_CHOWN dropped from the bounding set %#x; root work needs it", bnd)
		}
	}
}

func TestMainUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no policy", []string{"--", "true"}, ExitRefused, "exactly one"},
		{"two policies", []string{"--policy-json", "{}", "--policy", "/x", "--", "true"}, ExitRefused, "exactly one"},
		{"no command", []string{"--policy-json", "{}"}, ExitRefused, "no command"},
		{"unknown field", []string{"--policy-json", `{"network":{}}`, "--", "true"}, ExitRefused, "unknown field"},
		{"bad mode", []string{"--policy-json", `{"enforcement":"loose"}`, "--", "true"}, ExitRefused, "enforcement"},
		{"relative path", []string{"--policy-json", `{"read_only":["usr"]}`, "--", "true"}, ExitRefused, "absolute"},
		{"not found", []string{"--policy-json", `{}`, "--", "paddock-no-such-command"}, ExitRefused, "not found"},
		{"missing path", []string{"--policy-json", `{"seccomp":true}`, "--", "/no/such/command"}, ExitRefused, "no such file"},
		{"stdout as report", []string{"--policy-json", `{}`, "--report-fd", "1", "--", "true"}, ExitRefused, "standard stream"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], tt.args...)
			cmd.Env = append(os.Environ(), envMain+"=1")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != tt.code || !strings.Contains(stderr.String(), tt.msg) {
				t.Errorf("confine %v: %v, stderr %q; want exit %d and %q", tt.args, err, stderr.String(), tt.code, tt.msg)
			}
		})
	}
}

// TestStaticGuest runs the real static binary, when make test built it.
func TestStaticGuest(t *testing.T) {
	guest := os.Getenv("PADDOCK_GUEST")
	if guest == "" {
		t.Skip("needs PADDOCK_GUEST, the static paddock-guest that `make test` builds")
	}
	requiresLandlock(t)
	l := newLayout(t)
	policy, _ := json.Marshal(l.policy())
	for _, tt := range []struct {
		argv   []string
		want   string
		killed syscall.Signal
	}{
		{[]string{"write", filepath.Join(l.outside, "f")}, "err=EACCES", 0},
		{[]string{"write", filepath.Join(l.rw, "f")}, "ok 1", 0},
		{[]string{"io_uring_setup"}, "err=EPERM", 0},
		{[]string{"int80"}, "", syscall.SIGSYS},
	} {
		if tt.argv[0] == "int80" && !has32BitEntry(l.probe) {
			t.Log(no32BitEntry + ": int80 not checked")
			continue
		}
		cmd := exec.Command(guest, append([]string{"confine", "--policy-json", string(policy), "--", l.probe}, tt.argv...)...)
		out, err := cmd.Output()
		var ee *exec.ExitError
		if tt.killed != 0 {
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != tt.killed {
				t.Errorf("static guest, probe %v: %v, want killed by %v", tt.argv, err, tt.killed)
			}
			continue
		}
		if got := strings.TrimSpace(string(out)); got != tt.want {
			t.Errorf("static guest, probe %v = %q (%v), want %q", tt.argv, got, err, tt.want)
		}
	}
}

// hostHasVsock reports whether this kernel opens AF_VSOCK sockets.
func hostHasVsock() bool {
	fd, err := unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM, 0)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}
