//go:build linux && cgo

package confine

import (
	"fmt"
	"slices"

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

// allowedFamilies are the socket address families a process in a sandbox
// may create: local sockets, IPv4, IPv6, and netlink for the protocols in
// allowedNetlink. socket and socketpair with any other family fail with
// EAFNOSUPPORT, the kernel's own answer for a family it was built
// without, which programs already handle. The others are of no use to a
// sandbox and some are harmful: vsock shares the host's port space from a
// namespace sandbox and reaches the host's services from a VM, packet and
// XDP sockets see raw traffic, and KCM, ALG, TIPC, RDS, SMC, CAN,
// Bluetooth, the radio and telephony families and the rest are kernel code
// (often loaded on demand by the first socket() naming it) with a history
// of bugs. A family added to a later kernel is refused too: the rule is
// "above the highest allowed number", not a list of known ones.
//
// A VM's agent keeps its vsock channel: PID 1 binds and listens on the
// port before vm-serve loads this filter and hands it the listening
// descriptor, and accept() is not filtered (guest/vminit).
var allowedFamilies = []int{unix.AF_UNIX, unix.AF_INET, unix.AF_INET6, unix.AF_NETLINK}

// allowedNetlink are the netlink protocols a sandbox may open: routing
// (interfaces and addresses: getaddrinfo, ip, Go's net.Interfaces) and
// socket diagnostics (ss). Others (generic netlink and its many
// subsystems, audit, uevents, netfilter, xfrm, crypto, connector, ...)
// fail with EPROTONOSUPPORT, the answer of a kernel without them. The
// agent's and PID 1's own netlink work (lo, the transparent redirect's
// route and nftables) happens before the filter is loaded.
var allowedNetlink = []int{unix.NETLINK_ROUTE, unix.NETLINK_SOCK_DIAG}

// allowedInet are the protocols an IPv4 or IPv6 socket may name: 0 (the
// type's default), TCP, UDP, ICMP (ping sockets) and ICMPv6. Any other
// (SCTP, DCCP, L2TP, SMC, UDP-Lite, MPTCP, raw protocol numbers, ...)
// fails with EPROTONOSUPPORT, a kernel without that protocol's answer:
// socket() naming a protocol the kernel has not loaded asks it to load
// the module, so from a namespace sandbox it would load kernel code into
// the host's kernel. Go and glibc fall back to TCP when MPTCP is refused.
var allowedInet = []int{0, unix.IPPROTO_ICMP, unix.IPPROTO_TCP, unix.IPPROTO_UDP, unix.IPPROTO_ICMPV6}

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

	if err := addSocketRules(f); err != nil {
		return err
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

// addSocketRules refuses socket and socketpair for every family outside
// allowedFamilies, netlink sockets outside allowedNetlink and IPv4 and
// IPv6 sockets outside allowedInet (socketpair too: it creates its
// sockets, and may load their module, before it refuses them). The
// arguments are ints the kernel truncates from 64 bits, so every
// comparison is on the whole register: a value with any of the upper bits
// set is above the highest allowed number and refused, whatever its low
// half names.
func addSocketRules(f *seccomp.ScmpFilter) error {
	noFamily := seccomp.ActErrno.SetReturnCode(int16(unix.EAFNOSUPPORT))
	noProtocol := seccomp.ActErrno.SetReturnCode(int16(unix.EPROTONOSUPPORT))
	eq := func(arg uint, v int) seccomp.ScmpCondition {
		c, err := seccomp.MakeCondition(arg, seccomp.CompareEqual, uint64(v))
		if err != nil {
			panic(err) // only for an argument number above 5
		}
		return c
	}
	above := func(arg uint, v int) seccomp.ScmpCondition {
		c, err := seccomp.MakeCondition(arg, seccomp.CompareGreater, uint64(v))
		if err != nil {
			panic(err)
		}
		return c
	}
	// refused lists the conditions that refuse every value of arg outside
	// allowed: one per value below the highest allowed, one above it.
	refused := func(arg uint, allowed []int) [][]seccomp.ScmpCondition {
		top := slices.Max(allowed)
		var out [][]seccomp.ScmpCondition
		for v := 0; v < top; v++ {
			if !slices.Contains(allowed, v) {
				out = append(out, []seccomp.ScmpCondition{eq(arg, v)})
			}
		}
		return append(out, []seccomp.ScmpCondition{above(arg, top)})
	}
	for _, name := range []string{"socket", "socketpair"} {
		nr, ok := resolve(name)
		if !ok {
			continue
		}
		for _, conds := range refused(0, allowedFamilies) {
			if err := f.AddRuleConditional(nr, noFamily, conds); err != nil {
				return fmt.Errorf("deny %s families: %w", name, err)
			}
		}
	}
	for _, name := range []string{"socket", "socketpair"} {
		nr, ok := resolve(name)
		if !ok {
			continue
		}
		for _, fam := range []struct {
			family  int
			allowed []int
		}{{unix.AF_NETLINK, allowedNetlink}, {unix.AF_INET, allowedInet}, {unix.AF_INET6, allowedInet}} {
			for _, conds := range refused(2, fam.allowed) {
				conds = append([]seccomp.ScmpCondition{eq(0, fam.family)}, conds...)
				if err := f.AddRuleConditional(nr, noProtocol, conds); err != nil {
					return fmt.Errorf("deny %s protocols of family %d: %w", name, fam.family, err)
				}
			}
		}
	}
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
