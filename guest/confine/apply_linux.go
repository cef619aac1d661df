//go:build linux

package confine

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"paddock.dev/paddock/guest/api"
)

// Apply confines the calling process, every thread of it, and whatever it
// execs: no_new_privs, a reduced capability bounding set when running as
// root, a Landlock ruleset, the seccomp filter, then the resource limits.
// The policy is checked in full before anything is changed, so an error
// from validation or from a strict-mode check leaves the process as it
// was; an error after that leaves it partly confined and the caller must
// not run the command.
//
// The zero Confinement asks for nothing, and nothing is done.
func Apply(p api.Confinement) (api.ConfineReport, error) {
	var report api.ConfineReport
	if !p.Enabled() {
		return report, nil
	}
	n, err := normalize(p)
	if err != nil {
		return report, err
	}
	if !execLists {
		n.exec = nil
	}

	// Plan everything first: nothing below may fail for a reason that
	// could have been seen before the first change.
	plan, err := planLandlock(n, landlockABI())
	if err != nil {
		return report, err
	}
	report.LandlockABI = plan.abi
	report.Missing = append(report.Missing, plan.missing...)
	var filter *seccompFilter
	if n.seccomp {
		filter, err = buildSeccomp()
		if err != nil {
			if n.strict {
				return report, fmt.Errorf("%w: seccomp: %v", ErrNotEnforceable, err)
			}
			report.Missing = append(report.Missing, "seccomp ("+err.Error()+")")
		}
		defer filter.release()
	}
	limits, err := resolveRlimits(n.rlimits)
	if err != nil {
		return report, err
	}

	// no_new_privs on every thread: the command can never gain
	// privileges through setuid or file capabilities, and seccomp may
	// be loaded without CAP_SYS_ADMIN.
	if err := ll.AllThreadsPrctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return report, fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	report.NoNewPrivs = true

	if err := dropBoundingCaps(); err != nil {
		return report, err
	}

	if err := plan.restrict(); err != nil {
		return report, fmt.Errorf("landlock: %w", err)
	}
	if plan.enabled() {
		report.Landlock = true
		report.LandlockRules = len(plan.rules)
		report.ExecAllowlist = plan.execList
	}

	if filter != nil {
		if err := filter.load(); err != nil {
			if n.strict {
				return report, fmt.Errorf("seccomp: %w", err)
			}
			report.Missing = append(report.Missing, "seccomp ("+err.Error()+")")
		} else {
			report.Seccomp = true
		}
	}

	// Limits last: a small nofile or as must not starve the steps above.
	for _, l := range limits {
		if err := l.set(); err != nil {
			return report, err
		}
		report.Rlimits = append(report.Rlimits, l.name+"="+strconv.FormatUint(l.value, 10))
	}
	return report, nil
}

// atExecveCheck makes execveat run every check of an exec, Landlock's
// included, and stop short of it (Linux 6.14). Older kernels refuse the
// unknown flag with EINVAL.
const atExecveCheck = 0x10000

// execCheck reports whether path may be executed now. When the kernel
// cannot tell, it says yes and the exec itself decides.
func execCheck(path string) error {
	p, err := syscall.BytePtrFromString(path)
	if err != nil {
		return err
	}
	argv := []*byte{p, nil}
	envp := []*byte{nil}
	atFDCWD := unix.AT_FDCWD
	_, _, errno := syscall.Syscall6(unix.SYS_EXECVEAT, uintptr(atFDCWD), uintptr(unsafe.Pointer(p)),
		uintptr(unsafe.Pointer(&argv[0])), uintptr(unsafe.Pointer(&envp[0])), atExecveCheck, 0)
	runtime.KeepAlive(argv)
	runtime.KeepAlive(envp)
	if errno == 0 || errno == syscall.EINVAL {
		return nil
	}
	return errno
}

// Support reports what confinement this kernel and build can enforce.
func Support() api.ConfineSupport {
	return api.ConfineSupport{LandlockABI: landlockABI(), Seccomp: seccompAvailable()}
}

// testLandlockABI, when not negative, replaces the kernel's Landlock ABI
// version. Only the tests set it, to reach the refusal paths.
var testLandlockABI = -1

// landlockABI is the Landlock ABI the kernel offers, capped at the
// newest one go-landlock knows (0: no Landlock).
func landlockABI() int {
	v := testLandlockABI
	if v < 0 {
		var err error
		if v, err = ll.LandlockGetABIVersion(); err != nil || v < 0 {
			return 0
		}
	}
	return min(v, len(abiConfigs)-1)
}

