package agent

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// landlockABI asks the kernel for its Landlock ABI version; 0 when
// Landlock is not built in or not enabled.
func landlockABI() int {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0
	}
	return int(v)
}

// seccompAvailable reports whether seccomp filters can be installed:
// PR_GET_SECCOMP fails without CONFIG_SECCOMP, and SECCOMP_GET_ACTION_AVAIL
// fails without filter support.
func seccompAvailable() bool {
	if _, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0); err != nil {
		return false
	}
	action := uint32(unix.SECCOMP_RET_ERRNO)
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&action)))
	return errno == 0
}
