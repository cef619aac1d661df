package hypervisor

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// LockHeld reports whether some process holds a flock (or other lock) on
// path, from /proc/locks: nothing is locked to find out, so a daemon
// starting at that moment is not refused its own lock.
func LockHeld(path string) bool {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return false
	}
	want := fmt.Sprintf("%02x:%02x:%d", unix.Major(uint64(st.Dev)), unix.Minor(uint64(st.Dev)), st.Ino)
	f, err := os.Open("/proc/locks")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "1: FLOCK  ADVISORY  WRITE 1234 fe:00:5678 0 EOF"; a waiter's
		// line has "->" after the number.
		for _, field := range strings.Fields(sc.Text()) {
			if field == want {
				return true
			}
		}
	}
	return false
}