// Resource limits by wire name.
var rlimitResources = map[string]int{
	"nofile":  unix.RLIMIT_NOFILE,
	"nproc":   unix.RLIMIT_NPROC,
	"fsize":   unix.RLIMIT_FSIZE,
	"core":    unix.RLIMIT_CORE,
	"as":      unix.RLIMIT_AS,
	"cpu":     unix.RLIMIT_CPU,
	"stack":   unix.RLIMIT_STACK,
	"memlock": unix.RLIMIT_MEMLOCK,
}

type resolvedRlimit struct {
	rlimit
	resource int
}

func resolveRlimits(in []rlimit) ([]resolvedRlimit, error) {
	out := make([]resolvedRlimit, 0, len(in))
	for _, l := range in {
		res, ok := rlimitResources[l.name]
		if !ok {
			return nil, fmt.Errorf("%w: unknown rlimit %q", ErrBadPolicy, l.name)
		}
		out = append(out, resolvedRlimit{l, res})
	}
	return out, nil
}

// set makes value both the soft and the hard limit. A hard limit already
// below value is kept (raising it needs privilege and would loosen the
// limit anyway). syscall.Setrlimit, not x/sys, so that syscall.Exec does
// not put back the nofile soft limit the Go runtime saved at start.
func (l resolvedRlimit) set() error {
	var cur syscall.Rlimit
	if err := syscall.Getrlimit(l.resource, &cur); err != nil {
		return fmt.Errorf("getrlimit %s: %w", l.name, err)
	}
	v := min(l.value, cur.Max)
	if err := syscall.Setrlimit(l.resource, &syscall.Rlimit{Cur: v, Max: v}); err != nil {
		return fmt.Errorf("setrlimit %s=%d: %w", l.name, v, err)
	}
	return nil
}

// boundingDrop are the capabilities removed from the bounding set when
// confine runs as root. The exec'd root command then cannot hold them,
// while the ones ordinary root work uses (file ownership and DAC
// override, setuid/setgid for package managers, networking) stay.
// sys_resource would let the command raise its hard rlimits again, and
// mknod would let it create a device node in a writable directory and
// reach a raw disk through it; the rest administer the kernel, which the
// seccomp filter already refuses.
var boundingDrop = []uintptr{
	unix.CAP_SYS_MODULE, unix.CAP_SYS_RAWIO, unix.CAP_SYS_PACCT, unix.CAP_SYS_ADMIN,
	unix.CAP_SYS_BOOT, unix.CAP_SYS_RESOURCE, unix.CAP_SYS_TIME, unix.CAP_SYS_PTRACE,
	unix.CAP_MKNOD, unix.CAP_LINUX_IMMUTABLE, unix.CAP_AUDIT_CONTROL, unix.CAP_MAC_OVERRIDE,
	unix.CAP_MAC_ADMIN, unix.CAP_SYSLOG, unix.CAP_WAKE_ALARM, unix.CAP_BLOCK_SUSPEND,
	unix.CAP_PERFMON, unix.CAP_BPF, unix.CAP_CHECKPOINT_RESTORE,
}

// testKeepCaps skips dropBoundingCaps. Only the tests set it, so that a
// refusal they see as root comes from the seccomp filter alone.
var testKeepCaps bool

// dropBoundingCaps shrinks the bounding set on every thread when the
// effective uid is 0. A non-root command has none of these to lose.
func dropBoundingCaps() error {
	if os.Geteuid() != 0 || testKeepCaps {
		return nil
	}
	for _, c := range boundingDrop {
		err := ll.AllThreadsPrctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0)
		if errors.Is(err, unix.EINVAL) {
			continue // the kernel predates this capability
		}
		if err != nil {
			return fmt.Errorf("prctl(PR_CAPBSET_DROP, %d): %w", c, err)
		}
	}
	return nil
}

// ApplyBaseline loads the system-call deny-list (see deniedSyscalls) on
// every thread of the calling process, without Landlock or rlimits. The
// sandbox's first process calls it before it starts the agent, so every
// process in a sandbox runs under it, confined or not. no_new_privs must
// already be set.
func ApplyBaseline() error {
	sf, err := buildSeccomp()
	if err != nil {
		return err
	}
	defer sf.release()
	return sf.load()
}
