//go:build linux && cgo

package confine

import (
	"fmt"

	seccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

// deniedSyscalls fail with EPERM under the filter: kernel and namespace
// administration, process inspection across the sandbox, and kernel
// attack surface an agent's tools have no use for. Names the native
// architecture lacks (vm86 on x86_64, iopl on arm64) are skipped; the
// 32-bit entry points where they exist are refused as a whole below.
var deniedSyscalls = []string{
	// asynchronous I/O that bypasses the per-syscall checks
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	// other processes' memory and descriptors
	"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd",
	// kernel code and state
	"kexec_load", "kexec_file_load", "bpf", "perf_event_open", "userfaultfd",
	"init_module", "finit_module", "delete_module", "reboot", "swapon", "swapoff",
	"acct", "quotactl", "lookup_dcookie", "syslog", "iopl", "ioperm",
	"vm86", "vm86old", "nfsservctl", "uselib",
	// mounts and namespaces
	"mount", "umount2", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount",
	"fspick", "mount_setattr", "pivot_root", "chroot", "unshare", "setns",
	// the kernel keyring
	"keyctl", "add_key", "request_key",
	// file handles reach files by inode, around path-based rules
	"open_by_handle_at", "name_to_handle_at",
	// the clock
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
}

// namespaceFlags make clone create namespaces; clone with any of them
// fails with EPERM (unshare and setns are refused outright).
// CLONE_NEWTIME shares its bit with the exit signal in clone's flags and
// can only be asked for through clone3 and unshare, both refused.
var namespaceFlags = []uint64{
	unix.CLONE_NEWNS, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC, unix.CLONE_NEWUSER,
	unix.CLONE_NEWPID, unix.CLONE_NEWNET, unix.CLONE_NEWCGROUP,
}

// Personalities a program may still ask for: Linux itself and the query.
const (
	perLinux = 0
	perQuery = 0xffffffff
)

type seccompFilter struct{ f *seccomp.ScmpFilter }

// buildSeccomp builds the filter without loading it. The default is to
// allow: this is a deny-list, the Landlock ruleset is the allow-list.
func buildSeccomp() (*seccompFilter, error) {
	api, err := seccomp.GetAPI()
	if err != nil || api < 2 {
		return nil, fmt.Errorf("the kernel or libseccomp lacks seccomp filters with thread sync (API level %d)", api)
	}
	f, err := seccomp.NewFilter(seccomp.ActAllow)
	if err != nil {
		return nil, err
	}
	sf := &seccompFilter{f}
	if err := sf.addRules(); err != nil {
		sf.release()
		return nil, err
	}
	return sf, nil
}

func (sf *seccompFilter) addRules() error {
	f := sf.f
	// Only the native architecture is in the filter. Calls through
	// another entry (int 0x80 on x86_64, AArch32 on arm64) meet the
	// bad-arch action, which kills the whole process: a 32-bit table
	// would need its own deny-list, and nothing legitimate uses it.
	if err := f.SetBadArchAction(seccomp.ActKillProcess); err != nil {
		return fmt.Errorf("set bad-arch action: %w", err)
	}
	// NewFilter already asked for TSYNC (the filter reaches every
	// thread); no_new_privs lets it load without CAP_SYS_ADMIN.
	if err := f.SetNoNewPrivsBit(true); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	deny := seccomp.ActErrno.SetReturnCode(int16(unix.EPERM))
	for _, name := range deniedSyscalls {
		nr, ok := resolve(name)
		if !ok {
			continue
		}
		if err := f.AddRule(nr, deny); err != nil {
			return fmt.Errorf("deny %s: %w", name, err)
		}
	}

	// clone3 passes its flags in memory the filter cannot read. ENOSYS
	// makes glibc fall back to clone, whose flags it can.
	if nr, ok := resolve("clone3"); ok {
		if err := f.AddRule(nr, seccomp.ActErrno.SetReturnCode(int16(unix.ENOSYS))); err != nil {
			return fmt.Errorf("deny clone3: %w", err)
		}
	}
	if nr, ok := resolve("clone"); ok {
		for _, flag := range namespaceFlags {
			c, err := seccomp.MakeCondition(0, seccomp.CompareMaskedEqual, flag, flag)
			if err != nil {
				return err
			}
			if err := f.AddRuleConditional(nr, deny, []seccomp.ScmpCondition{c}); err != nil {
				return fmt.Errorf("deny clone with flag %#x: %w", flag, err)
			}
		}
	}

	// personality: refuse everything but PER_LINUX (0) and the query
	// (0xffffffff): the flags it could set (ADDR_NO_RANDOMIZE,
	// READ_IMPLIES_EXEC...) only weaken the programs started afterwards.
	// libseccomp takes one comparison per argument and rule, so "not 0"
	// is refused and the query let through by a more specific rule whose
	// action (LOG) allows the call.
	if nr, ok := resolve("personality"); ok {
		notLinux, err := seccomp.MakeCondition(0, seccomp.CompareNotEqual, perLinux)
		if err != nil {
			return err
		}
		if err := f.AddRuleConditional(nr, deny, []seccomp.ScmpCondition{notLinux}); err != nil {
			return fmt.Errorf("deny personality: %w", err)
		}
		query, err := seccomp.MakeCondition(0, seccomp.CompareEqual, perQuery)
		if err != nil {
			return err
		}
		// A kernel or libseccomp without the LOG action leaves the
		// query refused, which is the safe side.
		_ = f.AddRuleConditional(nr, seccomp.ActLog, []seccomp.ScmpCondition{query})
	}

	// The x32 ABI shares the x86_64 audit arch and marks its numbers
	// with bit 30. libseccomp sends them to the bad-arch action when x32
	// is not in the filter (TestSeccomp checks it does).
	return nil
}

// resolve finds name on the native architecture. Negative numbers are
// libseccomp's stand-ins for calls this architecture does not have.
func resolve(name string) (seccomp.ScmpSyscall, bool) {
	nr, err := seccomp.GetSyscallFromName(name)
	if err != nil || nr < 0 {
		return 0, false
	}
	return nr, true
}

// load installs the filter on every thread (TSYNC).
func (sf *seccompFilter) load() error {
	return sf.f.Load()
}

func (sf *seccompFilter) release() {
	if sf != nil && sf.f != nil {
		sf.f.Release()
	}
}

func seccompAvailable() bool {
	api, err := seccomp.GetAPI()
	return err == nil && api >= 2
}
